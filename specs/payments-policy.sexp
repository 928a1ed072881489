; A banking agent's policy against prompt injection (issue 27; docs/design.md §2.6).
; The destination of a payment or an e-mail must be one the user wrote, not one that only a tool
; result (a web page, an e-mail, a transaction note) put in front of the model.
(define payments-policy
 (:states
   (System (:from system))
   (User (:from user))
   (Pay (:call "send_money") (:args (recipient ?dest)))
   (Mail (:call "send_email") (:args (recipients ?dest)))
   (Call (:call))
   (Result (:from tool))
   (Reply (:from assistant)))
 (:format hermes)
 (:constraints
   ; the user named the destination: their own words contain it
   (destination-from-user
     (forall (?dest)
       (always (implies (or (Pay ?dest) (Mail ?dest)) (once (mentions User ?dest))))))
   ; at most one payment per user turn: a second one needs the user to speak again
   (one-payment-per-turn
     (always (implies Pay (previously (since (not Pay) User)))))))
