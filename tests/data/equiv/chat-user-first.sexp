(define chat-user-first
 (:states (Chat-Bot (:text "Chat Bot:")) (User (:text "User:") (:flags :env-input)))
 (:behavior (always (next User Chat-Bot))))
