; ReAct with the loop bound inside the spec: at most 3 Thought/Action/Action-Input/Observation
; loops before the Final-Thought (the paper caps loops at 3 outside its spec).
(define react-bounded
 (:states
   (Thought (:text "Thought:"))
   (Action (:text "Action:"))
   (Action-Input (:text "Action Input:"))
   (Observation (:text "Observation:") (:flags :env-input))
   (Final-Thought (:text "Final Thought:"))
   (Answer (:text "Answer:")))
 (:behavior
   (next
     (repeat (next Thought Action Action-Input Observation) :max 3)
     Final-Thought
     Answer)))
