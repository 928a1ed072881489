"""One ReAct turn written for llguidance (Lark) and XGrammar (EBNF), the language of ltlagent's
``react-tools`` spec from its start up to the pause for the environment (issue 11).

The language, read off the spec and the monitor's semantics (docs/design.md §5), over text from the start:

* at most one whitespace byte (``WS``: space, tab, LF, CR, VT, FF), then either
* ``Thought:`` + a line + ``Action:`` + the tool name + ``Action Input:`` + a line + ``Observation:``
  (decoding pauses there: the environment writes next), where a *line* is text without a newline and
  without any of the six prompt strings, ended either by the next prompt string directly or by its
  newline (the ``:stop``) followed by at most one whitespace byte and the prompt string; the tool name
  is ``Search``, ``Lookup`` or ``Calculator`` with any whitespace around it; or
* ``Final Thought:`` + text without prompt strings (newlines allowed: no ``:stop``) + ``Answer:`` +
  text without prompt strings, then EOS.

A prompt string counts anywhere, also mid-line, so "without prompt strings" is what forbids the
others (``Final Thought:`` contains ``Thought:``). llguidance says it with its regex extensions
(``&`` intersection, ``~`` complement) inside one lexeme; XGrammar has no complement, so the
"text without the prompt strings" is spelled out as a right-linear grammar from the keyword
automaton (:func:`avoid_rules`), one rule per proper prefix of a prompt string.

These grammars give the same verdict as ltlagent on every string of :data:`TEST_STRINGS` (checked by
``tests/test_peer_grammars.py`` and before every benchmark run). At the token level the masks still
differ in known ways, counted per step by ``bench_peers.py``: with ``build_index(utf8=False)``
ltlagent's free text is any bytes, so it also allows tokens that cannot continue valid UTF-8 (a
lone continuation byte after a whole character; by default it forbids them, as the engines do); a
state's text may begin with whitespace including newlines before its ``:stop`` counts (``Thought:``
then a newline and an indented line), which these grammars do not spell out; where a prompt string is forced
(after a text ended and one state may follow) ltlagent allows only its forced token, the longest
token of the prompt string, while the engines allow every way of writing those bytes (and the
optional whitespace separator).
"""

from __future__ import annotations

KEYWORDS = ("Thought:", "Action:", "Action Input:", "Observation:", "Final Thought:", "Answer:")
TOOLS = ("Search", "Lookup", "Calculator")
WS_CHARS = " \t\n\r\x0b\x0c"

#: (text, verdict) with verdict "complete" (a whole turn: paused at Observation, or EOS may follow),
#: "prefix" (may still be continued into one) or "dead"; ltlagent decides, the engines must agree.
TEST_STRINGS: tuple[tuple[str, str], ...] = (
    ("Thought: look it up\nAction: Search\nAction Input: capital of France\nObservation:", "complete"),
    ("Thought: look it up Action: Search Action Input: France Observation:", "complete"),
    (" Thought:\n Action:\n\n Lookup \t\nAction Input:x\n\tObservation:", "complete"),
    ("Thought:Action:CalculatorAction Input:Observation:", "complete"),
    ("Thought: café 日本 😀 ok\nAction: Search\nAction Input: x\nObservation:", "complete"),
    ("Final Thought: two\nlines\nAnswer: 42", "complete"),
    ("Final Thought:Answer:", "complete"),
    ("Thought: an Action Inp is fine\nAction: Search\nAction Input: Obs\nObservation:", "complete"),
    ("Thought: I should", "prefix"),
    ("Thought: I should\n", "prefix"),
    ("Thought: x\nAction: Sea", "prefix"),
    ("Thought: x\nAction: Search  ", "prefix"),
    ("Thought: x\nAction: Search\nAction Input: y\nObserv", "prefix"),
    ("Final Thought: a\nb", "prefix"),
    ("\n", "prefix"),
    ("Fin", "prefix"),
    ("Thought: x Final Th", "prefix"),
    ("Thought: x Thought: y", "dead"),
    ("Thought: x Final Thought: y", "dead"),
    ("Thought: x\nObservation:", "dead"),
    ("Thought: x\n\nAction: Search", "prefix"),  # the :stop newline, then one separator
    ("Thought: x\n\n\nAction: Search", "dead"),
    ("Thought: x\nfoo", "dead"),
    ("Thought: x\nAction: Google\n", "dead"),
    ("Thought: x\nAction: Search\nAction Input: y\nObservation: z", "dead"),
    ("Thought: x\nAction: Search\nAction Input: y Answer:", "dead"),
    ("Answer: 42", "dead"),
    ("  Thought:", "dead"),
    ("Final Thought: a Thought: b", "dead"),
    ("Final Thought: a\nAnswer: 4 Answer: 2", "dead"),
    ("Action: Search", "dead"),
)


def _lark_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def lark_grammar() -> str:
    """The turn for llguidance: one lexeme, prompt strings excluded with ``& ~(...)``."""
    kw = " | ".join(_lark_str(k) for k in KEYWORDS)
    tools = " | ".join(_lark_str(t) for t in TOOLS)
    return f"""start: TURN
TURN: WS? (THOUGHT_TURN | FINAL_TURN)
THOUGHT_TURN: "Thought:" LINE END "Action:" WS* ({tools}) WS* "Action Input:" LINE END "Observation:"
END: ("\\n" WS?)?
FINAL_TURN: "Final Thought:" TEXT "Answer:" TEXT
WS: /[ \\t\\n\\r\\x0b\\x0c]/
KW: {kw}
LINE: /[^\\n]*/ & ~(/(?s:.*)/ KW /(?s:.*)/)
TEXT: /(?s:.*)/ & ~(/(?s:.*)/ KW /(?s:.*)/)
"""


def _ebnf_char(c: str) -> str:
    """``c`` inside an EBNF string literal or character class."""
    esc = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\\": "\\\\", '"': '\\"', "]": "\\]", "[": "\\[",
           "^": "\\^", "-": "\\-"}
    if c in esc:
        return esc[c]
    if ord(c) < 0x20:
        return f"\\x{ord(c):02x}"
    return c


def avoid_rules(name: str, keywords: tuple[str, ...], excluded: str) -> list[str]:
    """EBNF rules ``name_0 …``: text (possibly empty) that contains none of ``keywords`` and none of
    the characters ``excluded``. States are the proper prefixes of keywords (Aho–Corasick): the
    longest suffix of the text so far that begins a keyword."""
    prefixes = sorted({k[:i] for k in keywords for i in range(len(k))}, key=lambda p: (len(p), p))
    num = {p: i for i, p in enumerate(prefixes)}
    alphabet = sorted({c for k in keywords for c in k} - set(excluded))

    def goto(state: str, c: str) -> int | None:
        s = state + c
        if any(s.endswith(k) for k in keywords):
            return None  # a prompt string would be written
        while s not in num:
            s = s[1:]
        return num[s]

    others = "".join(_ebnf_char(c) for c in sorted(set(alphabet) | set(excluded)))
    rules = []
    for p in prefixes:
        alts = ['""', f"[^{others}] {name}_0"]
        for c in alphabet:
            t = goto(p, c)
            if t is not None:
                alts.append(f'"{_ebnf_char(c)}" {name}_{t}')
        rules.append(f"{name}_{num[p]} ::= " + " | ".join(alts))
    return rules


def ebnf_grammar() -> str:
    """The turn for XGrammar (GBNF-style EBNF, ``root`` first)."""
    ws = "[" + "".join(_ebnf_char(c) for c in WS_CHARS) + "]"
    tools = " | ".join(f'"{t}"' for t in TOOLS)
    lines = [
        "root ::= ws? (thought_turn | final_turn)",
        f"ws ::= {ws}",
        'thought_turn ::= "Thought:" line_0 ("\\n" ws?)? "Action:" ws* tool ws* "Action Input:" line_0 '
        '("\\n" ws?)? "Observation:"',
        f"tool ::= {tools}",
        'final_turn ::= "Final Thought:" text_0 "Answer:" text_0',
        *avoid_rules("line", KEYWORDS, "\n"),
        *avoid_rules("text", KEYWORDS, ""),
    ]
    return "\n".join(lines) + "\n"
