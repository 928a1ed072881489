; specs/react.sexp (the paper's Figure 9) as the paper's experiment ran it: the Action state may only
; name one of the agent's tools, and at most 3 Thought/Action/Action-Input/Observation loops (the
; paper caps the loops outside its spec; here the bound is part of the spec).
(define react-paper-agent
 (:states
   (Thought (:text "Thought:"))
   (Action (:text "Action:") (:choices :tools))
   (Action-Input (:text "Action Input:"))
   (Observation (:text "Observation:") (:flags :env-input))
   (Final-Thought (:text "Final Thought:"))
   (Answer (:text "Answer:")))
 (:behavior
   (next
     (repeat (next Thought Action Action-Input Observation) :max 3)
     Final-Thought
     Answer)))
