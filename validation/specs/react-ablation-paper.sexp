; specs/react-ablation.sexp (the paper's Figure 4b) with the same loop bound as react-paper.sexp:
; no Action, Action-Input or Answer states; at most 3 Thought/Observation loops.
(define react-ablation-paper-agent
 (:states
   (Thought (:text "Thought:"))
   (Observation (:text "Observation:") (:flags :env-input))
   (Final-Thought (:text "Final Thought:")))
 (:behavior
   (next
     (repeat (next Thought Observation) :max 3)
     Final-Thought)))
