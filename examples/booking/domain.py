"""A small booking domain: users, bookings and the tools an agent calls on them (issue 17's
worked example; the guard and enforcement examples reuse it).

Everything is in memory and deterministic: ``Database.fresh()`` gives the same users and bookings
each time, and each tool returns a JSON string, as a tool result message would carry it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

USERS = {
    "u1": {"name": "Ann Lee", "email": "ann@example.com"},
    "u2": {"name": "Bo Chen", "email": "bo@example.com"},
    "u3": {"name": "Cy Diaz", "email": "cy@example.com"},
    "u4": {"name": "Di Kaur", "email": "di@example.com"},
}

BOOKINGS = {
    "b100": {"user": "u1", "room": "Oak", "date": "2026-12-03", "guests": 2},
    "b101": {"user": "u2", "room": "Elm", "date": "2026-12-05", "guests": 4},
    "b102": {"user": "u3", "room": "Oak", "date": "2026-12-09", "guests": 1},
}

ROOMS = ("Oak", "Elm", "Pine")

#: The tools in the OpenAI chat format (``tools=[…]`` of a chat-completions request).
TOOLS = [
    {"type": "function", "function": {
        "name": "find_user", "description": "Find a user by name or email.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
                       "required": ["query"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": "book", "description": "Book a room for a user on a date.",
        "parameters": {"type": "object", "properties": {
            "user_id": {"type": "string"}, "room": {"type": "string", "enum": list(ROOMS)},
            "date": {"type": "string", "pattern": "[0-9]{4}-[0-9]{2}-[0-9]{2}"},
            "guests": {"type": "integer"}},
            "required": ["user_id", "room", "date", "guests"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": "change_booking", "description": "Move a booking to another date.",
        "parameters": {"type": "object", "properties": {
            "booking_id": {"type": "string"},
            "date": {"type": "string", "pattern": "[0-9]{4}-[0-9]{2}-[0-9]{2}"}},
            "required": ["booking_id", "date"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": "cancel_booking", "description": "Cancel a booking.",
        "parameters": {"type": "object", "properties": {"booking_id": {"type": "string"}},
                       "required": ["booking_id"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": "transfer_to_human", "description": "Hand the conversation to a human agent.",
        "parameters": {"type": "object", "properties": {"reason": {"type": "string"}},
                       "required": ["reason"], "additionalProperties": False}}},
]


@dataclass
class Database:
    """Users and bookings; the tools below read and change it."""

    users: dict[str, dict[str, object]] = field(default_factory=dict)
    bookings: dict[str, dict[str, object]] = field(default_factory=dict)

    @staticmethod
    def fresh() -> Database:
        return Database({k: dict(v) for k, v in USERS.items()},
                        {k: dict(v) for k, v in BOOKINGS.items()})

    def call(self, name: str, arguments: dict[str, object]) -> str:
        """Run tool ``name``; errors are results too (as an API would return them)."""
        fn = getattr(self, "tool_" + name, None)
        if fn is None:
            return json.dumps({"error": f"unknown tool {name!r}"})
        try:
            return json.dumps(fn(**arguments))
        except TypeError as e:
            return json.dumps({"error": f"bad arguments: {e}"})

    def tool_find_user(self, query: str) -> dict[str, object]:
        q = query.lower()
        for uid, u in self.users.items():
            if q in str(u["name"]).lower() or q == str(u["email"]).lower():
                return {"user_id": uid, **u,
                        "bookings": sorted(b for b, v in self.bookings.items() if v["user"] == uid)}
        return {"error": f"no user matches {query!r}"}

    def tool_book(self, user_id: str, room: str, date: str, guests: int) -> dict[str, object]:
        if user_id not in self.users:
            return {"error": f"no user {user_id!r}"}
        if room not in ROOMS:
            return {"error": f"no room {room!r}"}
        if any(b["room"] == room and b["date"] == date for b in self.bookings.values()):
            return {"error": f"{room} is taken on {date}"}
        bid = f"b{100 + len(self.bookings)}"
        while bid in self.bookings:
            bid = f"b{int(bid[1:]) + 1}"
        self.bookings[bid] = {"user": user_id, "room": room, "date": date, "guests": guests}
        return {"booking_id": bid, **self.bookings[bid]}

    def tool_change_booking(self, booking_id: str, date: str) -> dict[str, object]:
        if booking_id not in self.bookings:
            return {"error": f"no booking {booking_id!r}"}
        self.bookings[booking_id]["date"] = date
        return {"booking_id": booking_id, **self.bookings[booking_id]}

    def tool_cancel_booking(self, booking_id: str) -> dict[str, object]:
        if self.bookings.pop(booking_id, None) is None:
            return {"error": f"no booking {booking_id!r}"}
        return {"cancelled": booking_id}

    def tool_transfer_to_human(self, reason: str) -> dict[str, object]:
        return {"transferred": True, "reason": reason}
