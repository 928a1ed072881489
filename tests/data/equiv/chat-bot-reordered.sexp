; The paper's chat-bot (Figure 12) with the states declared in the other order.
(define chat-bot-reordered
 (:states
    (User (:text "User:") (:flags :env-input))
    (Chat-Bot (:text "Chat Bot:")))
 (:behavior (always (next Chat-Bot User))))
