"""The example boundary and one-line steps (issue 9): real models run on past the answer into a new
example; a context label at the start of a line ends the state's text as EOS would, a complete
trace then ends the run, and the answer is the Answer state's content, not what follows."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import torch

from ltlagent.agent.runner import Agent, Step, run_notes
from ltlagent.agent.tools import Calculator
from ltlagent.decode.machine import boundary_strings
from ltlagent.decode.monitor import Monitor, build_index
from ltlagent.logic.compiled import compile_spec
from ltlagent.spec.syntax import parse_spec
from ltlagent.text.lexer import CONTEXT_LABELS

from . import tiny

torch.set_num_threads(1)


def _walk(mon: Monitor, tok: Any, text: str) -> list[Any]:
    """Feed ``text`` token by token (a forced token replaces the text's own); all events."""
    events: list[Any] = []
    for t in tok.encode(text, add_special_tokens=False):
        if mon.is_finished:
            break
        forced = mon.forced_token()
        t = forced if forced is not None else t
        assert mon._mask().allows(t), (text, tok.decode([t]))
        events += mon.advance(t)
    return events


@pytest.fixture(scope="module")
def tok() -> Any:
    return tiny.byte_level()


def test_boundary_ends_the_answer_and_the_run(tok: Any) -> None:
    index = build_index(compile_spec("react"), tok, context_labels=CONTEXT_LABELS, cache=False)
    mon = Monitor(index, newline=True)
    events = _walk(mon, tok, "Final Thought: easy\nAnswer: 72\nQuestion: what is 2+2?\nThought: hmm")
    ends = [e for e in events if e.kind == "end"]
    assert [(e.state, e.reason, e.text) for e in ends] == [("Answer", "boundary", "Question:")]
    assert mon.text[ends[0].at:].startswith("Question:")
    assert [(s.state, s.text) for s in mon.steps] == [("Final-Thought", "easy"), ("Answer", "72")]
    # the trace is complete and nothing may follow Answer: EOS was forced (the walk took it in place
    # of the text's next token), and the run is over
    assert mon.is_finished and events[-1].kind == "finished"


def test_boundary_inside_a_loop_asks_for_the_next_state(tok: Any) -> None:
    index = build_index(compile_spec("react"), tok, context_labels=CONTEXT_LABELS, cache=False)
    mon = Monitor(index, newline=True)
    _walk(mon, tok, "Thought: look it up\nClaim:")
    assert mon.steps[-1].text == "look it up" and not mon.is_finished
    # the text of Thought ended: only Action's prompt string (after a newline) may come now
    allowed = {tok.decode([int(i)]) for i in mon.allowed_token_ids()}
    assert allowed <= {"\n"} and mon.allowed_next_states() == ("Action",)


def test_without_labels_the_model_writes_on(tok: Any) -> None:
    index = build_index(compile_spec("react"), tok, cache=False)
    mon = Monitor(index, newline=True)
    events = _walk(mon, tok, "Final Thought: easy\nAnswer: 72\nQuestion: what")
    assert not [e for e in events if e.kind == "end"]
    assert mon.steps[-1].text == "72\nQuestion: what"


def test_labels_that_are_prompt_strings_are_left_to_the_lexer() -> None:
    spec = ('(define qa (:states (Question (:text "Question:") (:flags :env-input)) (Answer (:text "A:")))'
            ' (:behavior (next Question Answer)))')
    got = boundary_strings(compile_spec(parse_spec(spec)), [*CONTEXT_LABELS, "Note"])
    # only labels overlapping a prompt string are left out
    assert b"\nQuestion:" not in got and b"\nNote:" in got and b"\nClaim:" in got
    assert boundary_strings(compile_spec("react"), ["Answer"]) == ()  # "Answer:" is a prompt string


def test_stop_waits_for_the_text_to_begin(tok: Any) -> None:
    """react-agent: Action Input ends at the end of its line, but a newline right after the prompt
    string does not make it empty."""
    index = build_index(compile_spec("react-agent"), tok, tool_names=["Calculator"], cache=False)
    mon = Monitor(index, newline=True)
    events = _walk(mon, tok, "Thought: add\nAction: Calculator\nAction Input:\n 12*3\nObservation:")
    assert events[-1].kind == "env" and mon.waiting_for_env
    assert [(s.state, s.text) for s in mon.steps][-2:] == [("Action-Input", "12*3"), ("Observation", "")]


def test_run_notes() -> None:
    def step(i: int, state: str, text: str, source: str = "model", tool: str | None = None) -> Step:
        return Step(index=i, state=state, text=text, source=source, tokens=1, tool=tool)

    loop = [step(0, "Thought", "t"), step(1, "Action", "Calculator"), step(2, "Action-Input", "2*3"),
            step(3, "Observation", "6", "env", "Calculator")]
    again = [step(i + 4, s.state, s.text, s.source, s.tool) for i, s in enumerate(loop)]
    end = [step(8, "Final-Thought", "f"), Step(index=9, state="Answer", text="", source="model", tokens=1,
                                                boundary="Question:")]
    assert run_notes((*loop, *again, *end), "") == ("boundary", "repeated_tool_call", "empty_answer")
    assert run_notes((*loop, *end[:1]), None) == ()


class Scripted(torch.nn.Module):
    """A stand-in causal LM that writes ``script`` (the text after the prompt) and then EOS: each
    forward pass puts the next token of what is left of the script on top. Enough to drive the
    runner through a model that rambles on into a new example."""

    def __init__(self, tok: Any, prompt_marker: str, script: str) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))
        self.tok, self.marker, self.script = tok, prompt_marker, script
        self.vocab = len(tok)
        self.config = SimpleNamespace(max_position_embeddings=4096)

    def forward(self, input_ids: torch.Tensor, past_key_values: Any = None, use_cache: bool = True,
                **_: Any) -> Any:
        seq = (past_key_values or []) + input_ids[0].tolist()
        text = self.tok.decode(seq)
        written = text.split(self.marker, 1)[1] if self.marker in text else ""
        logits = torch.zeros(1, 1, self.vocab)
        if self.script.startswith(written) and len(written) < len(self.script):
            nxt = self.tok.encode(self.script[len(written):], add_special_tokens=False)[0]
        else:
            nxt = self.tok.eos_token_id
        logits[0, 0, nxt] = 10.0
        return SimpleNamespace(logits=logits, past_key_values=seq)


def test_runner_cuts_the_answer_at_the_boundary(tok: Any) -> None:
    script = ("Thought: 2 times 3\nAction: Calculator\nAction Input: 2*3\nObservation: 6\n"
              "Final Thought: done\nAnswer: 6\nQuestion: What is 5 + 5?\nThought: ...")
    model = Scripted(tok, "PROMPT-END\n", script)
    prompt = "Answer it.\nQuestion: {{task}}\nPROMPT-END"
    res = Agent.from_spec("react", model, tok, tools=[Calculator()], prompt=prompt).run("What is 2 * 3?")
    assert [s.state for s in res.steps] == ["Thought", "Action", "Action-Input", "Observation",
                                            "Final-Thought", "Answer"], res.transcript
    assert res.accepted and res.stop_reason == "complete", res.transcript
    assert res.answer == "6" and res.steps[-1].boundary == "Question:" and "boundary" in res.notes
    assert res.transcript.rstrip().endswith("Question:")  # nothing after the label was generated
    # without the boundary the same model runs on into the next example, inside its answer
    plain = Agent.from_spec("react", model, tok, tools=[Calculator()], context_labels=(),
                            prompt=prompt).run("What is 2 * 3?")
    assert plain.answer is not None and plain.answer.startswith("6\nQuestion: What is 5 + 5?")
    # react-agent's one-line Answer (:stop "\n") ends it at the line's end, before any label
    line = Agent.from_spec("react-agent", model, tok, tools=[Calculator()],
                           prompt=prompt).run("What is 2 * 3?")
    assert line.answer == "6" and line.accepted and line.steps[-1].boundary is None


def test_chat_template_modes(tok: Any) -> None:
    """``on``: instructions, examples and task are the user turn, the trace the assistant turn."""
    import copy

    from ltlagent.errors import UsageError

    model = Scripted(tok, "<assistant>\n", "Thought: t\nAction: Calculator\n")
    chat = copy.deepcopy(tok)
    chat.chat_template = ("{% for m in messages %}<{{ m['role'] }}>\n{{ m['content'] }}</{{ m['role'] }}>\n"
                          "{% endfor %}{% if add_generation_prompt %}<assistant>\n{% endif %}")
    prompt = "Answer it.\nQuestion: {{task}}"
    on = Agent.from_spec("react", model, chat, tools=[Calculator()], prompt=prompt, chat_template="on")
    assert on.prompt("2+2?") == "<user>\nAnswer it.\nQuestion: 2+2?</user>\n<assistant>\n"
    auto = Agent.from_spec("react", model, chat, tools=[Calculator()], prompt=prompt, chat_template="auto")
    assert auto.prompt("2+2?") == on.prompt("2+2?")
    off = Agent.from_spec("react", model, chat, tools=[Calculator()], prompt=prompt)  # the default
    assert off.prompt("2+2?") == "Answer it.\nQuestion: 2+2?\n"
    res = on.run("2+2?", max_new_tokens=200)
    assert res.steps[0].state == "Thought" and res.settings["chat_template"] is True
    with pytest.raises(UsageError, match="has no chat template"):
        Agent.from_spec("react", model, tok, tools=[Calculator()], chat_template="on").prompt("x")
    with pytest.raises(UsageError, match="chat_template must be one of"):
        Agent.from_spec("react", model, tok, tools=[Calculator()], chat_template="yes")


def test_boundary_at_the_start_of_a_text(tok: Any) -> None:
    """A label right after the prompt string (only whitespace before it) also starts a new example;
    the one-line stop still waits for the text to begin."""
    index = build_index(compile_spec("react-agent"), tok, tool_names=["Calculator"],
                        context_labels=CONTEXT_LABELS, cache=False)
    mon = Monitor(index, newline=True)
    events = _walk(mon, tok, "Thought: add\nAction: Calculator\nAction Input:\nQuestion:")
    ends = [e for e in events if e.kind == "end"]
    assert [(e.state, e.reason, e.text) for e in ends][-1] == ("Action-Input", "boundary", "Question:")
    assert mon.text[ends[-1].at:] == "Question:" and mon.steps[-1].text == ""
    # mid-line, a label is just text
    mon = Monitor(index, newline=True)
    _walk(mon, tok, "Thought: the Question: is hard")
    assert mon.state == "Thought" and mon.steps[-1].text == "the Question: is hard"
