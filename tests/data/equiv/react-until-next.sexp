; ReAct written as the issue's alternative reading: the loop until the two-step ending.
(define react-until-next
 (:states
   (Thought (:text "Thought:"))
   (Action (:text "Action:"))
   (Action-Input (:text "Action Input:"))
   (Observation (:text "Observation:") (:flags :env-input))
   (Final-Thought (:text "Final Thought:"))
   (Answer (:text "Answer:")))
 (:behavior
   (until (next Thought Action Action-Input Observation) (next Final-Thought Answer))))
