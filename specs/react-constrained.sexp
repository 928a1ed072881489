; ReAct written loosely with LTL :constraints doing the work: the behaviour only says
; "some steps, then Final-Thought and Answer"; the constraints order the loop. It accepts exactly
; the traces of react.sexp (checked by `ltlagent check-equiv specs/react.sexp specs/react-constrained.sexp`).
(define react-constrained
 (:states
   (Thought (:text "Thought:"))
   (Action (:text "Action:"))
   (Action-Input (:text "Action Input:"))
   (Observation (:text "Observation:") (:flags :env-input))
   (Final-Thought (:text "Final Thought:"))
   (Answer (:text "Answer:")))
 (:behavior
   (next
     (until (or Thought Action Action-Input Observation) Final-Thought)
     Answer))
 (:constraints
   (always (implies Thought (next Action)))
   (always (implies Action (next Action-Input)))
   (always (implies Action-Input (next Observation)))
   (always (implies Observation (next (or Thought Final-Thought))))
   (or Thought Final-Thought)))
