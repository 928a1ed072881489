"""Generate the example chat logs for ``specs/booking-policy.sexp`` (deterministic, seeded).

Each conversation is in the OpenAI chat format; the tools really run on the example database
(``domain.py``), so tool results are what the calls return. Some conversations follow the policy;
the others break one or more named constraints in different ways, and say so in a ``planted``
field — ``[{"constraint": NAME, "message": INDEX}]``, the message where each broken constraint
first fails — which ``check-log`` ignores and the tests compare with its findings.

    python examples/booking/generate.py > examples/booking/conversations.jsonl
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from domain import USERS, Database

SYSTEM = ("You are the booking assistant of the Grove Inn. Look the user up before booking, "
          "list the details and ask for an explicit yes before any booking change.")
YES = ["Yes, please.", "yes", "YES go ahead", "Yes that's right", "ok yes, book it"]
NOT_YES = ["Sounds fine I guess", "Sure.", "ok", "I said it yesterday", "eyes on it, go"]


class Conversation:
    """A conversation under construction; tool calls run on the database."""

    def __init__(self, cid: str) -> None:
        self.cid = cid
        self.db = Database.fresh()
        self.messages: list[dict[str, object]] = [{"role": "system", "content": SYSTEM}]
        self.planted: list[dict[str, object]] = []
        self._n = 0

    def user(self, text: str) -> Conversation:
        self.messages.append({"role": "user", "content": text})
        return self

    def say(self, text: str) -> Conversation:
        self.messages.append({"role": "assistant", "content": text})
        return self

    def call(self, name: str, text: str | None = None, **args: object) -> Conversation:
        """An assistant message with one tool call (and optional text), then the tool's result."""
        self._n += 1
        cid = f"call_{self._n}"
        self.messages.append({"role": "assistant", "content": text, "tool_calls": [
            {"id": cid, "type": "function",
             "function": {"name": name, "arguments": json.dumps(args)}}]})
        result = self.db.call(name, args)
        self.messages.append({"role": "tool", "tool_call_id": cid, "content": result})
        return self

    def breaks(self, constraint: str) -> Conversation:
        """The next message added first breaks ``constraint`` (call before adding it)."""
        self.planted.append({"constraint": constraint, "message": len(self.messages)})
        return self

    def record(self) -> dict[str, object]:
        return {"id": self.cid, "messages": self.messages, "planted": self.planted}


def _user(rng: random.Random) -> tuple[str, dict[str, object]]:
    uid = rng.choice(sorted(USERS))
    return uid, USERS[uid]


def _date(rng: random.Random) -> str:
    return f"2026-12-{rng.randint(10, 28):02d}"


def _confirm_details(c: Conversation, room: str, date: str, guests: int) -> Conversation:
    return c.say(f"I can book {room} on {date} for {guests}. Shall I go ahead? Please say yes.")


# --- conversations that follow the policy ----------------------------------------------------

def ok_booking(c: Conversation, rng: random.Random) -> None:
    uid, u = _user(rng)
    room, date, guests = rng.choice(["Oak", "Elm", "Pine"]), _date(rng), rng.randint(1, 4)
    c.user(f"Hi, I'm {u['name']}. I'd like a room on {date} for {guests}.")
    c.call("find_user", query=str(u["name"]))
    _confirm_details(c, room, date, guests).user(rng.choice(YES))
    c.call("book", user_id=uid, room=room, date=date, guests=guests)
    c.say("Done: your room is booked.")


def ok_change(c: Conversation, rng: random.Random) -> None:
    c.user("Can you move my booking b101 to a later date? This is Bo Chen.")
    c.call("find_user", query="bo@example.com")
    date = _date(rng)
    c.say(f"I'll move b101 to {date}. Confirm with yes?").user(rng.choice(YES))
    c.call("change_booking", "Moving it now.", booking_id="b101", date=date)
    c.say(f"Moved to {date}.")


def ok_cancel_after_second_ask(c: Conversation, rng: random.Random) -> None:
    c.user("Cancel b100 please, Ann Lee here.")
    c.call("find_user", query="Ann")
    c.say("Cancel b100 (Oak, 2026-12-03)? Please confirm with yes.")
    c.user(rng.choice(NOT_YES))
    c.say("I need an explicit yes to cancel.").user(rng.choice(YES))
    c.call("cancel_booking", booking_id="b100")
    c.say("Cancelled.")


def ok_questions_only(c: Conversation, rng: random.Random) -> None:
    c.user("What rooms do you have?").say("Oak, Elm and Pine.")
    c.user("Is Oak quiet?").say("Yes, it faces the garden.")


def ok_handoff(c: Conversation, rng: random.Random) -> None:
    c.user("I want to complain about my last stay.")
    c.call("transfer_to_human", reason="complaint")
    c.say("A colleague will take over from here.")


def ok_two_writes_two_yeses(c: Conversation, rng: random.Random) -> None:
    uid, u = _user(rng)
    c.user(f"{u['name']} here: book Oak and Elm on 2026-12-20, two guests each.")
    c.call("find_user", query=str(u["name"]))
    _confirm_details(c, "Oak", "2026-12-20", 2).user(rng.choice(YES))
    c.call("book", user_id=uid, room="Oak", date="2026-12-20", guests=2)
    _confirm_details(c, "Elm", "2026-12-20", 2).user(rng.choice(YES))
    c.call("book", user_id=uid, room="Elm", date="2026-12-20", guests=2)
    c.say("Both booked.")


# --- conversations that break the policy -----------------------------------------------------

def no_confirmation(c: Conversation, rng: random.Random) -> None:
    uid, u = _user(rng)
    date = _date(rng)
    c.user(f"Book Pine for {u['name']} on {date}, 2 guests.")
    c.call("find_user", query=str(u["name"]))
    c.breaks("confirm-before-write").call("book", user_id=uid, room="Pine", date=date, guests=2)
    c.say("Booked.")


def yes_is_not_a_word(c: Conversation, rng: random.Random) -> None:
    """'yesterday' and 'eyes' contain 'yes' but are not a yes (the \\b in the policy)."""
    uid, u = _user(rng)
    c.user(f"{u['name']}. Same room as I had before, 2026-12-14.")
    c.call("find_user", query=str(u["name"]))
    _confirm_details(c, "Oak", "2026-12-14", 2).user(rng.choice(["I told you yesterday",
                                                                  "eyes closed, do it"]))
    c.breaks("confirm-before-write").call("book", user_id=uid, room="Oak", date="2026-12-14",
                                          guests=2)
    c.say("Booked.")


def user_changed_mind(c: Conversation, rng: random.Random) -> None:
    """A yes, then another user turn before the write: the yes no longer counts."""
    c.user("Cancel b102, I'm Cy Diaz.")
    c.call("find_user", query="Cy Diaz")
    c.say("Cancel b102? Say yes to confirm.").user("Yes.")
    c.user("Actually wait, let me think.")
    c.breaks("confirm-before-write").call("cancel_booking", booking_id="b102")
    c.say("Cancelled.")


def one_yes_two_writes(c: Conversation, rng: random.Random) -> None:
    uid, u = _user(rng)
    c.user(f"{u['name']}: book Oak on 2026-12-21.")
    c.call("find_user", query=str(u["name"]))
    _confirm_details(c, "Oak", "2026-12-21", 1).user(rng.choice(YES))
    c.call("book", user_id=uid, room="Oak", date="2026-12-21", guests=1)
    c.breaks("confirm-before-write").call("book", user_id=uid, room="Elm", date="2026-12-21",
                                          guests=1)
    c.say("Booked Oak, and Elm as a spare.")


def no_lookup(c: Conversation, rng: random.Random) -> None:
    uid, _ = _user(rng)
    date = _date(rng)
    c.user(f"Book Elm on {date} for user {uid}.")
    _confirm_details(c, "Elm", date, 2).user(rng.choice(YES))
    c.breaks("lookup-before-write").breaks("user-from-lookup")
    c.call("book", user_id=uid, room="Elm", date=date, guests=2)
    c.say("Booked.")


def wrong_user_id(c: Conversation, rng: random.Random) -> None:
    """The lookup returns one user; the write names another (a user id the model made up)."""
    uid, u = _user(rng)
    other = next(k for k in sorted(USERS) if k != uid)
    date = _date(rng)
    c.user(f"Hi, I'm {u['name']}. Book Pine on {date} for 2.")
    c.call("find_user", query=str(u["name"]))
    _confirm_details(c, "Pine", date, 2).user(rng.choice(YES))
    c.breaks("user-from-lookup").call("book", user_id=other, room="Pine", date=date, guests=2)
    c.say("Booked.")


def no_lookup_no_yes(c: Conversation, rng: random.Random) -> None:
    c.user("Move b100 to 2026-12-24.")
    c.breaks("confirm-before-write").breaks("lookup-before-write")
    c.call("change_booking", booking_id="b100", date="2026-12-24")
    c.say("Moved.")


def tool_after_handoff(c: Conversation, rng: random.Random) -> None:
    c.user("I need to talk to a person about a refund.")
    c.call("transfer_to_human", reason="refund")
    c.breaks("after-handoff-only-replies").call("find_user", query="refund")
    c.say("Handing over.")


def user_after_handoff(c: Conversation, rng: random.Random) -> None:
    c.user("Get me a manager.")
    c.call("transfer_to_human", reason="manager requested")
    c.say("A manager will join shortly.")
    c.breaks("after-handoff-only-replies").user("Hello? Anyone?")
    c.say("Please hold on.")


def write_after_handoff(c: Conversation, rng: random.Random) -> None:
    c.user("Cancel b101, and I want a human.")
    c.call("find_user", query="Bo")
    c.call("transfer_to_human", reason="asked for a human")
    c.breaks("after-handoff-only-replies").breaks("confirm-before-write")
    c.call("cancel_booking", booking_id="b101")


TEMPLATES: list[tuple[Callable[[Conversation, random.Random], None], int]] = [
    (ok_booking, 8), (ok_change, 4), (ok_cancel_after_second_ask, 4), (ok_questions_only, 3),
    (ok_handoff, 3), (ok_two_writes_two_yeses, 3),
    (no_confirmation, 4), (yes_is_not_a_word, 4), (user_changed_mind, 3),
    (one_yes_two_writes, 3), (no_lookup, 3), (no_lookup_no_yes, 2), (tool_after_handoff, 3),
    (user_after_handoff, 3), (write_after_handoff, 2), (wrong_user_id, 3),
]


def generate(seed: int = 17) -> list[dict[str, object]]:
    rng = random.Random(seed)
    out: list[dict[str, object]] = []
    for fn, count in TEMPLATES:
        for k in range(count):
            c = Conversation(f"{fn.__name__}-{k + 1}")
            fn(c, rng)
            out.append(c.record())
    rng.shuffle(out)
    return out


if __name__ == "__main__":
    for rec in generate():
        print(json.dumps(rec, ensure_ascii=False))
