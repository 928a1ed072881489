"""Train the bundled ReAct model (tokenizer + small GPT-2) on synthetic traces, bit for bit from a seed.

    python validation/train_model.py                    # regenerates ltlagent/models/react-tiny{,-early}
    python validation/train_model.py --tiny --out /tmp/t   # a 1-minute run, to check determinism

What it does, in a fixed order: generate the fictional world and write its knowledge base
(``ltlagent/data/kb.jsonl``); generate the training documents (gold ReAct traces whose Observations
come from the real tools); train a byte-level BPE tokenizer on them; train a GPT-2 causal LM with
the loss on agent-written text only; save an early checkpoint (the weak model) and the final one
with ``save_pretrained(safe_serialization=True)``. Single thread, deterministic algorithms, no
dropout, a fixed batch order: two runs on the same machine give identical files (see --tiny).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from validation.synth import DatasetConfig, ToolEnv, make_world, training_documents, write_kb  # noqa: E402

EOS = "<|endoftext|>"


@dataclass(frozen=True)
class TrainConfig:
    """Everything that determines the shipped files."""

    seed: int = 0
    vocab_size: int = 3072
    arch: str = "llama"            # rotary positions: in-context copying is learned far sooner than
    n_layer: int = 6               # with GPT-2's learned absolute positions (measured here)
    n_embd: int = 160
    n_head: int = 5
    n_inner: int = 432             # Llama MLP width (3 matrices: about GPT-2's 4x with 2)
    n_positions: int = 1024
    batch_tokens: int = 2048       # padded tokens per optimizer step
    lr: float = 2e-3
    min_lr_ratio: float = 0.1
    warmup: int = 100
    weight_decay: float = 0.01
    epochs: int = 1
    early_step: int = 1800         # the weak model: this optimizer step's weights
    data: DatasetConfig = field(default_factory=lambda: DatasetConfig(copy_docs=8000))


TINY = TrainConfig(vocab_size=600, n_layer=2, n_embd=64, n_head=2, n_inner=160, n_positions=1024,
                   batch_tokens=4096,
                   warmup=2, early_step=3,
                   data=DatasetConfig(n_train=(("arithmetic", 40), ("kbqa", 40), ("fever", 20)),
                                      copy_docs=20))


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def train_tokenizer(texts: list[str], vocab_size: int):  # -> PreTrainedTokenizerFast
    """A byte-level BPE (GPT-2 style) trained on the corpus; ``<|endoftext|>`` is BOS/EOS/PAD."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=[EOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=EOS, eos_token=EOS, pad_token=EOS,
                                   unk_token=EOS, model_max_length=1024, clean_up_tokenization_spaces=False)


def build_model(cfg: TrainConfig, vocab: int, eos: int):
    """A randomly initialised causal LM of the configured architecture (no dropout)."""
    if cfg.arch == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel

        return GPT2LMHeadModel(GPT2Config(
            vocab_size=vocab, n_positions=cfg.n_positions, n_embd=cfg.n_embd, n_layer=cfg.n_layer,
            n_head=cfg.n_head, n_inner=4 * cfg.n_embd, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
            bos_token_id=eos, eos_token_id=eos, pad_token_id=eos))
    from transformers import LlamaConfig, LlamaForCausalLM

    return LlamaForCausalLM(LlamaConfig(
        vocab_size=vocab, hidden_size=cfg.n_embd, intermediate_size=cfg.n_inner,
        num_hidden_layers=cfg.n_layer, num_attention_heads=cfg.n_head, num_key_value_heads=cfg.n_head,
        max_position_embeddings=cfg.n_positions, tie_word_embeddings=True, attention_dropout=0.0,
        bos_token_id=eos, eos_token_id=eos, pad_token_id=eos))


def encode_document(tokenizer, segments: list[tuple[str, bool]]) -> tuple[list[int], list[int]]:
    """Token ids and labels (-100 where the text is context: instructions, questions, Observations)."""
    text = "".join(s for s, _ in segments)
    trained = bytearray(len(text))
    pos = 0
    for s, flag in segments:
        if flag:
            trained[pos:pos + len(s)] = b"\x01" * len(s)
        pos += len(s)
    enc = tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)
    ids = list(enc["input_ids"])
    labels = [i if trained[a] else -100 for i, (a, _) in zip(ids, enc["offset_mapping"], strict=True)]
    ids.append(tokenizer.eos_token_id)   # the agent stops after its Answer
    labels.append(tokenizer.eos_token_id)
    return ids, labels


def pack_rows(encoded: list[tuple[list[int], list[int]]], row_len: int, seed: int
              ) -> list[tuple[list[int], list[int]]]:
    """Whole documents, in a seeded random order, packed one after another into rows of at most
    ``row_len`` tokens (a document is never split, so every one starts at a row start or right
    after another's EOS). Rows mix tasks and few-shot contexts; little padding is left."""
    order = list(range(len(encoded)))
    random.Random(f"pack:{seed}").shuffle(order)
    rows: list[tuple[list[int], list[int]]] = []
    ids: list[int] = []
    labels: list[int] = []
    for i in order:
        x, y = encoded[i]
        if ids and len(ids) + len(x) > row_len:
            rows.append((ids, labels))
            ids, labels = [], []
        ids = ids + x
        labels = labels + y
    if ids:
        rows.append((ids, labels))
    return rows


def sha256_dir(path: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()[:16]
            for p in sorted(path.iterdir()) if p.is_file()}


def save(model, tokenizer, path: Path, meta: dict[str, object]) -> None:
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
    (path / "training.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "ltlagent" / "models"),
                    help="folder that receives react-tiny/ and react-tiny-early/ (default: %(default)s)")
    ap.add_argument("--kb", default=str(ROOT / "ltlagent" / "data" / "kb.jsonl"),
                    help="where to write the knowledge base (default: %(default)s)")
    ap.add_argument("--tiny", action="store_true", help="a small config for a quick determinism check")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0: one epoch)")
    ap.add_argument("--early-step", type=int, default=None, help="step of the weak checkpoint")
    ap.add_argument("--checkpoints", default="", help="also save every --every steps here (for choosing)")
    ap.add_argument("--every", type=int, default=50)
    args = ap.parse_args(argv)

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("RAYON_NUM_THREADS", "1")
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch

    cfg = TINY if args.tiny else TrainConfig()
    cfg = replace(cfg, seed=args.seed, data=replace(cfg.data, seed=args.seed))
    if args.early_step is not None:
        cfg = replace(cfg, early_step=args.early_step)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    t0 = time.time()

    world = make_world(cfg.seed)
    kb = write_kb(world, args.kb)
    env = ToolEnv(kb_path=str(kb))          # the tools read the shipped file, as users' agents will
    docs = training_documents(cfg.data, env, world)
    log(f"{len(docs)} training documents, knowledge base {kb} ({len(world.pages())} pages)")

    corpus = ["".join(s for s, _ in d) for d in docs]
    tokenizer = train_tokenizer(corpus + [p["text"] for p in world.pages()], cfg.vocab_size)
    encoded = [encode_document(tokenizer, d) for d in docs]
    encoded = [e for e in encoded if len(e[0]) <= cfg.n_positions]
    lengths = [len(e[0]) for e in encoded]
    n_tok = sum(lengths)
    n_loss = sum(sum(1 for x in e[1] if x != -100) for e in encoded)
    log(f"tokenizer: {len(tokenizer)} tokens; {len(encoded)} documents, {n_tok} tokens "
        f"({n_loss} with loss), longest {max(lengths)}")

    rows = [r for ep in range(cfg.epochs) for r in pack_rows(encoded, cfg.n_positions, cfg.seed + ep)]
    per_batch = max(1, cfg.batch_tokens // cfg.n_positions)
    batches = [rows[i:i + per_batch] for i in range(0, len(rows), per_batch)]
    total = len(batches) if not args.max_steps else min(args.max_steps, len(batches))
    model = build_model(cfg, len(tokenizer), tokenizer.eos_token_id)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"model: {cfg.arch} {cfg.n_layer} layers x {cfg.n_embd}, {n_params} parameters; {total} steps")

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=cfg.lr, betas=(0.9, 0.95))

    def lr_at(step: int) -> float:
        if step < cfg.warmup:
            return cfg.lr * (step + 1) / cfg.warmup
        frac = (step - cfg.warmup) / max(1, total - cfg.warmup)
        return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * frac)))

    meta = {"config": asdict(cfg), "documents": len(encoded), "tokens": n_tok, "loss_tokens": n_loss,
            "rows": len(rows),
            "parameters": n_params, "steps": total, "command": "python validation/train_model.py"
            + (" --tiny" if args.tiny else "")}
    out = Path(args.out)
    ckdir = Path(args.checkpoints) if args.checkpoints else None
    model.train()
    ema = None
    for step in range(total):
        batch = batches[step]
        width = max(len(x) for x, _ in batch)
        ids = torch.full((len(batch), width), tokenizer.eos_token_id, dtype=torch.long)
        lab = torch.full((len(batch), width), -100, dtype=torch.long)
        att = torch.zeros((len(batch), width), dtype=torch.long)
        for r, (x, y) in enumerate(batch):
            ids[r, :len(x)] = torch.tensor(x)
            lab[r, :len(y)] = torch.tensor(y)
            att[r, :len(x)] = 1
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        loss = model(input_ids=ids, attention_mask=att, labels=lab).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        ema = loss.item() if ema is None else 0.95 * ema + 0.05 * loss.item()
        done = step + 1
        if done % 10 == 0 or done == total:
            log(f"step {done}/{total} loss {loss.item():.4f} ema {ema:.4f} lr {lr_at(step):.2e} "
                f"elapsed {time.time() - t0:.0f}s")
        if done == cfg.early_step:
            save(model, tokenizer, out / "react-tiny-early",
                 {**meta, "step": done, "loss_ema": round(ema, 4)})
            log(f"saved the early checkpoint (step {done})")
        if ckdir is not None and done % args.every == 0:
            save(model, tokenizer, ckdir / f"step{done:05d}",
                 {**meta, "step": done, "loss_ema": round(ema, 4)})
    model.eval()
    save(model, tokenizer, out / "react-tiny", {**meta, "step": total, "loss_ema": round(ema or 0.0, 4)})
    for d in ("react-tiny-early", "react-tiny"):
        if (out / d).is_dir():
            log(f"{d}: {json.dumps(sha256_dir(out / d))}")
    log(f"done in {time.time() - t0:.0f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
