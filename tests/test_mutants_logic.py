"""Fixed tests for the mutants of ``ltlagent/logic/`` and ``ltlagent/chat/`` that survived the
tests mutmut ran against them (issue 31; the run and the score are in docs/mutation.md). Each
test names the mutants it kills (mutmut's names, without the ``ltlagent.`` prefix) and reads
like something a user of the library would do: a ``check-log --format json`` report, a guard
asking which tools it may offer, a decoder resuming a conversation half-way.

How each was checked: in mutmut's ``mutants/`` tree, with the mutant switched on
(``MUTANT_UNDER_TEST=<name> pytest tests/test_mutants_logic.py``) the test failed; with none
switched on, it passed.
"""

from __future__ import annotations

import json

import pytest

from ltlagent import Event, LogError, Policy, parse_spec
from ltlagent.chat.events import conversation_events, message_events
from ltlagent.chat.logs import read_conversations


def _call(name: str, args: object = None) -> dict[str, object]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function",
         "function": {"name": name, "arguments": args if isinstance(args, str)
                      else json.dumps(args or {})}}]}


def _user(text: str) -> dict[str, object]:
    return {"role": "user", "content": text}


LOOKUP = Policy.load(parse_spec(
    '(define answer (:states (User (:from user)) (Lookup (:call "lookup")) (Result (:from tool))'
    ' (Reply (:from assistant))) (:constraints (answers (eventually Reply))))'))

PAYMENTS = Policy.load(parse_spec("""(define payments
 (:states (User (:from user)) (Tool (:from tool))
   (Pay (:call "send_money") (:args (recipient ?dest))) (Call (:call)) (Reply (:from assistant)))
 (:constraints (destination-from-user
   (forall (?dest) (always (implies (Pay ?dest) (once (mentions User ?dest))))))))"""))


# --- logic/policy.py: the JSON reports (check-log --format json, the guard's refusals) ----------

def test_the_json_report_of_each_verdict_has_its_documented_keys() -> None:
    """Mutants ``ConversationReport.to_dict`` 4, 5, 8-11 and ``Violation.to_dict`` 8-13 (a key
    renamed, ``unmet`` None): what ``check-log --format json`` prints is read by programs."""
    assert LOOKUP.check([_user("hi")]).to_dict() == {
        "verdict": "incomplete", "steps": 1, "violations": [], "unmet": ["answers"]}
    assert LOOKUP.check([_user("hi"), {"role": "assistant", "content": "hello"}]).to_dict() == {
        "verdict": "ok", "steps": 2, "violations": []}
    bad = PAYMENTS.check([_user("send 5 to AB12"), _call("send_money", {"recipient": "EVIL9"})])
    assert bad.to_dict() == {"verdict": "violated", "steps": 2, "violations": [
        {"constraint": "destination-from-user", "step": 1, "message": 1, "state": "Pay",
         "allowed": [], "binding": {"?dest": "EVIL9"},
         "reason": "recipient 'EVIL9' was not mentioned by the user; mentioned by the user: "
                  "'send 5 to AB12'"}]}
    booking = Policy.load("booking-policy")
    torn = booking.check([_user("hi"), _call("book", "{")])  # arguments cut off mid-JSON
    d = json.loads(json.dumps(torn.to_dict()))  # as a program reading the output sees it
    assert d["verdict"] == "violated" and d["message"] == 1 and "not JSON" in d["error"]
    assert [v["constraint"] for v in d["violations"]] == ["confirm-before-write",
                                                           "lookup-before-write"]
    assert d["violations"][0]["allowed"] == ["System", "Confirm", "User", "Lookup", "Handoff",
                                             "Call", "Result", "Reply"]
    assert d["violations"][0]["state"] == "Write"


def test_a_decision_as_json_names_the_broken_rule_and_the_values() -> None:
    """Mutants ``Decision.to_dict`` 1-15 (no test called it: the guard's refusal record)."""
    cur = PAYMENTS.cursor()
    cur.push(Event.say("user", "send 5 to AB12"))
    no = cur.decide(Event.call("send_money", {"recipient": "EVIL9"}))
    assert no.to_dict() == {"allowed": False, "state": "Pay",
                            "violated": ["destination-from-user"],
                            "allowed_states": ["User", "Tool", "Pay", "Call", "Reply"],
                            "binding": {"?dest": "EVIL9"},
                            "reason": "recipient 'EVIL9' was not mentioned by the user; "
                                      "mentioned by the user: 'send 5 to AB12'"}
    yes = cur.decide(Event.call("send_money", {"recipient": "AB12"}))
    assert yes.to_dict() == {"allowed": True, "state": "Pay", "violated": [],
                             "allowed_states": ["User", "Tool", "Pay", "Call", "Reply"]}


# --- logic/policy.py: the cursor's message-level entry points -----------------------------------

def test_pushing_messages_from_the_middle_of_a_conversation() -> None:
    """Mutants ``PolicyCursor.push_messages`` 5, 7, 10, 12 and ``push_message`` 3: a guard that
    already took the first messages pushes only the new ones (``start``), gets a decision for
    each of them, and a malformed one is reported at its index in the whole list."""
    msgs = [_user("find it"), _call("lookup"), {"role": "tool", "tool_call_id": "c1",
                                                 "content": "42"}, {"role": "assistant",
                                                                    "content": "It is 42."}]
    cur = LOOKUP.cursor()
    first = cur.push_messages(msgs[:2])
    assert [d.state for d in first] == ["User", "Lookup"]
    rest = cur.push_messages(msgs, start=2)
    assert [d.state for d in rest] == ["Result", "Reply"] and all(d.allowed for d in rest)
    assert cur.steps == 4 and cur.trace == ["User", "Lookup", "Result", "Reply"]
    assert cur.is_complete
    with pytest.raises(LogError) as e:
        LOOKUP.cursor().push_messages([_user("x"), {"role": "robot", "content": "beep"}])
    assert e.value.index == 1 and str(e.value).startswith("message 1:")
    with pytest.raises(LogError) as e:
        LOOKUP.cursor().push_message({"role": "robot", "content": "beep"}, 3)
    assert e.value.index == 3


# --- logic/policy.py: which calls a decoder may offer -------------------------------------------

def test_call_options_of_a_policy_without_call_states_is_empty() -> None:
    """Mutants ``PolicyCursor.call_options`` 10, 12 and ``value_terms`` 6, 8 (``.get`` without
    its ``()`` default): a chat-only policy under a decoder that offers tools offers none."""
    chat = Policy.load(parse_spec("(define chat (:states (User (:from user))"
                                  " (Reply (:from assistant))))"))
    assert chat.cursor().call_options(["lookup"]) == {}
    # a first-order rule with no call state to bind its variable (vacuous, but accepted)
    fo_text = Policy.load(parse_spec("(define echo (:states (User (:from user))"
                                     " (Reply (:from assistant))) (:constraints"
                                     " (no-echo (forall (?w) (always (not (mentions Reply ?w)))))))"))
    assert fo_text.cursor().value_terms("lookup") == {}


def test_call_options_per_tool_narrowing() -> None:
    """Mutants ``PolicyCursor.call_options`` 25 (the chain not stopped at a catch-all), 28
    (``continue`` → ``break``: a tool no state names hides the tools after it), 32 and 46 (a
    single ``(:args …)`` state read as a catch-all, or ``chain[1]``)."""
    only = Policy.load(parse_spec("""(define only (:states (User (:from user))
      (Small (:call "pay") (:args (amount (:regex "[0-9]{1,3}"))))
      (Look (:call "lookup")) (Again (:call "lookup") (:args (q (:regex "x"))))
      (Reply (:from assistant))))"""))
    cur = only.cursor()
    cur.push(Event.say("user", "pay me"))
    assert cur.call_options(["delete", "pay", "lookup"]) == {
        "pay": (("amount", "[0-9]{1,3}"),), "lookup": ()}


def test_value_terms_give_up_when_the_state_depends_on_the_arguments() -> None:
    """Mutant ``PolicyCursor.value_terms`` 18 (the chain stopped at an ``(:args …)`` state):
    a call of ``send_money`` is in Big or in Pay depending on its amount, so no single term
    holds token by token; the decoder must write it unconstrained and judge it afterwards."""
    p = Policy.load(parse_spec("""(define two (:states (User (:from user))
      (Big (:call "send_money") (:args (amount (:regex "[0-9]{4,}")) (recipient ?d)))
      (Pay (:call "send_money") (:args (recipient ?d))) (Reply (:from assistant)))
      (:constraints (from-user (forall (?d) (always (implies (or (Big ?d) (Pay ?d))
                                                      (once (mentions User ?d))))))))"""))
    cur = p.cursor()
    cur.push(Event.say("user", "send 5 to AB12"))
    assert cur.value_terms("send_money") is None


def test_value_terms_allow_nothing_once_the_policy_is_broken() -> None:
    """A dead cursor (a step broke the policy; docs/mutation.md, "Found on the way"): ``decide``
    allows nothing there, ``call_options`` offers no tool, and the value terms agree -- every
    key a rule compares gets the empty term. (Before: the terms still allowed what the user had
    mentioned, as if the refused payment had not happened.)"""
    from ltlagent.text.values import value_language

    cur = PAYMENTS.cursor()
    cur.push(Event.say("user", "send 5 to AB12"))
    assert not cur.push(Event.call("send_money", {"recipient": "EVIL9"})).allowed
    assert cur.is_dead and cur.call_options(["send_money"]) == {}
    terms = cur.value_terms("send_money")
    assert terms is not None and set(terms) == {"recipient"}
    for v in ("AB12", "EVIL9", ""):
        assert v not in value_language(terms["recipient"])
        assert not cur.decide(Event.call("send_money", {"recipient": v})).allowed
    assert cur.value_terms("other") == {}  # no rule compares its arguments, dead or alive
    # dead through a propositional part: the value rule's own instances are still fine
    p = Policy.load(parse_spec("""(define both
     (:states (User (:from user)) (Pay (:call "send_money") (:args (recipient ?d)))
       (Reply (:from assistant)))
     (:constraints (confirmed (always (implies Pay (previously Reply))))
       (from-user (forall (?d) (always (implies (Pay ?d) (once (mentions User ?d))))))))"""))
    cur = p.cursor()
    cur.push(Event.say("user", "send 5 to AB12"))
    cur.push(Event.call("send_money", {"recipient": "AB12"}))  # not right after a reply
    assert cur.is_dead and cur.trace == ["User", "Pay"]
    terms = cur.value_terms("send_money")
    assert terms is not None and "AB12" not in value_language(terms["recipient"])


# --- logic/valueterms.py: the values a decoder may let a model write, per rule shape ------------

_FO_STATES = """(User (:from user)) (Tool (:from tool)) (Pay (:call "pay") (:args (to ?x) (cc ?x)))
   (Look (:call "look") (:args (id ?x))) (Call (:call)) (Reply (:from assistant))"""
#: A conversation in which values come from the user, the tools and a lookup, in that order.
_HISTORY = (Event.say("user", "pay ab or 7"), Event.say("tool", "abc"),
            Event.call("look", {"id": "c"}), Event.say("tool", "b c"),
            Event.call("pay", {"to": "ab", "cc": ["7"]}), Event.say("user", "ok"))
_CANDIDATES = ("ab", "b", "abc", "c", "7", "b c", "x", "y", "ok", "zz", "a")


@pytest.mark.parametrize("condition", [
    "(previously (mentions Tool ?x))",  # a payee the tool named in the step just before
    "(or (once (Look ?x)) (once (mentions User ?x)))",
    "(and (once (mentions User ?x)) (not (once (Look ?x))))",
    "(since (not (mentions Tool ?x)) (mentions User ?x))",  # no tool said it since the user did
    "(historically (not (mentions Tool ?x)))",
    "(implies (once (mentions Tool ?x)) (once (Look ?x)))",
    "(or (once (mentions Tool ?x)) (previously (once (Pay ?x))))",  # a payee paid before
    "(or (once (and (previously User) (mentions Tool ?x))) false)",
])
def test_value_terms_are_what_decide_allows_for_each_past_operator(condition: str) -> None:
    """Mutants ``condition_term`` 5, 40, 82, 96, 97, 130, 133, ``_and`` 6, 8 and
    ``PolicyCursor.value_terms`` 48: the term the decoder intersects with the argument's schema
    allows exactly the values ``decide`` allows, at every step of a conversation, for the past
    operators and connectives of the fragment (design §14.1), not only ``once``/``not``."""
    from ltlagent.text.values import value_language

    rule = f"(forall (?x) (always (implies (Pay ?x) {condition})))"
    p = Policy.load(parse_spec(f"(define fo (:states {_FO_STATES}) (:constraints (r {rule})))"))
    cur = p.cursor()
    seen = 0
    for ev in (*_HISTORY, None):
        terms = cur.value_terms("pay")
        assert terms is not None and set(terms) <= {"to", "cc"}, (condition, terms)
        for v in _CANDIDATES:
            allowed = cur.decide(Event.call("pay", {"to": v})).allowed
            assert allowed == ("to" not in terms or v in value_language(terms["to"])), (
                condition, cur.trace, v, terms)
            seen += allowed
        if ev is not None and cur.decide(ev).allowed:  # a decoder never writes a refused step
            cur.push(ev)
    assert 0 < seen < len(_CANDIDATES) * (len(_HISTORY) + 1)  # the rule allows some, not all


def test_value_terms_read_the_keys_of_the_rules_variable() -> None:
    """Mutants ``condition_term`` 40 and ``PolicyCursor.value_terms`` 48 (``value_keys`` asked for
    no variable): where a state binds two variables, only the keys of the rule's variable count
    -- a payment goes to an account that was looked up, not to the account's owner."""
    from ltlagent.text.values import value_language

    p = Policy.load(parse_spec("""(define lookup-first (:states (User (:from user))
      (Look (:call "look") (:args (id ?x) (owner ?y)))
      (Pay (:call "pay") (:args (to ?x) (memo ?y))) (Reply (:from assistant)))
      (:constraints (looked-up (forall (?x) (always (implies (Pay ?x) (once (Look ?x))))))))"""))
    cur = p.cursor()
    cur.push(Event.say("user", "pay my landlord"))
    cur.push(Event.call("look", {"id": "AB12", "owner": "Zed"}))
    terms = cur.value_terms("pay")
    assert terms is not None and set(terms) == {"to"}
    for v, ok in (("AB12", True), ("Zed", False), ("AB1", False)):
        assert cur.decide(Event.call("pay", {"to": v, "memo": "rent"})).allowed is ok
        assert (v in value_language(terms["to"])) is ok


# --- logic/policy.py: conversations that are not well-formed ------------------------------------

def test_check_says_malformed_for_what_is_not_a_conversation_or_has_torn_arguments() -> None:
    """Mutants ``Policy.check`` 5 (no verdict given), 44 (a torn call always 'violated') and 50
    (the word): a log record that is a string, and a call whose arguments are not JSON but that
    breaks no rule, are 'malformed' -- not violations the model made."""
    assert LOOKUP.check("hello").to_dict() == {
        "verdict": "malformed", "steps": 0, "violations": [],
        "error": "a conversation is a list of messages", "message": None}
    torn = LOOKUP.check([_user("find it"), _call("lookup", '{"q": "x"'),
                         {"role": "assistant", "content": "done"}])
    assert torn.verdict == "malformed" and torn.error_message == 1
    assert torn.error is not None and "not JSON" in torn.error


# --- logic/composite.py and logic/rules.py: what the rules read ---------------------------------

def test_a_nested_argument_key_binds_the_value_inside_the_object() -> None:
    """Mutant ``_at`` 3 (the key not split at '.'): ``(:args (payee.iban ?x))`` reads
    ``{"payee": {"iban": …}}``, as OpenAI tools with object parameters send it."""
    p = Policy.load(parse_spec("""(define nested (:states (User (:from user))
      (Pay (:call "pay") (:args (payee.iban ?x))) (Reply (:from assistant)))
      (:constraints (from-user (forall (?x) (always (implies (Pay ?x)
                                                      (once (mentions User ?x))))))))"""))
    ok = [_user("pay DE89 please"), _call("pay", {"payee": {"iban": "DE89", "name": "Bo"}})]
    assert p.check(ok).verdict == "ok"
    bad = [_user("pay DE89 please"), _call("pay", {"payee": {"iban": "GB00", "name": "DE89"}})]
    r = p.check(bad)
    assert r.verdict == "violated" and r.violations[0].binding == (("?x", "GB00"),)


@pytest.mark.parametrize(("rule", "verdicts"), [
    # (since true User): some earlier-or-now step was a User step, i.e. (once User)
    ("(always (implies Reply (since true User)))", ("ok", "violated")),
    ("(always (implies Reply (or (once User) false)))", ("ok", "violated")),
    ("(always (implies Reply (and (once User) (not false))))", ("ok", "violated")),
    ("(always (implies Reply (iff (once User) (not (once Lookup)))))", ("ok", "violated")),
    # one past subformula used twice in a rule: compiled once, read twice
    ("(always (and (implies Lookup (once User)) (implies Reply (once User))))", ("ok", "violated")),
    ("(always (implies Reply (and (once User) (once Lookup) (previously (once User)))))",
     ("violated", "violated")),
])
def test_past_rules_with_constants_and_shared_subformulas(rule: str,
                                                         verdicts: tuple[str, str]) -> None:
    """Mutants ``_Builder.node`` 17, 23 (``true``/``false`` inside a past formula misread), 60
    (a shared past node's index off by one) and ``DirectRule._step`` 48 (``iff`` reading a third
    operand): each rule judged on a conversation that starts
    with the user and on one that starts with the assistant's reply."""
    p = Policy.load(parse_spec(
        '(define r (:states (User (:from user)) (Lookup (:call "lookup")) (Result (:from tool))'
        f' (Reply (:from assistant))) (:constraints (r {rule})))'))
    user_first = [_user("hi"), {"role": "assistant", "content": "hello"}]
    reply_first = [{"role": "assistant", "content": "hello"}, _user("hi")]
    assert (p.check(user_first).verdict, p.check(reply_first).verdict) == verdicts


def test_a_liveness_search_of_exactly_the_budget_still_answers(monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    """Mutant ``DirectRule.live`` 42 (``len(seen) >= LIVENESS_BUDGET``: the search gives up one
    state early). ``LIVENESS_BUDGET`` is the most local states a search visits before it answers
    "live" unproved: a rule that is dead from the start (the skeleton cannot see that ``B`` now
    makes ``once B`` true) whose search needs exactly that many states is still found dead; one
    state fewer in the budget and it is trusted as live (design §3.6)."""
    from ltlagent.logic import rules

    spec = parse_spec("""(define never (:states (A (:from user)) (B (:from tool))
      (C (:from assistant))) (:constraints (r (eventually (and B (not (once B))
        (once (previously A)) (once (previously (previously C))))))))""")

    def fresh() -> rules.DirectRule:
        rule = rules.compile_rule(spec, "r", spec.constraints[0])
        assert isinstance(rule, rules.DirectRule)
        return rule

    whole = fresh()
    assert not whole.live(whole.initial)
    needed = len(whole.live_memo)  # every state the search saw, each now known dead
    assert needed > 10 and not any(whole.live_memo.values())
    monkeypatch.setattr(rules, "LIVENESS_BUDGET", needed)
    exact = fresh()
    assert not exact.live(exact.initial)
    monkeypatch.setattr(rules, "LIVENESS_BUDGET", needed - 1)
    short = fresh()
    assert short.live(short.initial)


# --- chat/events.py: events as data, and the words of a refused message -------------------------

def test_events_as_json_keep_their_kind_and_text() -> None:
    """Mutants ``Event.to_dict`` 6, 19 (a key renamed): the trace ``check-log`` and the guard log
    show, a torn call included."""
    evs = conversation_events([_user("hi"), _call("f", "{"), _call("g", {"a": 1})], lenient=True)
    assert [e.to_dict() for e in evs] == [
        {"message": 0, "author": "user", "kind": "text", "text": "hi"},
        {"message": 1, "author": "assistant", "kind": "call", "tool": "f", "arguments": None,
         "text": "{", "error": evs[1].error},
        {"message": 2, "author": "assistant", "kind": "call", "tool": "g", "arguments": {"a": 1}}]
    assert evs[1].error is not None and evs[1].error.startswith("tool call arguments are not JSON")


@pytest.mark.parametrize(("content", "words"), [
    ([{"type": "text", "text": "hi"}, 7], "content parts must be objects with 'text'"),
    ([{"type": "text", "text": ["hi"]}], "a content part's 'text' must be a string"),
    ([{"text": None}], "a content part's 'text' must be a string"),
])
def test_the_words_of_a_bad_content_part(content: object, words: str) -> None:
    """Mutants ``_part_text`` 6, 24: the error a user reads for a content part that is not text."""
    with pytest.raises(LogError) as e:
        message_events({"role": "user", "content": content}, 5)
    assert (str(e.value), e.value.index) == (f"message 5: {words}", 5)


# --- chat/logs.py: log files as users write them ------------------------------------------------

_CONV = json.dumps([{"role": "user", "content": "hi"}]).encode()


def _records(tmp_path: object, data: bytes) -> list[tuple[object, ...]]:
    from pathlib import Path

    path = Path(str(tmp_path)) / "log.jsonl"
    path.write_bytes(data)
    return [(r.index, r.id, r.line, r.messages is not None, None if r.error is None
             else str(r.error)) for r in read_conversations(path)]


def test_records_split_at_a_lone_carriage_return_inside_a_line(tmp_path: object) -> None:
    """Mutants ``_Lines.__next__`` 10 (the search for a lone CR only near the line's end) and 26
    (the CR before a last byte not seen): a log written with old Mac line ends, or with one
    stray CR between two records, is still one conversation per line."""
    assert _records(tmp_path, _CONV + b"\r" + _CONV + b"\n") == [
        (0, 0, 1, True, None), (1, 1, 2, True, None)]
    assert _records(tmp_path, _CONV + b"\r7") == [
        (0, 0, 1, True, None),
        (1, 1, 2, False, "a conversation is a list of messages or an object holding one, found int")]


def test_a_carriage_return_between_tokens_of_a_json_lines_record_is_whitespace(
        tmp_path: object) -> None:
    """Mutant ``_Lines.stream`` 2 (every later line searched for a lone CR): in a JSON Lines file
    whose lines end in ``\\n``, a CR inside a record (JSON whitespace) does not split it."""
    rec = b'{"id": "a",\r "messages": [{"role": "user", "content": "hi"}]}'
    assert _records(tmp_path, _CONV + b"\n" + rec + b"\n") == [
        (0, 0, 1, True, None), (1, "a", 2, True, None)]


def test_record_ids_and_indices_of_good_and_bad_lines(tmp_path: object) -> None:
    """Mutants ``parse_record`` 15 (a bad line's index lost) and 51 (a bare array's id lost): each
    record is reported with its ordinal, its ``id`` when it has one, and its line."""
    data = _CONV + b"\n" + b'{"messages": [{"role": "user", "content": "hi"}], "id": "x"}\n{bad\n'
    got = _records(tmp_path, data)
    assert got[:2] == [(0, 0, 1, True, None), (1, "x", 2, True, None)]
    assert got[2][:4] == (2, 2, 3, False) and str(got[2][4]).endswith(
        "log.jsonl:3:2: malformed JSON: Expecting property name enclosed in double quotes")


def test_errors_of_a_whole_json_document_point_at_its_line(tmp_path: object) -> None:
    """Mutants ``iter_raw`` 65 (an array of conversations on one line followed by more lines
    read as if alone: the rest silently dropped) and 115 (a document's error placed as a line's):
    a pretty-printed document after a blank line, and two arrays of conversations."""
    pretty = (b"\n[\n  [{\"role\": \"user\", \"content\": \"hi\"}],\n"
              b"  [{\"role\": \"user\" \"content\": 1}]\n]\n")
    with pytest.raises(LogError) as e:
        _records(tmp_path, pretty)
    assert str(e.value).endswith("log.jsonl:4:20: malformed JSON: Expecting ',' delimiter")
    with pytest.raises(LogError) as e:
        _records(tmp_path, b"[" + _CONV + b"]\n[" + _CONV + b"]\n")
    assert str(e.value).endswith("log.jsonl:2:1: malformed JSON: Extra data")


def test_the_words_of_unreadable_logs(tmp_path: object) -> None:
    """Mutants ``_open`` 14, ``read_conversations`` 4 (the file's name lost from a record's error)
    and ``_messages_of`` 34, 37, 46 (the words and hints for records without one message list)."""
    from pathlib import Path

    with pytest.raises(LogError) as e:
        list(read_conversations(tmp_path))  # type: ignore[arg-type]
    assert str(e.value) == f"{tmp_path}: is a directory, not a log file"
    path = Path(str(tmp_path)) / "log.jsonl"
    path.write_bytes(b'{"id": 1, "turns": []}\n'
                     b'{"id": 2, "a": [{"role": "user"}], "b": [{"role": "user"}]}\n{bad\n')
    r1, r2, r3 = read_conversations(path)
    assert r1.error is not None and r2.error is not None and r3.error is not None
    assert (r1.error.message, r1.error.hint) == (
        "no list of messages in this record (no 'messages' field, and no list whose items "
        "have a 'role')", "name the field with --messages-key KEY")
    assert (r2.error.message, r2.error.hint) == (
        "several lists of messages in this record (a, b)",
        "name the one to check with --messages-key KEY")
    assert r3.error.source == str(path) and r3.error.line == 3


# --- logic/automaton.py: the views ``show`` and notebooks read ----------------------------------

def test_the_automaton_as_dot_summary_and_graph() -> None:
    """Mutants ``Automaton.to_dot`` 14, 16, 20, 32, 46, ``summary`` 3, ``graph`` 1, 10 and
    ``index`` 1 (none of the tests run against logic/ called them): what ``ltlagent show --dot``
    and ``--format json`` print, and the networkx graph, for a question answered yes or no."""
    from ltlagent.logic.compiled import compile_spec

    a = compile_spec(parse_spec('(define yn (:states (Ask (:text "Q:")) (Yes (:text "Yes"))'
                                ' (No (:text "No"))) (:behavior (next Ask (or Yes No))))')).automaton
    assert a.to_dot() == (
        'digraph automaton {\n  rankdir=LR;\n  node [shape=circle];\n'
        '  init [shape=point, label=""];\n  init -> 0;\n'
        '  0 [shape=circle, label="0"];\n  1 [shape=circle, label="1"];\n'
        '  2 [shape=doublecircle, label="2"];\n'
        '  0 -> 1 [label="Ask"];\n  1 -> 2 [label="Yes\\nNo"];\n}\n')
    summary = a.summary()
    assert isinstance(summary.pop("translate_seconds"), float)
    assert summary == {"states": 3, "live_states": 3, "initial": 0, "initially_allowed": ["Ask"],
                       "accepting": [2], "infinite": False}
    g = a.graph()
    assert sorted(g.nodes) == [0, 1, 2]  # type: ignore[attr-defined]
    assert sorted(g.edges(data="label")) == [  # type: ignore[attr-defined]
        (0, 1, "Ask"), (1, 2, "No"), (1, 2, "Yes")]
    assert (a.index("Ask"), a.index("No")) == (0, 2)
    bot = compile_spec("chat-bot").automaton
    assert bot.summary()["accepting"] == [] and bot.summary()["infinite"] is True
    assert "doublecircle" not in bot.to_dot()


# --- logic/ltl.py: the formulas ``ltlagent show`` prints ----------------------------------------

def test_show_prints_each_repetition_and_constraint_readably() -> None:
    """Mutants ``_times`` 9, 10, 13, ``sere`` 4, ``constraint_ltl`` 17, 22, 32 and
    ``build_formulas`` 24: the readable behaviour (SERE) and constraints, every repetition bound
    and first-order form, and no coded formula when there are no constraints."""
    from ltlagent.logic.ltl import build_formulas, constraint_ltl

    s = parse_spec("""(define f (:states (A (:text "a")) (B (:text "b")) (C (:text "c")))
      (:behavior (next (repeat A :min 1) (repeat B :min 2) (repeat C :min 0)
                       (repeat A :min 2 :max 3) (repeat B :min 2 :max 2) (until_1_4 A B) (or A C)))
      (:constraints (always (implies B (once A))) (eventually (since A C))))""")
    f = build_formulas(s)
    assert f.readable == '{"A"[+];"B"[*2..];"C"[*];"A"[*2..3];"B"[*2];{"A"[*1..4];"B"};{"A" | "C"}}'
    assert f.constraints_readable == ('G(("B" -> O("A")))', 'F(("A" S "C"))')
    assert f.coded != "" and build_formulas(parse_spec(
        '(define g (:states (A (:text "a"))) (:behavior (next A A)))')).coded == ""
    fo = parse_spec("""(define g (:states (U (:from user))
      (P (:call "pay") (:args (to ?x)))) (:constraints
      (r (forall (?x) (always (implies (P ?x) (once (mentions U ?x))))))
      (q (exists (?x) (eventually (P ?x))))))""")
    assert tuple(constraint_ltl(c, lambda n: f'"{n}"') for c in fo.constraints) == (
        '∀?x. G(("P"(?x) -> O(mentions("U", ?x))))', '∃?x. F("P"(?x))')


def test_a_behaviour_built_in_python_too_large_is_a_spec_error_with_its_hint() -> None:
    """Mutants ``build_formulas`` 6, 7, 10, 11, 15: a spec changed in Python (``replace``) past
    the unrolling limit gets the reader's error, located in its source, with the hint."""
    from dataclasses import replace

    from ltlagent import SpecError
    from ltlagent.logic.ltl import build_formulas
    from ltlagent.spec.syntax import Repeat, Visit

    s = parse_spec('(define f (:states (A (:text "a")) (B (:text "b"))) (:behavior (next A B)))')
    big = replace(s, behavior=Repeat(Visit("A", s.behavior.loc), 3000, 3000, s.behavior.loc))
    with pytest.raises(SpecError) as e:
        build_formulas(big)
    assert str(e.value) == ("<string>:1:64: error: the behaviour unrolls to 3000 steps, more "
                            "than the limit of 2500")
    assert e.value.hint == "see MAX_UNROLLED_STEPS in ltlagent.spec.syntax (docs/design.md §3.3)"
    assert e.value.text == s.text


def test_names_with_a_backslash_are_quoted_and_infinite_behaviours_have_no_dfa() -> None:
    r"""Mutants ``_quote`` 13 (a backslash in a state name left unescaped in what ``show`` prints)
    and ``behavior_dfa`` 3 (an infinite behaviour with a prefix given a finite DFA)."""
    from ltlagent.logic.automaton import behavior_dfa
    from ltlagent.logic.ltl import build_formulas

    s = parse_spec(r'(define f (:states (A\B (:text "a"))) (:behavior (next A\B A\B)))')
    assert build_formulas(s).readable == r'{"A\\B";"A\\B"}'
    inf = parse_spec('(define f (:states (A (:text "a")) (B (:text "b")))'
                     ' (:behavior (next A (always B))))')
    with pytest.raises(ValueError, match="is infinite"):
        behavior_dfa(inf)


def test_blame_trace_and_allowed_states_of_less_common_verdicts() -> None:
    """Mutants ``Policy.load`` 51, 55, 67, 69 (an infinite spec's constraints blamed as one),
    ``Policy._names`` 2, 6 (the '?' of a step that matches no state), ``check_events`` 28 (an
    unmatched step's allowed states lost) and ``PolicyCursor._judge`` 63 (an allowed decision's
    allowed states)."""
    inf = Policy.load(parse_spec("""(define inf (:states (User (:from user))
      (Reply (:from assistant)) (Call (:call))) (:behavior (always (or User Reply Call)))
      (:constraints (no-call (always (not Call))) (user-first (implies (not User) false))))"""))
    assert inf.check([{"role": "assistant", "content": "hi"}]).to_dict()["violations"] == [
        {"constraint": "user-first", "step": 0, "message": 0, "state": "Reply",
         "allowed": ["User"]}]
    assert inf.check([_user("hi"), _call("x")]).to_dict()["violations"] == [
        {"constraint": "no-call", "step": 1, "message": 1, "state": "Call",
         "allowed": ["User", "Reply"]}]
    q = Policy.load(parse_spec(
        '(define answer (:states (User (:from user)) (Lookup (:call "lookup"))'
        ' (Result (:from tool)) (Reply (:from assistant))) (:constraints (answers (eventually Reply))'
        ' (no-result-first (always (implies Result (once Lookup))))))'))
    r = q.check([{"role": "tool", "content": "x", "tool_call_id": "c"},
                 {"role": "system", "content": "s"}])
    assert r.verdict == "violated" and r.trace == ("Result", "?")
    unmatched = q.check([{"role": "system", "content": "s"}]).to_dict()
    assert unmatched["verdict"] == "unmatched" and unmatched["violations"] == [
        {"constraint": None, "step": 0, "message": 0, "state": None,
         "allowed": ["User", "Lookup", "Reply"]}]
    assert q.cursor().decide(Event.say("user", "ok")).to_dict() == {
        "allowed": True, "state": "User", "violated": [],
        "allowed_states": ["User", "Lookup", "Reply"]}
