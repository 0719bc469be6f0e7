"""The benchmarks and the finished studies (bench/studies/) stay runnable: each one's command line answers `--help`
without measuring anything, every name one takes from grpo_sweep still exists there (a rename elsewhere is caught
here, not at the next measurement), bench/README.md lists each where it is, and a study's replay runs as a command.
Cheap: one process for every `--help`, and the names are checked on the source, importing nothing."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

from .conftest import ROOT

BENCH = ROOT / "bench"
STUDIES = BENCH / "studies"
PACKAGE = "grpo_sweep"

HELP_EACH = """
import contextlib, importlib, io, json, pkgutil, sys
import bench, bench.studies
answers = {}
for package in (bench, bench.studies):
    for info in pkgutil.iter_modules(package.__path__):
        name = package.__name__ + "." + info.name
        module = importlib.import_module(name)
        if info.ispkg or not hasattr(module, "main"):
            continue  # bench._common: what they share
        sys.argv, out = [name, "--help"], io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                module.main()
            answers[name] = [None, out.getvalue()]
        except SystemExit as exc:
            answers[name] = [exc.code, out.getvalue()]
heavy = [m for m in ("torch", "trl", "transformers", "datasets") if m in sys.modules]
print(json.dumps({"answers": answers, "heavy": heavy}))
"""


def runnable() -> list[tuple[str, Path]]:
    """(dotted name, file) of every benchmark and study: a module with a main()."""
    return [
        (".".join(p.relative_to(ROOT).with_suffix("").parts), p)
        for p in sorted([*BENCH.glob("*.py"), *STUDIES.glob("*.py")])
        if not p.stem.startswith("_") and "def main(" in p.read_text()
    ]


def test_every_benchmark_answers_help_and_measures_nothing():
    done = subprocess.run([sys.executable, "-c", HELP_EACH], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert set(found["answers"]) == {name for name, _ in runnable()}
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
    sources = sorted([*BENCH.glob("*.py"), *STUDIES.glob("*.py")])
    missing = {p.name: found for p in sources if (found := missing_names(p.read_text()))}
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


def test_the_readme_lists_each_benchmark_and_each_study_where_it_is():
    """bench/README.md's two tables: the benchmarks a user reruns (bench/) and the finished studies (bench/studies/)."""
    text = (BENCH / "README.md").read_text()
    studies_at = text.index("## Finished studies")
    listed = {m: "bench.studies." + m if at > studies_at else "bench." + m for m, at in _listed(text)}
    assert sorted(listed.values()) == sorted(name for name, _ in runnable())


def _listed(text: str) -> list[tuple[str, int]]:
    """(module, where) of each table row's first cell, `name`."""
    return [(m.group(1), m.start()) for m in re.finditer(r"^\| `(\w+)` \|", text, re.M)]


def test_search_efficiency_replays_searches_from_a_cached_grid_without_training(tmp_path):
    """The study's replay, run as its command on a made-up grid whose one good configuration is visibly good."""
    axes = ("optimizer.learning_rate", "trainer.num_generations")
    lrs, generations = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2), (4, 8)
    runs = []
    for lr in lrs:
        for g in generations:
            final = 0.6 if (lr, g) == (3e-4, 4) else 0.3 if lr < 3e-3 else 0.05
            for seed in (42, 43, 44):
                value = final + (seed - 43) / 100
                # validation curves: the bad configurations are visibly bad from step 30 on
                curve = {str(step): value * step / 40 for step in (10, 20, 30, 40)}
                config = f"{axes[0]}={lr} {axes[1]}={g}"
                runs.append({"config": config, "seed": seed, "value": value, "steps": 40, "curve": curve})

    def replay(cache: dict, trials: int, seeds_per_trial: int) -> dict:
        results = tmp_path / "search_efficiency.json"
        results.write_text(json.dumps(cache))
        cmd = [sys.executable, "-m", "bench.studies.search_efficiency", "--results", str(results)]
        cmd += ["--sampler-seeds", "20", "--trials", str(trials), "--seeds-per-trial", str(seeds_per_trial)]
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(results.read_text())["replay"]

    out = replay({"grid": {"objective": "val_accuracy", "runs": runs}, "replay": {}}, trials=12, seeds_per_trial=2)
    assert out["configurations"] == 10 and out["configurations_within_target"] == 1 and "caveat" not in out
    assert out["tpe"]["pruning"] and out["tpe"]["pruned_trials_mean"] > 0 and not out["random"]["pruning"]
    for sampler in ("tpe", "random"):
        q = out[sampler]["steps_to_target"]
        assert q["of"] == 20 and len(out[sampler]["per_seed"]) == 20
        reached = sorted(v for v in out[sampler]["per_seed"] if v is not None)
        assert q["not_reached"] == 20 - len(reached)
        if q["median"] is not None:
            # two seeds of 40 steps per trial that ran to the end: whole trials, or pruned ones after 30 steps
            assert q["q25"] <= q["median"] <= (q["q75"] or float("inf")) and q["median"] % 10 == 0
    # the first version's cache (one seed, final held-out values, no curves) still replays, with its caveat
    legacy = {f"{axes[0]}={lr} {axes[1]}={g}": 0.5 for lr in lrs for g in generations}
    out = replay({"objective": "eval_accuracy", "grid": {"objectives": legacy}}, trials=4, seeds_per_trial=1)
    assert "regenerate it with" in out["caveat"] and not out["tpe"]["pruning"]
    # every configuration is within target: the first trial reaches it, in every search
    assert out["random"]["steps_to_target"] == {"median": 40.0, "q25": 40.0, "q75": 40.0, "not_reached": 0, "of": 20}
