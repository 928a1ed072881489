"""The package's structure as the design states it (docs/design.md §3, §10): one module talks to
Spot, content DFAs do not depend on the automaton, the command line is an explicit table, and the
domain modules know nothing of argparse."""

from __future__ import annotations

import ast
import os
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
LAYERS = {"errors": 0, "spotlib": 0, "graph": 0, "version": 0, "jit": 0, "text": 1, "chat": 1,
          "spec": 2, "logic": 3, "checks": 4, "decode": 4, "agent": 5, "guard": 5, "cli": 6,
          "__init__": 7, "__main__": 7}


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


def _module_graph(root: Path, packages: tuple[str, ...]) -> dict[str, set[str]]:
    """Module -> the modules of ``packages`` it imports (at the top, inside functions or under
    ``TYPE_CHECKING``: a type-only edge is still a dependency), relative imports resolved. A
    package's ``__init__`` is the package's name; ``from pkg import sub`` names the submodule."""
    files = {}
    for pkg in packages:
        for path in (root / pkg).rglob("*.py"):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            files[".".join(parts)] = path
    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        here = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = here[:len(here) - node.level + 1] if node.level else []
                src = ".".join([*base, *([node.module] if node.module else [])])
                targets = [f"{src}.{a.name}" if f"{src}.{a.name}" in files else src for a in node.names]
            for t in targets:
                while t and t not in files:  # `import a.b.c` of a name inside a module: its module
                    t = t.rpartition(".")[0]
                if t and t != mod:
                    graph[mod].add(t)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected group of modules that has one (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles() -> None:
    """No module depends on itself through others (docs/design.md §10), type-only and lazy imports
    included: a cycle is a design knot even where Python tolerates it at run time. The experiment
    scripts under validation/ and benchmarks/ are held to the same rule."""
    graph = _module_graph(PACKAGE.parent, ("ltlagent", "validation", "benchmarks"))
    assert "ltlagent.agent.runner" in graph["ltlagent.agent.vllm_backend"]  # it sees real edges
    assert "ltlagent.decode.machine" in graph["ltlagent.decode.memo"]
    assert _cycles(graph) == []


def test_cycle_check_finds_a_type_only_cycle(tmp_path: Path) -> None:
    """The check above fails on the shapes of cycle the issue found: a lazy import one way and a
    ``TYPE_CHECKING`` import the other, across three modules, and through a package's ``__init__``."""
    pkg = tmp_path / "p"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from p.sub.c import C\n__version__ = '1'\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from p import b\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import f\n")
    (pkg / "sub" / "c.py").write_text("from ..d import x\nC = 1\n")
    (pkg / "d.py").write_text("def x():\n    from p import __version__\n")
    assert _cycles(_module_graph(tmp_path, ("p",))) == [["p", "p.d", "p.sub.c"], ["p.a", "p.b"]]


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


def test_property_tests_are_derandomised_unless_exploring() -> None:
    """CI and ``make test`` run the Hypothesis profile ``ci`` (tests/conftest.py): derandomised, no
    example database, so a property test passes or fails the same way on every run."""
    from hypothesis import settings

    if settings.get_current_profile_name() == "ci":
        assert settings().derandomize and settings().database is None


def test_the_explore_profile_runs_only_property_tests_with_more_examples() -> None:
    """``make test-explore``: the property tests only, unseeded, ten times their examples."""
    code = ("import sys, pytest\n"
            "class P:\n"
            "    def pytest_collection_finish(self, session):\n"
            "        from hypothesis import settings\n"
            "        for it in session.items:\n"
            "            s = it.obj._hypothesis_internal_use_settings\n"
            "            print('ITEM', it.name, s.max_examples, s.derandomize)\n"
            "sys.exit(pytest.main(['-q', '--co', '-p', 'no:cacheprovider', 'tests/test_lexer.py'], "
            "plugins=[P()]))\n")
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["LTLAGENT_HYPOTHESIS"] = "explore"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env=env, cwd=PACKAGE.parent)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    items = [line.split()[1:] for line in proc.stdout.splitlines() if line.startswith("ITEM ")]
    assert items and "deselected" in proc.stdout, proc.stdout
    assert all(derand == "False" and int(n) >= 10 * 100 for _name, n, derand in items), items
