"""Warm masks (ltlagent.decode.warm): masks computed in one process are stored with the index cache and
loaded by the next, equal to freshly computed ones; damaged files and the cache switch are respected."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")

from ltlagent.decode import cache, warm
from ltlagent.decode.monitor import Monitor, TokenIndex, build_index
from ltlagent.logic.compiled import compile_spec
from tests import tiny

TURNS = [("model", "Thought: look it up\nAction: Search\nAction Input: capital of France\nObservation:"),
         ("env", " Paris\n"), ("model", "Final Thought: done\nAnswer: Paris")]


def drive(index: TokenIndex, newline: bool | None = None) -> list[np.ndarray]:
    """Write TURNS through a monitor, the longest allowed token at a time; the allowed ids per step."""
    mon = Monitor(index, eos_ends_text=False, newline=newline)
    seen = []
    for who, text in TURNS:
        if who == "env":
            mon.feed_env(text)
            continue
        data = text.encode()
        while data:
            allowed = mon.allowed_token_ids()
            seen.append(allowed)
            ok = set(allowed.tolist())
            tok = next(t for t in mon.index.buckets.longest_prefix_of(data) if t in ok)
            mon.advance(tok)
            data = data[len(mon.index.vocab.token_bytes(tok)):]
    seen.append(mon.allowed_token_ids())
    mon.advance(index.eos_token_ids[0])
    assert mon.is_finished and mon.is_complete
    return seen


def by_key(index: TokenIndex) -> dict[tuple[object, ...], object]:
    m = index.machine
    return {(m.keys[sid], ends): mk for (sid, ends), mk in index._memo.masks.items()}


@pytest.fixture()
def cache_at(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LTLAGENT_CACHE_DIR", str(tmp_path))
    return tmp_path


def masks_files(root: Path) -> list[Path]:
    return sorted((root / "index").glob("*.masks*.npz"))


@pytest.mark.parametrize("newline", [None, True])
def test_persisted_masks_load_back_equal_to_fresh_ones(cache_at: Path, newline: bool | None) -> None:
    compiled = compile_spec("react-tools")
    tok = tiny.byte_level()
    first = build_index(compiled, tok, precompute=False)
    expected = drive(first, newline)
    used = first if newline is None else first.variant(newline)
    assert warm.save_masks(used) is not None
    assert len(masks_files(cache_at)) == 1
    assert warm.save_masks(used) is None  # nothing new since

    second = build_index(compiled, tok, precompute=False)
    loaded = second if newline is None else second.variant(newline)
    stored = by_key(loaded)
    assert len(stored) == len(used._memo.masks) > 3
    fresh_index = build_index(compiled, tok, cache=False)
    fresh_index = fresh_index if newline is None else fresh_index.variant(newline)
    fm = fresh_index.machine
    for (key, ends), mk in stored.items():
        fresh = fresh_index.mask(fm.intern(key), ends)  # type: ignore[arg-type]
        assert np.array_equal(mk.allowed_ids(), fresh.allowed_ids()), key  # type: ignore[attr-defined]
        assert (mk.max_need, mk.quiet, mk.forced) == (fresh.max_need, fresh.quiet, fresh.forced)  # type: ignore[attr-defined]
    # and a run on the warm index allows exactly what a cold one does, step by step
    again = drive(second, newline)
    assert len(again) == len(expected)
    assert all(np.array_equal(a, b) for a, b in zip(again, expected))


def test_masks_are_saved_when_the_index_is_collected(cache_at: Path) -> None:
    import gc

    index = build_index(compile_spec("react"), tiny.byte_level(), precompute=False)
    drive(index)
    del index
    gc.collect()
    assert len(masks_files(cache_at)) == 1


@pytest.mark.parametrize("damage", ["truncated", "garbage", "inconsistent", "other-size"])
def test_damaged_masks_file_is_ignored(cache_at: Path, damage: str) -> None:
    compiled = compile_spec("react-tools")
    tok = tiny.byte_level()
    index = build_index(compiled, tok, precompute=False)
    expected = drive(index)
    path = warm.save_masks(index)
    assert path is not None
    if damage == "truncated":
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        path.write_bytes(b"not a zip file" * 50)
    else:
        with np.load(path) as z:
            arrays = {k: z[k] for k in z.files}
        if damage == "inconsistent":
            arrays["offsets"] = arrays["offsets"] + 5  # points past the ids
        else:
            arrays["size"] = np.asarray(int(arrays["size"]) + 1)
        np.savez(path, **arrays)
    again = build_index(compiled, tok, precompute=False)
    assert again._memo.masks == {}  # nothing loaded
    got = drive(again)
    assert all(np.array_equal(a, b) for a, b in zip(got, expected))


def test_cache_off_writes_and_reads_no_masks(cache_at: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    compiled = compile_spec("react-tools")
    tok = tiny.byte_level()
    index = build_index(compiled, tok, precompute=False)
    drive(index)
    warm.save_masks(index)
    assert len(masks_files(cache_at)) == 1
    cache.disable_cache()
    try:
        off = build_index(compiled, tok, precompute=False)
        assert off._memo.masks == {}
        drive(off)
        assert warm.save_masks(off) is None
        assert build_index(compiled, tok, cache=False)._memo.warm is None
    finally:
        monkeypatch.setenv("LTLAGENT_CACHE_DIR", str(cache_at))


def test_failed_write_leaves_no_partial_file(cache_at: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    index = build_index(compile_spec("react"), tiny.byte_level(), precompute=False)
    drive(index)

    def boom(*_a: object, **_k: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez", boom)
    assert warm.save_masks(index) is None
    assert list((cache_at / "index").glob("*.tmp")) == []
    assert masks_files(cache_at) == []


def test_masks_of_the_boundary_variant_are_kept_apart(cache_at: Path) -> None:
    """Example boundaries change the byte machine (its stop matchers); their masks get their own
    entry, and an index without boundaries never reads them."""
    from ltlagent.text.lexer import CONTEXT_LABELS

    compiled = compile_spec("react-tools")
    tok = tiny.byte_level()
    with_labels = build_index(compiled, tok, context_labels=CONTEXT_LABELS, precompute=False)
    drive(with_labels)
    assert warm.save_masks(with_labels) is not None
    plain = build_index(compiled, tok, precompute=False)
    assert not plain._memo.masks  # nothing loaded from the other variant
    drive(plain)
    assert warm.save_masks(plain) is not None
    assert len(masks_files(cache_at)) == 2
    again = build_index(compiled, tok, context_labels=CONTEXT_LABELS, precompute=False)
    assert by_key(again).keys() == by_key(with_labels).keys()


def test_precomputed_masks_are_stored_at_build_and_loaded_by_the_next_build(cache_at: Path) -> None:
    compiled = compile_spec("react-tools")
    tok = tiny.byte_level()
    first = build_index(compiled, tok)  # cache on: every reachable state's mask now, stored at once
    n = len(first._memo.masks)
    assert n > 50 and len(masks_files(cache_at)) == 1
    second = build_index(compiled, tok)
    assert len(second._memo.masks) == n  # all loaded, nothing computed again
    assert second.precompute() == 0
    fresh = build_index(compiled, tok, cache=False, precompute=False)
    fm = fresh.machine
    for (key, ends), mk in by_key(second).items():
        want = fresh.mask(fm.intern(key), ends)  # type: ignore[arg-type]
        assert np.array_equal(mk.allowed_ids(), want.allowed_ids()), key  # type: ignore[attr-defined]
        assert (mk.max_need, mk.quiet, mk.forced) == (want.max_need, want.quiet, want.forced)  # type: ignore[attr-defined]
    before = len(second._memo.masks)
    got = drive(second)
    assert len(second._memo.masks) == before  # the run met no state without a mask
    assert all(np.array_equal(a, b) for a, b in zip(got, drive(fresh)))
