; ReAct for real models (ours): the paper's ReAct order (Figure 9), with what a served agent needs.
; Action may only name one of the agent's tools (:choices :tools); every other step the model writes
; is one line (:stop "\n"), so a model that runs on after its answer is cut at the line's end.
(define react-agent
 (:states
   (Thought (:text "Thought:") (:stop "\n"))
   (Action (:text "Action:") (:choices :tools))
   (Action-Input (:text "Action Input:") (:stop "\n"))
   (Observation (:text "Observation:") (:flags :env-input))
   (Final-Thought (:text "Final Thought:") (:stop "\n"))
   (Answer (:text "Answer:") (:stop "\n")))
 (:behavior
   (next
     (until
       (next Thought Action Action-Input Observation)
       Final-Thought)
     Answer)))
