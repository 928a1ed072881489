; Chat-bot agent: the paper's Figure 12. Traces are infinite: Chat-Bot and User alternate forever.
(define chat-bot
 (:states
    (Chat-Bot (:text "Chat Bot:"))
    (User (:text "User:") (:flags :env-input))
)
 (:behavior
    (always
        (next Chat-Bot User)
    )
)
)
