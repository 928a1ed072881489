; Ablated ReAct agent: the paper's Figure 4b (no Action, Action-Input or Answer states).
(define react-ablation
 (:states
    (Thought (:text "Thought:"))
    (Observation (:text "Observation:") (:flags :env-input))
    (Final-Thought (:text "Final Thought:"))
)
  (:behavior
    (until
        (next Thought Observation)
        Final-Thought)
)
)
