"""Turn validation/results/summary.json into results.md (tables beside the paper's) and accuracy.png."""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from validation.records import PAPER, PAPER_NAMES, load_records  # noqa: E402

__all__ = ["write_report"]


def _get(results: list[dict], model: str, task: str, k: int, agent: str) -> dict | None:
    for r in results:
        if (r["model"], r["task"], r["k"], r["agent"]) == (model, task, k, agent):
            return r
    return None


def delta_ci(out: Path, model: str, task: str, k: int, resamples: int = 4000,
             seed: int = 0) -> tuple[float, float, float, int] | None:
    """Δ = constrained − ablated accuracy (points) over the questions both agents ran, with a 95 %
    paired bootstrap interval (percentile; questions resampled, seeded): (Δ, low, high, n)."""
    got: dict[str, dict[str, bool]] = {}
    for agent in ("constrained", "ablated"):
        f = out / "runs" / f"{model}.{task}.k{k}.{agent}.jsonl.gz"
        if not f.is_file():
            return None
        for r in load_records(f):
            got.setdefault(r["uid"], {})[agent] = bool(r["correct"])
    d = [int(v["constrained"]) - int(v["ablated"]) for v in got.values() if len(v) == 2]
    if not d:
        return None
    rng = random.Random(seed)
    n = len(d)
    means = sorted(sum(rng.choice(d) for _ in range(n)) / n for _ in range(resamples))
    lo, hi = means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1]
    return 100.0 * sum(d) / n, 100.0 * lo, 100.0 * hi, n


def accuracy_table(results: list[dict], models: list[str], tasks: list[str], ks: list[int],
                   out: Path | None = None) -> str:
    head = "| Model | k | n | " + " | ".join(f"{t} Abl. | {t} ReAct | Δ" for t in tasks) + " |"
    sep = "|---|---|---|" + "---|---|---|" * len(tasks)
    rows = [head, sep]
    for m in models:
        for k in ks:
            cells = []
            ns = sorted({int(r["n"]) for r in results if r["model"] == m and r["k"] == k})
            for t in tasks:
                a, c = _get(results, m, t, k, "ablated"), _get(results, m, t, k, "constrained")
                av = f"{a['accuracy']:.1f}" if a else "–"
                cv = f"{c['accuracy']:.1f}" if c else "–"
                d = f"{c['accuracy'] - a['accuracy']:+.1f}" if a and c else "–"
                ci = delta_ci(out, m, t, k) if out is not None and a and c else None
                if ci is not None:
                    d = f"{ci[0]:+.1f} [{ci[1]:+.1f}, {ci[2]:+.1f}]"
                cells.append(f"{av} | {cv} | {d}")
            n = "/".join(str(x) for x in ns) or "–"
            rows.append(f"| {m} | {k} | {n} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def paper_table(tasks: list[str]) -> str:
    head = "| Model | k | " + " | ".join(
        f"{PAPER_NAMES[t]} Abl. | {PAPER_NAMES[t]} ReAct | Δ" for t in tasks) + " |"
    rows = [head, "|---|---|" + "---|---|---|" * len(tasks)]
    for (m, k), vals in PAPER.items():
        rows.append(f"| {m} | {k} | " + " | ".join(
            f"{vals[t][0]:.1f} | {vals[t][1]:.1f} | {vals[t][1] - vals[t][0]:+.1f}" for t in tasks) + " |")
    return "\n".join(rows)


def breaks_table(results: list[dict], models: list[str], tasks: list[str], ks: list[int]) -> str:
    rows = ["| Model | task | k | Abl.: breaks spec | Abl.: no Action or unknown tool "
            "| Abl.: no Action Input | Abl.: no answer | Abl.: context full | ReAct: breaks spec "
            "| ReAct: no answer "
            "| ReAct: context full |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for m in models:
        for t in tasks:
            for k in ks:
                a, c = _get(results, m, t, k, "ablated"), _get(results, m, t, k, "constrained")
                if not a and not c:
                    continue
                av = (f"{a['violation']:.1f} | {a['bad_tool']:.1f} | {a['missing_input']:.1f} | "
                      f"{a['no_answer']:.1f} | {a.get('context_full', 0):.1f}" if a else "– | – | – | – | –")
                cv = (f"{c['violation']:.1f} | {c['no_answer']:.1f} | {c.get('context_full', 0):.1f}"
                      if c else "– | – | –")
                rows.append(f"| {m} | {t} | {k} | {av} | {cv} |")
    return "\n".join(rows)


def plot(results: list[dict], models: list[str], tasks: list[str], ks: list[int], path: Path) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(1, len(tasks), figsize=(4.2 * len(tasks), 3.6), squeeze=False)
    styles = {"constrained": "-", "ablated": "--"}
    colors = ["tab:orange", "tab:blue", "tab:green", "tab:red"]
    for ax, t in zip(axes[0], tasks, strict=True):
        for mi, m in enumerate(models):
            for agent in ("constrained", "ablated"):
                ys = [(_get(results, m, t, k, agent) or {}).get("accuracy") for k in ks]
                if all(y is None for y in ys):
                    continue
                ax.plot(ks, [y if y is not None else float("nan") for y in ys], styles[agent], marker="o",
                        color=colors[mi % len(colors)],
                        label=f"{m} {'ReAct' if agent == 'constrained' else 'Abl.'}")
        ax.set_title(t)
        ax.set_xlabel("few-shot k")
        ax.set_xticks(ks)
        ax.set_ylim(0, 100)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("accuracy (%)")
    axes[0][-1].legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return True


def write_report(out: Path) -> Path:
    data = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    results, meta = data["results"], data["meta"]
    cfg = meta["config"]
    models, tasks, ks = list(cfg["models"]), list(cfg["tasks"]), list(cfg["ks"])
    have_plot = plot(results, models, tasks, ks, out / "accuracy.png")
    lines = [
        "# Results: constrained vs ablated ReAct agent on the synthetic tasks",
        "",
        f"Command: `{meta['command'].strip()}` ({meta['total_seconds']:.0f} s of cell time in all; Python "
        f"{meta['python']}, torch {meta['torch']}).",
        f"Configuration of that command: {json.dumps(cfg)}. Cells kept with --resume keep the n and batch "
        "they ran with: the n column of each table is what counts.",
        f"Specs: {meta['specs']}. Model file hashes: {meta['models']}. "
        f"Knowledge base sha256 {meta['kb_sha256']}.",
        "",
        "## Accuracy (%) per task × k × agent × model (Abl. = ablated agent, ReAct = fully constrained)",
        "",
        "n = questions per cell (the same questions for both agents). Δ = ReAct − Abl. in points, with its "
        "95 % paired bootstrap interval over the questions [low, high].",
        "",
        accuracy_table(results, models, tasks, ks, out),
        "",
        "## The paper's Table 1 (MPT instruct models), same layout",
        "",
        paper_table(tasks),
        "",
        "## How often each episode breaks the fully constrained agent's spec (%)",
        "",
        "Each episode's text is re-read with the full ReAct keywords. *Breaks spec*: a loop with no Action, "
        "a tool name that does not exist, a loop with no Action Input, or a step order that "
        "validation/specs/react-paper.sexp rejects: what the constrained agent makes impossible. "
        "*No answer*: no text after \"Answer:\" (the Answer state, or inside the Final Thought for the "
        "ablated agent). *Context full*: the run stopped because the model's 1,024-token context was used up "
        "(the runner's `context_full` stop), which no spec can prevent.",
        "",
        "Bundled models have a 1,024-token context, SmolLM2 8,192. With the example boundary on "
        "(the default), a line the model starts with a context label (Question:, Claim:, …) ends the "
        "state's text, as EOS would.",
        "",
        breaks_table(results, models, tasks, ks),
        "",
    ]
    if have_plot:
        lines += ["![accuracy](accuracy.png)", ""]
    path = out / "results.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    """Command line: rewrite results.md (and accuracy.png) from a results folder's summary.json."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "results", nargs="?", type=Path, default=ROOT / "validation" / "results",
        help="folder holding summary.json (default: validation/results)",
    )
    args = parser.parse_args(argv)
    summary = args.results / "summary.json"
    if not summary.is_file():
        print(f"error: {summary}: no such file (run validation/experiment.py first)", file=sys.stderr)
        return 2
    print(write_report(args.results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
