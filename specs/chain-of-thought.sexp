; Chain-of-thought agent: the paper's Figure 10.
(define chain-of-thought
 (:states
   (Thought (:text "Let's think step by step."))
   (Answer (:text "Answer:"))
)
 (:behavior
   (next Thought Answer)
)
)
