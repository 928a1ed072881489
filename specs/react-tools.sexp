; ReAct with a content constraint: the Action state may only name one of the tools.
; The choices "(:choices :tools)" would take the names of the agent's tools at run time instead.
(define react-tools
 (:states
   (Thought (:text "Thought:") (:stop "\n"))
   (Action (:text "Action:") (:choices "Search" "Lookup" "Calculator"))
   (Action-Input (:text "Action Input:") (:stop "\n"))
   (Observation (:text "Observation:") (:flags :env-input))
   (Final-Thought (:text "Final Thought:"))
   (Answer (:text "Answer:")))
 (:behavior
   (next
     (until
       (next Thought Action Action-Input Observation)
       Final-Thought)
     Answer)))
