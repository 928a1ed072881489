; A tool-calling agent's policy over chat events (issue 17; docs/design.md §2.4).
; Each message of a conversation is one step (an assistant message: one step for its text, then
; one per tool call); a step is in the first declared state whose options all match it.
; No (:behavior …): any sequence of these states is allowed and the constraints alone decide.
(define booking-policy
 (:states
   (System (:from system))
   (Confirm (:from user) (:contains "(?i)\\byes\\b"))
   (User (:from user))
   (Lookup (:call "find_user"))
   (Write (:call "book" "change_booking" "cancel_booking"))
   (Handoff (:call "transfer_to_human"))
   (Call (:call))
   (Result (:from tool))
   (Reply (:from assistant)))
 ; how the model writes its calls while decoding: <tool_call>{"name": …, "arguments": …}</tool_call>
 (:format hermes)
 (:constraints
   ; a write needs an explicit yes from the user, with no user turn and no other write since
   (confirm-before-write
     (always (implies Write (previously (since (and (not User) (not Write)) Confirm)))))
   ; look the user up before booking for them
   (lookup-before-write (always (implies Write (once Lookup))))

   ; after a hand-off to a human the agent only relays tool results and replies
   (after-handoff-only-replies
     (always (implies Handoff (weak-next (always (or Result Reply))))))))
