; ReAct with the same behaviour but another Thought text and Observation not :env-input.
(define react-think
 (:states
   (Thought (:text "Think:"))
   (Action (:text "Action:"))
   (Action-Input (:text "Action Input:"))
   (Observation (:text "Observation:"))
   (Final-Thought (:text "Final Thought:"))
   (Answer (:text "Answer:")))
 (:behavior
   (next (until (next Thought Action Action-Input Observation) Final-Thought) Answer)))
