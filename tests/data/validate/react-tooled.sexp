; ReAct whose Action names one of the agent's tools (filled in at run time, or by --tools).
(define react-tooled
 (:states
   (Thought (:text "Thought:"))
   (Action (:text "Action:") (:choices :tools))
   (Action-Input (:text "Action Input:"))
   (Observation (:text "Observation:") (:flags :env-input))
   (Final-Thought (:text "Final Thought:"))
   (Answer (:text "Answer:") (:regex "[0-9][0-9,]*( to [0-9][0-9,]* ft)?")))
 (:behavior
   (next (until (next Thought Action Action-Input Observation) Final-Thought) Answer)))
