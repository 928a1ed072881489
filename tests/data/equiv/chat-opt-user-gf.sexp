(define chat-opt-user-gf
 (:states (Chat-Bot (:text "Chat Bot:")) (User (:text "User:") (:flags :env-input)))
 (:behavior (always (next Chat-Bot (optional User))))
 (:constraints (always (eventually User))))
