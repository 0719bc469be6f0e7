"""The benchmarks stay runnable: each one's command line answers `--help` without measuring anything, and every name
a benchmark takes from grpo_sweep still exists there (a rename elsewhere is caught here, not at the next
measurement). Cheap: one process for every `--help`, and the names are checked on the source, importing nothing."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from .conftest import ROOT

BENCH = ROOT / "bench"
PACKAGE = "grpo_sweep"

HELP_EACH = """
import contextlib, importlib, io, json, pkgutil, sys
import bench
answers = {}
for info in pkgutil.iter_modules(bench.__path__):
    module = importlib.import_module("bench." + info.name)
    if not hasattr(module, "main"):
        continue  # bench._common, bench.judge_servers: what the benchmarks share
    sys.argv, out = [info.name, "--help"], io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            module.main()
        answers[info.name] = [None, out.getvalue()]
    except SystemExit as exc:
        answers[info.name] = [exc.code, out.getvalue()]
heavy = [m for m in ("torch", "trl", "transformers", "datasets") if m in sys.modules]
print(json.dumps({"answers": answers, "heavy": heavy}))
"""


def test_every_benchmark_answers_help_and_measures_nothing():
    done = subprocess.run([sys.executable, "-c", HELP_EACH], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])
    benchmarks = {p.stem for p in BENCH.glob("*.py") if not p.stem.startswith("_") and "def main(" in p.read_text()}
    assert set(found["answers"]) == benchmarks
    wrong = {name: code for name, (code, text) in found["answers"].items() if code != 0 or "usage:" not in text}
    assert not wrong, f"these did not stop at --help (exit code, None: main returned): {wrong}"
    assert found["heavy"] == [], "--help of a benchmark imported the training stack"


def _module_file(module: str) -> Path | None:
    path = ROOT.joinpath(*module.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _defined(module: str) -> set[str] | None:
    """The names a module defines or imports at its top level (and its submodules); None where any name will do
    (a module-level __getattr__)."""
    path = _module_file(module)
    names = {p.stem for p in path.parent.iterdir()} if path.name == "__init__.py" else set()
    blocks = [ast.parse(path.read_text()).body]
    while blocks:
        for node in blocks.pop():
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names |= {(a.asname or a.name).split(".")[0] for a in node.names}
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                blocks += [
                    node.body,
                    getattr(node, "orelse", []),
                    getattr(node, "finalbody", []),
                    *[h.body for h in getattr(node, "handlers", [])],
                ]
    return None if "__getattr__" in names else names


def missing_names(source: str) -> list[str]:
    """`module.name` for each name the source imports from grpo_sweep (at any depth, or reads as an attribute of
    a grpo_sweep module it imported) that grpo_sweep no longer has."""
    tree = ast.parse(source)
    wanted: list[tuple[str, str]] = []
    modules: dict[str, str] = {}  # local name -> the grpo_sweep module it is
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == PACKAGE:
            for alias in node.names:
                wanted.append((node.module, alias.name))
                if _module_file(f"{node.module}.{alias.name}"):
                    modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PACKAGE + "."):
                    wanted.append((alias.name.rpartition(".")[0] or alias.name, alias.name.rpartition(".")[2]))
                    if alias.asname:
                        modules[alias.asname] = alias.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
            wanted.append((modules[node.value.id], node.attr))
    missing = []
    for module, name in dict.fromkeys(wanted):
        if _module_file(module) is None:
            missing.append(f"{module} (no such module)")
        elif (names := _defined(module)) is not None and name not in names:
            missing.append(f"{module}.{name}")
    return missing


def test_every_name_a_benchmark_takes_from_grpo_sweep_exists():
    missing = {p.name: found for p in sorted(BENCH.glob("*.py")) if (found := missing_names(p.read_text()))}
    assert not missing, f"renamed or removed in grpo_sweep, still used by bench/: {missing}"


def test_the_name_check_sees_a_renamed_function_and_a_removed_module():
    source = (
        "from grpo_sweep.rewards import REWARDS, no_such_reward\n"
        "import grpo_sweep.reading.stats as stats\n"
        "def main():\n    from grpo_sweep.no_such_module import x\n    return stats.no_such_function\n"
    )
    assert missing_names(source) == [
        "grpo_sweep.rewards.no_such_reward",
        "grpo_sweep.no_such_module (no such module)",
        "grpo_sweep.reading.stats.no_such_function",
    ]


def test_benchmarks_import_no_test_code():
    """What a benchmark shares with the tests lives in bench/ (the tests may import it), not the other way round."""
    found = [
        f"{p.name}: {node.module or node.names[0].name}"
        for p in sorted(BENCH.glob("*.py"))
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, (ast.Import, ast.ImportFrom))
        and ((node.module or "") if isinstance(node, ast.ImportFrom) else node.names[0].name).split(".")[0] == "tests"
    ]
    assert found == []
