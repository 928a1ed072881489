(define chat-greet
 (:states (Greet (:text "Hello:")) (Chat-Bot (:text "Chat Bot:")) (User (:text "User:") (:flags :env-input)))
 (:behavior (next Greet Greet (always (next Chat-Bot User)))))
