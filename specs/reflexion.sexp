; Reflexion agent: the paper's Figure 11.
(define reflexion
 (:states
   (Thought (:text "Thought:"))
   (Action (:text "Action:"))
   (Action-Input (:text "Action Input:"))
   (Observation (:text "Observation:") (:flags :env-input))
   (Final-Thought (:text "Final Thought:"))
   (Answer (:text "Answer:"))
   (Evaluator (:text "Evaluation:") (:flags :env-input))
   (Reflection (:text "Reflection:"))
   (Finish (:text "Generation complete!"))
 )
 (:behavior
   (until
     (next
       (until
        (next Thought Action Action-Input Observation)
        Final-Thought)
      Answer
      Evaluator
      Reflection)
    Finish)
 )
)
