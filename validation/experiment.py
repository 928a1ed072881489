"""The paper's experiment (Table 1) on the synthetic tasks, with the bundled models.

    python validation/experiment.py                 # a quick run (n = 20); writes validation/results/tmp/run/
    python validation/experiment.py --n 100 --out validation/results --extend   # the shipped results

The results that ship (``validation/results/``) are written only when named with ``--out``, and
then only with ``--resume``/``--extend`` (which keep the saved cells) or ``--overwrite``.

Protocol (paper §4): the fully constrained ReAct agent (specs/react.sexp, the Action state
restricted to the task's tool names) against the ablated agent (specs/react-ablation.sexp: no
Action, Action Input or Answer states; the tool call is read from the Thought text, the answer from
the text after "Answer:" in the Final Thought), both with at most 3 loops (the bound is written into
validation/specs/react-paper.sexp and react-ablation-paper.sexp), the same prompts (instructions plus
k = 0..3 exemplars), greedy decoding, on held-out questions of each task, for two model strengths
(the early and the final checkpoint of the bundled model).

Outputs: results.md (accuracy table beside the paper's, spec-break rates), summary.json (every
figure and the exact configuration), accuracy.png (the plot), examples.jsonl (traces), runs.csv.gz
(one line per episode).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import platform
import re
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from validation.records import load_records  # noqa: E402
from validation.synth import TASK_TOOLS, TASKS, ToolEnv, build_prompt, exemplars, heldout, make_world  # noqa: E402

SPECS = {"constrained": ROOT / "validation" / "specs" / "react-paper.sexp",
         "ablated": ROOT / "validation" / "specs" / "react-ablation-paper.sexp"}
MODELS_DIR = ROOT / "ltlagent" / "models"
KB = ROOT / "ltlagent" / "data" / "kb.jsonl"
#: The results that ship with the repository, and where a run writes unless told otherwise (git-ignored).
SHIPPED = ROOT / "validation" / "results"
SCRATCH = SHIPPED / "tmp" / "run"

@dataclass(frozen=True)
class ExpConfig:
    """The exact configuration of a run (written into summary.json)."""

    tasks: tuple[str, ...] = TASKS
    ks: tuple[int, ...] = (0, 1, 2, 3)
    agents: tuple[str, ...] = ("constrained", "ablated")
    models: tuple[str, ...] = ("react-tiny-early", "react-tiny")
    n: int = 300
    seed: int = 0
    max_loops: int = 3
    max_new_tokens: int = 256
    batch: int = 50
    decoding: str = "greedy"
    engine: str = "batch"
    chat_template: str = "off"  # on: the prompt is the chat template's user turn (models that have one)
    example_boundary: bool = True  # a context label starting a line ends a state's text


# --- scoring and spec checks ------------------------------------------------------------------

def normalize(answer: str) -> str:
    return " ".join(answer.strip().strip(".").split()).casefold()


def first_line(text: str) -> str:
    return text.strip().split("\n", 1)[0].strip()


def is_correct(task: str, predicted: str | None, gold: str) -> bool:
    if predicted is None:
        return False
    p, g = normalize(predicted), normalize(gold)
    if task == "arithmetic":
        try:
            return abs(float(p.replace(",", "")) - float(g)) < 1e-9
        except ValueError:
            return False
    return p == g


def extract_answer(agent: str, steps: list[tuple[str, str, bool]]) -> str | None:
    """The paper's rule: the text after "Answer:" — the Answer state (constrained) or inside the
    Final Thought (ablated)."""
    if agent == "constrained":
        answers = [c for s, c, _ in steps if s == "Answer"]
        return first_line(answers[-1]) if answers else None
    finals = [c for s, c, _ in steps if s == "Final-Thought"]
    if not finals or "Answer:" not in finals[-1]:
        return None
    return first_line(finals[-1].split("Answer:", 1)[1])


_ACTION = re.compile(r"Action:[ \t]*([^\n]*)")
_INPUT = re.compile(r"Action Input:[ \t]*([^\n]*)")


def parse_tool_call(thought: str) -> tuple[str | None, str | None]:
    """The ablated agent's tool call, read from its Thought text as in the paper."""
    a = _ACTION.search(thought)
    i = _INPUT.search(thought)
    return (a.group(1).strip() if a else None), (i.group(1).strip() if i else None)


def spec_breaks(text: str, tools: tuple[str, ...], react, react_paper) -> dict[str, bool]:
    """Re-read an episode's text with the full ReAct keywords and say how it breaks the spec of the
    fully constrained agent (validation/specs/react-paper.sexp): a loop without an Action or with a
    tool that does not exist (``bad_tool``), a loop without an Action Input (``missing_input``), no
    answer; ``violation``: one of the first two or a step order the spec rejects (what the
    constrained agent makes impossible); ``incomplete``: the trace never reached acceptance (no
    Answer, or the run stopped early, e.g. when the model's context was full)."""
    lex = react.lexer
    seq: list[tuple[str, str]] = []
    for seg in lex.segments(text):
        seq.append((react.state_of_keyword(seg.index), text[seg.content_start:seg.content_end].strip()))
    names = [s for s, _ in seq]
    bad_tool = missing_input = False
    loop: list[tuple[str, str]] = []
    for s, c in seq:
        if s == "Observation":
            acts = [x for x in loop if x[0] == "Action"]
            if not acts or first_line(acts[-1][1]) not in tools:
                bad_tool = True
            if not any(x[0] == "Action-Input" for x in loop):
                missing_input = True
            loop = []
        else:
            loop.append((s, c))
    answers = [c for s, c in seq if s == "Answer"]
    no_answer = not answers or not first_line(answers[-1])
    status = react_paper.automaton.run(names).status
    return {"bad_tool": bad_tool, "missing_input": missing_input, "no_answer": no_answer,
            "violation": bad_tool or missing_input or status == "rejected",
            "incomplete": status != "accepted"}


# --- running ------------------------------------------------------------------------------------

def model_files_hash(path: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(path.iterdir()) if path.is_dir() else [path]:
        if p.is_file():
            h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


def make_env_fn(agent: str, task: str, envs: list[ToolEnv], compiled):
    """The Observation state's environment for one batch: the agent runner's own ToolEnvironment
    (ltlagent.agent.runner), so tool calls, error messages and the appended text are exactly the runner's
    (``" <output>\\n"``, prompt strings inside neutralised). With no Action state (the ablated agent)
    it reads ``Action:`` / ``Action Input:`` from the last Thought, as in the paper."""
    from ltlagent.agent.runner import EnvContext, Step, ToolEnvironment, neutralise

    names = TASK_TOOLS[task]
    action, arg = ("Action", "Action-Input") if agent == "constrained" else (None, None)
    handlers = [ToolEnvironment({n: e.tools[n] for n in names}, action, arg, None) for e in envs]

    def env_fn(row: int, monitor) -> str:
        done = list(monitor.steps)[:-1]          # the Observation just entered is the last step
        steps = tuple(Step(index=i, state=st.state, text=st.text, source="env" if st.by_env else "model",
                           tokens=0) for i, st in enumerate(done))
        reply = handlers[row](EnvContext("", "Observation", steps))
        text = (reply.text or "").strip()[:2000]
        text, _ = neutralise(text, compiled)
        return " " + text + "\n" if text else "\n"

    return env_fn


def make_record(model_name: str, task: str, k: int, agent: str, q, steps: list[tuple[str, str, bool]],
                text: str, tokens: int, complete: bool, error: str, react, react_paper) -> dict:
    """One episode's line: answer, correctness, spec breaks, the trace."""
    pred = extract_answer(agent, steps)
    brk = spec_breaks(text, TASK_TOOLS[task], react, react_paper)
    if agent == "ablated":
        # the ablated agent's answer lives in its Final Thought, so "no answer" means that
        brk["no_answer"] = not pred
    return {"model": model_name, "task": task, "k": k, "agent": agent, "uid": q.uid, "gold": q.answer,
            "pred": pred, "correct": is_correct(task, pred, q.answer), "states": [s for s, _, _ in steps],
            "tokens": tokens, "complete": complete, "error": error, "text": text, **brk}


def run_config(cfg: ExpConfig, model_name: str, model, tokenizer, index_for, compiled_for, task: str, k: int,
               agent: str, shots, questions, base_env: ToolEnv, react, react_paper) -> list[dict]:
    """All questions of one (model, task, k, agent) cell through the batched engine."""
    from validation.batch_agent import run_batch

    records: list[dict] = []
    for start in range(0, len(questions), cfg.batch):
        chunk = questions[start:start + cfg.batch]
        envs = [base_env.fork() for _ in chunk]
        prompts = [build_prompt(task, shots[:k], q.question) for q in chunk]
        if uses_chat(cfg, tokenizer):
            from ltlagent.agent.runner import chat_prompt
            prompts = [chat_prompt(tokenizer, p) for p in prompts]
        eps = run_batch(model, tokenizer, index_for(agent, task), prompts,
                        make_env_fn(agent, task, envs, compiled_for(agent)),
                        max_new_tokens=cfg.max_new_tokens)
        for q, ep in zip(chunk, eps, strict=True):
            records.append(make_record(model_name, task, k, agent, q, ep.steps, ep.text, ep.tokens,
                                       ep.complete, ep.error, react, react_paper))
    return records


def run_config_agent(cfg: ExpConfig, model_name: str, model, tokenizer, compiled_for, task: str, k: int,
                     agent: str, shots, questions, base_env: ToolEnv, react, react_paper) -> list[dict]:
    """The same cell through the product's runner, one question at a time:
    ``Agent.from_spec(spec, model, tokenizer, tools=..., prompt=...).run(question)``."""
    from ltlagent.agent.runner import Agent

    env = base_env.fork()
    runner = Agent.from_spec(compiled_for(agent), model, tokenizer,
                             tools=[env.tools[n] for n in TASK_TOOLS[task]],
                             prompt=build_prompt(task, shots[:k], "{{task}}"),
                             chat_template=cfg.chat_template if cfg.chat_template != "auto" else "auto",
                             context_labels=None if cfg.example_boundary else ())
    records: list[dict] = []
    for q in questions:
        res = runner.run(q.question, max_new_tokens=cfg.max_new_tokens, max_steps=64)
        steps = [(st.state, st.text, st.source == "env") for st in res.steps]
        error = "" if res.stop_reason in ("complete", "finished", "max_new_tokens") else res.stop_reason
        records.append(make_record(model_name, task, k, agent, q, steps, res.transcript,
                                   int(res.usage.get("generated_tokens", 0)), res.accepted, error,
                                   react, react_paper))
    return records


def summarize(records: list[dict]) -> dict[str, object]:
    n = len(records)
    def rate(key: str) -> float:
        return round(100.0 * sum(1 for r in records if r[key]) / max(1, n), 1)
    return {"n": n, "accuracy": rate("correct"), "violation": rate("violation"), "bad_tool": rate("bad_tool"),
            "missing_input": rate("missing_input"), "no_answer": rate("no_answer"),
            "incomplete": rate("incomplete"),
            "context_full": round(100.0 * sum(1 for r in records if r["error"] == "context_full")
                                  / max(1, n), 1),
            "mean_tokens": round(sum(r["tokens"] for r in records) / max(1, n), 1),
            "errors": sum(1 for r in records if r["error"])}


def questions_to_add(done: list[dict], questions: list) -> list:
    """The questions a finished cell still lacks when ``--extend`` asks for a larger ``--n``.

    Held-out sets are prefix-stable (the first 20 of 50 are the 20), so a cell of n = 20 grows to 50
    by running questions 21..50 only; a cell that does not hold a prefix of ``questions`` is refused."""
    have = [r["uid"] for r in done]
    want = [q.uid for q in questions]
    if have[: len(want)] != want[: len(have)]:
        raise SystemExit(f"the saved cell's questions ({have[:3]}…) are not the first of this run's "
                         f"({want[:3]}…); use another --out or drop --extend")
    return list(questions[len(have):])


def uses_chat(cfg: ExpConfig, tokenizer) -> bool:
    """The prompt goes into the tokenizer's chat template (``--chat-template``)."""
    has = bool(getattr(tokenizer, "chat_template", None))
    return has and (cfg.chat_template == "on" or cfg.chat_template == "auto")


def load_model(name: str, models_dir: Path = MODELS_DIR):
    """A bundled model from ``models_dir``, else anything :func:`ltlagent.agent.loader.load_model` takes
    (``smollm2-135m``, a GGUF file, a folder); returns (model, tokenizer, files to hash)."""
    from ltlagent.agent.loader import load_model as load

    path = models_dir / name
    loaded = load(path if (path / "config.json").is_file() else name)
    return loaded.model, loaded.tokenizer, loaded.source.path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=20,
                    help="held-out questions per task (default 20, a run of minutes; the shipped results: "
                         "100 for the bundled models, 50 for smollm2-135m)")
    ap.add_argument("--tasks", nargs="+", default=list(TASKS), choices=TASKS)
    ap.add_argument("--ks", nargs="+", type=int, default=[0, 1, 2, 3])
    ap.add_argument("--models", nargs="+", default=["react-tiny-early", "react-tiny"])
    ap.add_argument("--agents", nargs="+", default=["constrained", "ablated"], choices=list(SPECS))
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--engine", choices=("batch", "agent"), default="batch",
                    help="batch: many episodes per forward pass (validation/batch_agent.py, on the monitor); "
                         "agent: Agent.run one question at a time (slower; same decoding)")
    ap.add_argument("--max-new-tokens", type=int, default=256)
    ap.add_argument("--out", default=str(SCRATCH),
                    help="where results go (default: %(default)s, ignored by git); the shipped "
                         f"{SHIPPED.relative_to(ROOT)}/ needs --resume, --extend or --overwrite")
    ap.add_argument("--overwrite", action="store_true",
                    help="allow replacing the shipped results' cells (with --out validation/results)")
    ap.add_argument("--resume", action="store_true",
                    help="keep the cells already in OUT/runs/ as they are, whatever their n (each cell is "
                         "saved when it is done); with every cell saved, this only rewrites the summary")
    ap.add_argument("--extend", action="store_true",
                    help="like --resume, but a cell saved with fewer than --n questions runs the ones it "
                         "lacks (held-out sets are prefix-stable: the first 20 of 50 are the 20)")
    ap.add_argument("--models-dir", default=str(MODELS_DIR),
                    help="where the bundled models are (default: %(default)s); other names go to "
                         "ltlagent.agent.loader (smollm2-135m, a GGUF file, a folder)")
    ap.add_argument("--chat-template", choices=("auto", "on", "off"), default="off",
                    help="on/auto: the prompt is the user turn of the model's chat template and the trace "
                         "the assistant turn, for models that have one (default: off, plain text)")
    ap.add_argument("--no-example-boundary", action="store_true",
                    help="do not end a state's text when the model starts a new example (Question: …)")
    args = ap.parse_args(argv)
    if args.n < 1:
        ap.error("--n must be at least 1")
    shipped = Path(args.out).resolve() == SHIPPED.resolve() and (SHIPPED / "summary.json").is_file()
    if shipped and not (args.resume or args.extend or args.overwrite):
        ap.error(f"--out {args.out} holds the results that ship with the repository; keep its cells with "
                 "--resume or --extend, or replace them with --overwrite")

    import torch

    from ltlagent import compile_spec
    from ltlagent.agent.runner import eos_token_ids
    from ltlagent.decode.monitor import build_index
    from ltlagent.text.lexer import CONTEXT_LABELS

    torch.set_num_threads(1)
    torch.manual_seed(0)
    cfg = ExpConfig(tasks=tuple(args.tasks), ks=tuple(args.ks), agents=tuple(args.agents),
                    models=tuple(args.models), n=args.n, batch=args.batch, max_new_tokens=args.max_new_tokens,
                    engine=args.engine, chat_template=args.chat_template,
                    example_boundary=not args.no_example_boundary)
    out = Path(args.out)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    world = make_world(cfg.seed)
    base_env = ToolEnv(kb_path=str(KB))
    react = compile_spec("react")
    react_paper = compile_spec(SPECS["constrained"])
    compiled = {a: compile_spec(SPECS[a]) for a in cfg.agents}
    shots = {t: exemplars(t, base_env, world, cfg.seed) for t in cfg.tasks}
    questions = {t: heldout(t, base_env, world, cfg.n, cfg.seed) for t in cfg.tasks}
    summary: list[dict] = []
    t_all = time.time()
    files: dict[str, str] = {}
    for model_name in cfg.models:
        model, tok, where = load_model(model_name, Path(args.models_dir))
        files[model_name] = model_files_hash(Path(where)) if where is not None else "?"
        indexes: dict[tuple[str, str], object] = {}
        labels = CONTEXT_LABELS if cfg.example_boundary else ()

        def index_for(agent: str, task: str, _tok=tok, _ix=indexes, _m=model, _labels=labels):
            key = (agent, task)
            if key not in _ix:
                _ix[key] = build_index(compiled[agent], _tok, tool_names=list(TASK_TOOLS[task]),
                                       eos_token_ids=eos_token_ids(_m, _tok), context_labels=_labels)
            return _ix[key]

        for task in cfg.tasks:
            for k in cfg.ks:
                for agent in cfg.agents:
                    name = f"{model_name}.{task}.k{k}.{agent}"
                    done = out / "runs" / f"{name}.json"
                    old: list[dict] = []
                    spent = 0.0
                    todo = questions[task]
                    if (args.resume or args.extend) and done.is_file():
                        saved = json.loads(done.read_text(encoding="utf-8"))
                        if args.extend:  # the episodes are read only when the cell may grow
                            old = load_records(out / "runs" / f"{name}.jsonl.gz")
                            todo = questions_to_add(old, questions[task])
                        if not args.extend or not todo:
                            summary.append(saved)
                            print(f"{name}: done already (--resume)", flush=True)
                            continue
                        spent = float(saved["seconds"])
                        print(f"{name}: {len(old)} questions done, running {len(todo)} more (--extend)",
                              flush=True)
                    t0 = time.time()
                    if args.engine == "agent":
                        recs = run_config_agent(cfg, model_name, model, tok, compiled.__getitem__, task, k,
                                                agent, shots[task], todo, base_env, react, react_paper)
                    else:
                        recs = run_config(cfg, model_name, model, tok, index_for, compiled.__getitem__, task,
                                          k, agent, shots[task], todo, base_env, react, react_paper)
                    recs = old + recs
                    s = {"model": model_name, "task": task, "k": k, "agent": agent, **summarize(recs),
                         "seconds": round(spent + time.time() - t0, 1)}
                    summary.append(s)
                    # episodes first, then the summary line that marks the cell done; each written to a
                    # temporary file and renamed, so an interrupted run leaves the previous cell intact
                    episodes = out / "runs" / f"{name}.jsonl.gz"
                    tmp = episodes.with_name(episodes.name + ".tmp")
                    with gzip.open(tmp, "wt", encoding="utf-8") as fh:
                        for r in recs:
                            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
                    os.replace(tmp, episodes)
                    tmp = done.with_name(done.name + ".tmp")
                    tmp.write_text(json.dumps(s) + "\n", encoding="utf-8")
                    os.replace(tmp, done)
                    print(json.dumps(s), flush=True)
    meta = {"config": asdict(cfg), "specs": {a: str(SPECS[a].relative_to(ROOT)) for a in cfg.agents},
            "models": files,
            "kb_sha256": hashlib.sha256(KB.read_bytes()).hexdigest()[:16],
            "exemplars": {t: [e.uid for e in shots[t]] for t in cfg.tasks},
            "python": platform.python_version(), "torch": torch.__version__,
            "total_seconds": round(sum(float(s["seconds"]) for s in summary), 1),
            "wall_seconds_this_invocation": round(time.time() - t_all, 1),
            "command": "python validation/experiment.py "
            + " ".join(argv if argv is not None else sys.argv[1:])}
    (out / "summary.json").write_text(json.dumps({"meta": meta, "results": summary}, indent=1) + "\n",
                                      encoding="utf-8")
    from validation.report import write_report

    write_report(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
