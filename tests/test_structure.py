"""The package's structure as the design states it (docs/design.md §3, §10): one module talks to
Spot, content DFAs do not depend on the automaton, the command line is an explicit table, and the
domain modules know nothing of argparse."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import ltlagent
from ltlagent.cli import COMMANDS, build_parser, main

PACKAGE = Path(ltlagent.__file__).parent


def _imports(path: Path) -> set[str]:
    """Every module a source file imports (at the top or inside functions), as written."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module)
    return out


def test_only_spotlib_imports_spot() -> None:
    users = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                   if any(m == "spot" or m.startswith("spot.") for m in _imports(p)))
    assert users == ["spotlib.py"]


def test_domain_modules_have_no_argparse() -> None:
    for name in ("checks/show.py", "checks/validate.py", "checks/equiv.py", "logic/automaton.py",
                 "spec/syntax.py"):
        assert "argparse" not in _imports(PACKAGE / name), name


#: The layers of docs/design.md §10, lowest first: a module imports only from layers below its own.
LAYERS = {"errors": 0, "spotlib": 0, "graph": 0, "text": 1, "chat": 1, "spec": 2, "logic": 3,
          "checks": 4, "decode": 4, "agent": 5, "guard": 5, "cli": 6, "__init__": 7, "__main__": 7}


def _layer_of(path: Path) -> str:
    return path.relative_to(PACKAGE).with_suffix("").parts[0]


def _targets(path: Path) -> set[str]:
    """The top-level ltlagent units (package or module) a file imports, relative imports resolved."""
    here = path.relative_to(PACKAGE).parent.parts
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(here[:len(here) - node.level + 1])
                mod = [*base, *(node.module.split(".") if node.module else [])]
                names = [".".join(["ltlagent", *mod, a.name]) for a in node.names] if not mod else \
                    [".".join(["ltlagent", *mod])]
            elif node.module:
                names = [node.module] if node.module != "ltlagent" else \
                    [f"ltlagent.{a.name}" for a in node.names]
        for n in names:
            parts = n.split(".")
            if parts[0] == "ltlagent" and len(parts) > 1 and parts[1] in LAYERS:
                out.add(parts[1])
    return out


def test_no_module_imports_upward() -> None:
    files = sorted(PACKAGE.rglob("*.py"))
    assert {_layer_of(p) for p in files} <= set(LAYERS), "a package the layering does not know"
    upward = [(str(p.relative_to(PACKAGE)), t) for p in files for t in _targets(p)
              if t != _layer_of(p) and LAYERS[t] >= LAYERS[_layer_of(p)]]
    assert upward == []


def test_layering_check_sees_imports() -> None:
    """The check above would pass vacuously if it resolved nothing: it must see real edges."""
    assert "text" in _targets(PACKAGE / "spec" / "syntax.py")
    assert "errors" in _targets(PACKAGE / "cli" / "__init__.py")


def test_content_does_not_import_the_automaton() -> None:
    """Imported without the package's __init__ (which loads the spec side), content.py pulls in
    neither the automaton nor Spot."""
    code = ("import sys, types\n"
            f"pkg = types.ModuleType('ltlagent'); pkg.__path__ = [{str(PACKAGE)!r}]\n"
            "sys.modules['ltlagent'] = pkg\n"
            "import ltlagent.text.content\n"
            "assert ltlagent.text.content.regex_dfa('a+').matches(b'aa')\n"
            "bad = sorted(m for m in ('ltlagent.logic.automaton', 'ltlagent.spotlib', 'spot') "
            "if m in sys.modules)\n"
            "assert not bad, bad\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_dispatch_table_covers_every_command() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert sub.choices is not None and list(sub.choices) == [c.name for c in COMMANDS]
    assert {c.name for c in COMMANDS} == {"show", "check-trace", "validate", "check-equiv", "check-log",
                                          "run", "guard"}
    for c in COMMANDS:
        args = parser.parse_args([c.name, *(["react", "react"] if c.name in ("check-equiv", "check-log")
                                            else ["x", "--spec", "react"] if c.name == "validate" else
                                            ["--spec", "react", "--upstream", "http://127.0.0.1:1/v1"]
                                            if c.name == "guard" else ["react"])])
        assert args._command is c


@pytest.mark.parametrize("name", [c.name for c in COMMANDS])
def test_every_command_has_help(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ei:
        main([name, "--help"])
    assert ei.value.code == 0 and capsys.readouterr().out.startswith(f"usage: ltlagent {name}")


def test_python_dash_m_ltlagent_runs_the_cli_without_torch_or_networkx() -> None:
    code = ("import runpy, sys\n"
            "sys.modules['torch'] = None\nsys.modules['transformers'] = None\n"
            "sys.argv = ['ltlagent', 'show', 'react']\n"
            "try:\n    runpy.run_module('ltlagent', run_name='__main__')\n"
            "except SystemExit as e:\n    assert e.code == 0, e.code\n"
            "assert 'networkx' not in sys.modules\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "allowed first: Thought, Final-Thought" in proc.stdout


def test_old_compile_name_warns_and_still_works() -> None:
    import ltlagent.logic.compiled

    with pytest.warns(DeprecationWarning, match="compile_spec"):
        f = ltlagent.compile
    assert f is ltlagent.compile_spec
    with pytest.warns(DeprecationWarning, match="compile_spec"):
        g = ltlagent.logic.compiled.compile
    assert g is ltlagent.compile_spec
    assert "compile" not in ltlagent.__all__  # the new name does not warn (warnings are errors)
    assert ltlagent.compile_spec("react").names


def test_the_vllm_modules_import_without_vllm_or_torch() -> None:
    """The vLLM adapters and the chat agent load where neither vLLM nor torch is installed (vLLM is
    imported where a request is sent, torch where logits are touched)."""
    code = ("import sys\n"
            "sys.modules['vllm'] = None\nsys.modules['torch'] = None\n"
            "import ltlagent.decode.vllm_processor as p, ltlagent.agent.vllm_chat, ltlagent.agent.chat\n"
            "assert p.LtlLogitsProcessor.__mro__[1] is object\n"
            "assert p.LtlLogitsProcessorV2.__mro__[1] is object\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
