"""Turns under a token budget counted in tokens (issue 30; docs/design.md §14): a call may begin
whenever it can still be finished in the tokens left, and never otherwise. The bound per state is a
witness (never below the fewest tokens that end the turn, found here by a breadth-first search over
every state's token edges), at most the byte distance where every byte is a token, and README's
``ChatAgent`` example (``max_new_tokens=64``, calls of about 70 bytes) writes its calls."""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np
import pytest

from ltlagent.decode.budget import FAR, byte_preference, finish_tokens
from ltlagent.decode.chat import TokenBytes, TurnCursor, TurnIndex, TurnLanguage, TurnRule
from ltlagent.decode.vocab import vocab_from_bytes, vocab_from_tokenizer
from ltlagent.logic.policy import Policy
from ltlagent.spec.syntax import parse_spec

from . import tiny

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples" / "booking"))
from domain import TOOLS

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}  # type: ignore[index]
NAMES = frozenset(SCHEMAS)
#: README's two tools (the ChatAgent example)
README_TOOLS: list[dict[str, object]] = [
    {"type": "function", "function": {"name": "find_user", "parameters": {
        "type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}},
    {"type": "function", "function": {"name": "book", "parameters": {
        "type": "object", "properties": {"user_id": {"type": "string"}, "room": {"enum": ["Oak", "Elm"]}},
        "required": ["user_id", "room"], "additionalProperties": False}}}]
#: booking-policy, and after every user message the assistant must call a tool (no text turn)
FORCING = (ROOT / "specs" / "booking-policy.sexp").read_text(encoding="utf-8").replace(
    "(:constraints", "(:constraints\n   (call-after-user (always (implies (or User Confirm) "
    "(weak-next (or Lookup Write Handoff Call)))))", 1)
RULES = [TurnRule(True, NAMES, NAMES), TurnRule(False, frozenset({"book"}), frozenset()),
         TurnRule(True, frozenset(), frozenset({"find_user", "cancel_booking"}))]
TOKENIZERS = {"byte-level": lambda: tiny.byte_level(), "sentencepiece": tiny.sentencepiece,
              "straddle": tiny.straddle}


def _exact(index: TurnIndex) -> np.ndarray:
    """Fewest tokens from each state to acceptance (EOS not counted), by a breadth-first search over
    the token edges of every state (the reference; -1 where none)."""
    lang = index.lang
    n = lang.dead
    succ = [set(index.ends(s)[index.ends(s) != n].tolist()) for s in range(n)]
    pred: list[list[int]] = [[] for _ in range(n)]
    for s, targets in enumerate(succ):
        for t in targets:
            pred[t].append(s)
    dist = np.full(n + 1, -1, dtype=np.int64)
    front = [int(s) for s in np.nonzero(lang.accepting[:n])[0]]
    dist[front] = 0
    while front:
        nxt = []
        for t in front:
            for s in pred[t]:
                if dist[s] < 0:
                    dist[s] = dist[t] + 1
                    nxt.append(s)
        front = nxt
    return dist


@pytest.fixture(scope="module")
def languages() -> list[TurnLanguage]:
    return [TurnLanguage.build(rule, SCHEMAS, fmt)  # type: ignore[arg-type]
            for rule in RULES for fmt in ("hermes", "json")]


@pytest.mark.parametrize("tok", sorted(TOKENIZERS))
def test_the_bound_is_a_witness_and_no_worse_than_bytes(tok: str, languages: list[TurnLanguage]) -> None:
    tokens = TokenBytes.of(vocab_from_tokenizer(TOKENIZERS[tok]()))
    every_byte = len(tokens.vocab.single_byte_tokens()) == 256
    for lang in languages[:4]:
        index = TurnIndex(lang, tokens)
        need, exact, n = index.need, _exact(index), lang.dead
        live = exact[:n] >= 0
        assert (need[:n][live] >= exact[:n][live]).all(), tok  # never fewer than the fewest
        assert (need[:n][~live] >= FAR).all()
        if every_byte:
            assert (need[:n] <= lang.distance[:n]).all()
        assert need[:n][live].sum() <= 1.25 * exact[:n][live].sum(), tok  # and near the fewest


def test_a_bound_with_no_token_for_some_byte_is_far_not_too_small() -> None:
    """Where a completion cannot be spelled (no token has its byte), the state gets no witness."""
    vocab = vocab_from_bytes([b"a", b"ab", b"c", b"<eos>"], eos_ids=[3])
    trans = np.full((4, 256), 3, dtype=np.int32)
    trans[0, ord("a")], trans[1, ord("b")], trans[1, ord("x")] = 1, 2, 2
    trans[0, ord("c")] = 2
    dist = np.array([1, 1, 0, FAR])
    need = finish_tokens(trans, dist, TokenBytes.of(vocab).trie, byte_preference(vocab))
    assert need.tolist() == [1, FAR, 0, FAR]  # "c"; from 1 no token spells "b" (nor "x")
    trans[0, ord("c")] = 3
    need = finish_tokens(trans, np.array([2, 1, 0, FAR]), TokenBytes.of(vocab).trie, byte_preference(vocab))
    assert need.tolist() == [1, FAR, 0, FAR]  # "ab" in one token, though "b" alone is none


@pytest.mark.parametrize("tok", sorted(TOKENIZERS))
def test_a_turn_steered_by_the_bound_always_ends_in_time(tok: str, languages: list[TurnLanguage]) -> None:
    """Random tokens among those ``allowed_within`` lets through: whenever the turn's start fits the
    budget, the turn reaches an end state and EOS within it."""
    tokens = TokenBytes.of(vocab_from_tokenizer(TOKENIZERS[tok]()))
    rng = random.Random(5)
    for lang in languages:
        index = TurnIndex(lang, tokens)
        for budget in (4, 12, 25, 40, 80):
            if index.need[0] > budget - 1:
                continue
            for _ in range(4):
                cur = TurnCursor(index)
                for used in range(budget):
                    ids = np.nonzero(cur.allowed(budget=budget - used))[0]
                    cur.advance(int(rng.choice(ids.tolist())))
                    if cur.ended:
                        break
                assert cur.ended and not cur.is_dead, (tok, budget, bytes(cur.data))


def _random_model(tok: object) -> object:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.set_num_threads(1)  # a tiny model: threads only contend
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=1, n_head=2,  # type: ignore[arg-type]
                     n_positions=4096, bos_token_id=0, eos_token_id=tok.eos_token_id)  # type: ignore[attr-defined]
    return GPT2LMHeadModel(cfg).eval()


def test_readme_example_budget_can_write_its_calls() -> None:
    """README's ChatAgent example: its tools, the bundled model's tokenizer, ``max_new_tokens=64``
    (calls of about 70 bytes), under a policy that requires a call after every user message. A
    random model at temperature 1 writes a call in every turn, none cut at the budget, and the
    transcript passes the policy (counted in bytes no call could begin: the turns were cut and the
    runs ended ``dead``)."""
    from transformers import AutoTokenizer

    from ltlagent.agent.chat import ChatAgent

    tok = AutoTokenizer.from_pretrained(ROOT / "ltlagent" / "models" / "react-tiny")  # README's model's
    model = _random_model(tok)
    policy = Policy.load(parse_spec(FORCING, "forcing.sexp"))

    def call_tool(name: str, arguments: dict[str, object]) -> str:
        return json.dumps({"user_id": "u1"} if name == "find_user" else {"booking_id": "b7"})

    for seed in range(2):
        said = iter(["Ann Lee, the Oak room please.", "yes"])

        def user(messages: Sequence[Mapping[str, object]], said: Iterator[str] = said) -> str | None:
            return next(said, None)

        agent = ChatAgent(model, tok, README_TOOLS, call_tool, policy=policy)
        r = agent.run(user, "Hi, I need a room.", max_turns=4, max_new_tokens=64, temperature=1.0,
                      seed=seed)
        assert r.stop_reason in ("user", "max_turns"), (r.stop_reason, r.notes)
        assert not any("cut at the token budget" in n for n in r.notes), r.notes
        assert r.calls >= 1 and r.report is not None and r.report.verdict == "ok", r.to_dict()


def test_the_vllm_processor_lets_a_required_call_begin_within_the_readme_budget() -> None:
    """vLLM's path masks with the same budget: a turn that must be a call (README's tools, the
    bundled model's tokenizer, ``max_tokens=64``) sampled at random through ``MonitorBatch`` ends
    as a complete call every time (counted in bytes it could not begin: the mask fell back to
    everything allowed and the turn was cut)."""
    import torch
    from transformers import AutoTokenizer

    from ltlagent.decode.vllm_processor import MonitorBatch, TurnOptions
    from ltlagent.text.toolcall import parse_call

    from .test_vllm_processor import Params, Update, _sample_step

    tok = AutoTokenizer.from_pretrained(ROOT / "ltlagent" / "models" / "react-tiny")
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in README_TOOLS}  # type: ignore[index]
    rule = TurnRule(False, frozenset({"find_user", "book"}), frozenset())
    extra = {"ltlagent": TurnOptions.encode(rule, schemas, "hermes", None, [tok.eos_token_id])}
    batch = MonitorBatch(tok, cache=False)
    rnd = random.Random(2)
    for row in range(6):
        out: list[int] = []
        params = Params(extra, max_tokens=64)
        batch.update(Update(1, removed=[0] if row else [], added=[(0, params, [1], out)]))
        for _ in range(64):
            _sample_step(batch, {0: out}, 1, rnd, len(tok), torch.float32)
            if out[-1] == tok.eos_token_id:
                break
        assert out[-1] == tok.eos_token_id, tok.decode(out)
        text = b"".join(batch.rows[0].cursor.index.vocab.token_bytes(t) for t in out[:-1])  # type: ignore[union-attr]
        assert parse_call(text.decode()).name in schemas
