"""The import rule of docs/architecture.md, checked on the source: every module of grpo_sweep/ (and our Hydra
plugins, and launch.py) sits in a layer of LAYERS, imports only from lower layers or from its own package, and no
import loop exists between modules — counting imports inside functions, which are loops all the same once both
run. Parsed with ``ast``, nothing is imported."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Lowest first. A unit (a package, or a top-level module) may import any unit of a lower layer and itself; units of
# one layer do not import each other (tracking and reading are siblings), except in the entry layer.
LAYERS: list[tuple[str, list[str]]] = [
    ("base", ["grpo_sweep.config", "grpo_sweep.adapters"]),
    ("building blocks", ["grpo_sweep.rewards", "grpo_sweep.data"]),
    ("local models", ["grpo_sweep.models"]),
    ("backends", ["grpo_sweep.backends"]),
    ("one run", ["grpo_sweep.run"]),
    ("tracking, reading a sweep", ["grpo_sweep.tracking", "grpo_sweep.reading"]),
    ("launching many runs", ["grpo_sweep.launching"]),
    ("search strategies (grid, seeds, Optuna, PBT)", ["grpo_sweep.search"]),
    ("a sweep directory's commands and end", ["grpo_sweep.sweeps"]),
    (
        "entry",
        [
            "grpo_sweep",
            "grpo_sweep.app",
            "grpo_sweep.configstore",
            "hydra_plugins.grpo_sweep_launcher",
            "hydra_plugins.grpo_sweep_grid",
            "hydra_plugins.grpo_sweep_optuna",
            "hydra_plugins.grpo_sweep_pbt",
            "hydra_plugins.grpo_sweep_seeds",
            "launch",
        ],
    ),
]
ENTRY = len(LAYERS) - 1
# units that are one module, not everything under them (grpo_sweep/__init__.py is not every module of grpo_sweep)
ONE_MODULE = {"grpo_sweep"}
OURS = (
    "grpo_sweep",
    "hydra_plugins.grpo_sweep_launcher",
    "hydra_plugins.grpo_sweep_grid",
    "hydra_plugins.grpo_sweep_optuna",
    "hydra_plugins.grpo_sweep_pbt",
    "hydra_plugins.grpo_sweep_seeds",
    "launch",
)


def module_files(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module of ours under ``root``."""
    files = [
        root / "launch.py",
        *(root / "grpo_sweep").rglob("*.py"),
        *(root / "hydra_plugins").glob("grpo_sweep_*/*.py"),
    ]
    modules = {}
    for path in files:
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def imports_of(name: str, path: Path, modules: dict[str, Path], source: str | None = None) -> set[str]:
    """Every module of ours that ``name`` imports, at module top or inside a function (``source``: its text, if
    not the file's)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text() if source is None else source, str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            # `from pkg import module` imports the module; `from module import name` the module
            targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in modules else source for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:  # `import a.b.c` where c is a name: its module
                target = target.rpartition(".")[0]
            if target and target.startswith(OURS) and target != name:
                found.add(target)
    return found


def unit_of(name: str) -> tuple[int, str] | None:
    best = None
    for layer, (_, units) in enumerate(LAYERS):
        for unit in units:
            inside = name == unit or (unit not in ONE_MODULE and name.startswith(unit + "."))
            if inside and (best is None or len(unit) > len(best[1])):
                best = (layer, unit)
    return best


def graph(root: Path) -> dict[str, set[str]]:
    modules = module_files(root)
    return {name: imports_of(name, path, modules) for name, path in sorted(modules.items())}


def layering_problems(edges: dict[str, set[str]]) -> list[str]:
    problems = []
    for name, targets in edges.items():
        placed = unit_of(name)
        if placed is None:
            problems.append(f"{name} is in no layer of tests/test_architecture.py LAYERS: place it in a package")
            continue
        for target in sorted(targets):
            other = unit_of(target)
            if other is None or other[1] == placed[1] or other[0] < placed[0] or placed[0] == ENTRY:
                continue
            where = "a higher" if other[0] > placed[0] else "a sibling"
            problems.append(f"{name} ({LAYERS[placed[0]][0]}) imports {target} ({LAYERS[other[0]][0]}: {where} layer)")
    return sorted(problems)


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The import loops: strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in edges.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in edges:
        if node not in index:
            visit(node)
    return found


def test_the_checks_find_a_loop_and_an_upward_import():
    """The checks themselves: a made-up graph with one loop and one import from the run up into the sweeps."""
    edges = {
        "grpo_sweep.run.train": {"grpo_sweep.launching.pool"},
        "grpo_sweep.launching.pool": {"grpo_sweep.launching.submit"},
        "grpo_sweep.launching.submit": {"grpo_sweep.launching.pool", "grpo_sweep.run.results"},
        "grpo_sweep.run.results": set(),
        "grpo_sweep.flat": set(),
    }
    assert cycles(edges) == [["grpo_sweep.launching.pool", "grpo_sweep.launching.submit"]]
    assert layering_problems(edges) == [
        "grpo_sweep.flat is in no layer of tests/test_architecture.py LAYERS: place it in a package",
        "grpo_sweep.run.train (one run) imports grpo_sweep.launching.pool (launching many runs: a higher layer)",
    ]


def test_the_graph_sees_imports_inside_functions_and_relative_ones():
    edges = graph(ROOT)
    assert "grpo_sweep.run.train" in edges["grpo_sweep.run.lifecycle"]  # imported inside run_one's training
    assert (
        "grpo_sweep.backends.trl_backend" in edges["grpo_sweep.backends.unsloth_backend"]
    )  # `from . import trl_backend`
    assert len(edges) > 50


def test_imports_go_only_downward():
    assert layering_problems(graph(ROOT)) == []


def test_no_import_loops():
    assert cycles(graph(ROOT)) == []


# One reader of a sweep: within the sweeps and the search, only reading/results.py reads a run's summary.json and
# outcomes back and computes the comparisons; every table, report and status takes its SweepResults.
SWEEP_READING = {"read_run_summary", "read_outcomes", "compare", "collect_runs"}
READER = "grpo_sweep.reading.results"
# launching/resubmit.py reads summaries to choose the runs to queue again (before a sweep has results to render)
READING_ALLOWED = {"grpo_sweep.launching.resubmit": {"read_run_summary"}}


def sweep_readers(root: Path) -> dict[str, set[str]]:
    """Module -> the sweep-reading names it uses (called, imported or looked up as an attribute)."""
    found = {}
    for name, path in module_files(root).items():
        inside = name.startswith(
            ("grpo_sweep.sweeps", "grpo_sweep.search", "grpo_sweep.launching", "grpo_sweep.reading")
        )
        if not inside or name in (READER, "grpo_sweep.reading.stats"):
            continue
        used = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Name):
                used.add(node.id)
            elif isinstance(node, ast.Attribute):
                used.add(node.attr)
            elif isinstance(node, ast.ImportFrom):
                used.update(alias.name for alias in node.names)
        used = (used & SWEEP_READING) - READING_ALLOWED.get(name, set())
        if used:
            found[name] = used
    return found


def test_one_reader_of_a_sweep():
    assert sweep_readers(ROOT) == {}, f"read a sweep through {READER}.SweepResults"


# -- checks beside their config --------------------------------------------------------------------------------

# Each config group's one checking function, in the module that gives the group its meaning (config/checks.py for
# the groups that need nothing but their own values); run/validate.validate calls each once, then the checks across
# groups (its own check_across).
GROUP_CHECKS = {
    "check_backend": "grpo_sweep.backends.gpu_stack",
    "check_mix": "grpo_sweep.rewards.mix",
    "check_trainer": "grpo_sweep.config.checks",
    "check_world": "grpo_sweep.run.distributed",
    "check_server_settings": "grpo_sweep.run.vllm_serving",
    "check_model": "grpo_sweep.models",
    "check_lora": "grpo_sweep.config.checks",
    "check_optimizer": "grpo_sweep.config.checks",
    "check_logger": "grpo_sweep.config.checks",
    "precheck_files": "grpo_sweep.data",
    "check_across": "grpo_sweep.run.validate",
}
# Where a ConfigError may be raised: the group checks, validate (across groups, and the training machine's own),
# and the gate with its hub look-ups and its memory plan (what depends on the launcher, the sweep or the network).
RAISE_CONFIG_ERROR = {
    "grpo_sweep.config.checks",
    "grpo_sweep.models",
    "grpo_sweep.run.validate",
    "grpo_sweep.launching.gate",
    "grpo_sweep.launching.hub",
    "grpo_sweep.launching.memory",
}


def called_names(node: ast.AST) -> list[str]:
    """The names of the functions ``node`` calls (``f(...)`` and ``mod.f(...)``)."""
    return [
        c.func.id if isinstance(c.func, ast.Name) else c.func.attr
        for c in ast.walk(node)
        if isinstance(c, ast.Call) and isinstance(c.func, (ast.Name, ast.Attribute))
    ]


def top_functions(path: Path) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in ast.parse(path.read_text()).body if isinstance(n, ast.FunctionDef)}


def test_validate_calls_each_groups_check_once_and_each_lives_beside_its_group():
    modules = module_files(ROOT)
    [validate] = [f for name, f in top_functions(modules["grpo_sweep.run.validate"]).items() if name == "validate"]
    calls = called_names(validate)
    assert {name: calls.count(name) for name in GROUP_CHECKS} == {name: 1 for name in GROUP_CHECKS}
    assert {name: name in top_functions(modules[owner]) for name, owner in GROUP_CHECKS.items()} == {
        name: True for name in GROUP_CHECKS
    }


def test_no_group_is_checked_again_outside_validate():
    """build_mix builds the mix the gate checked, the data loader loads the data it checked: a group's check runs
    once a run (check_world again only with the world a launcher or the training machine gives)."""
    again = {name for name in GROUP_CHECKS if name not in ("check_world", "check_across")}
    found = sorted(
        f"{name} calls {call}"
        for name, path in module_files(ROOT).items()
        if name != "grpo_sweep.run.validate"
        for call in called_names(ast.parse(path.read_text()))
        if call in again
    )
    assert found == []


def test_config_errors_are_raised_only_by_the_checks():
    raising = {
        name
        for name, path in module_files(ROOT).items()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Raise)
        and isinstance(node.exc, ast.Call)
        and getattr(node.exc.func, "id", None) == "ConfigError"
    }
    assert raising == RAISE_CONFIG_ERROR


# One lifecycle entry: a run is run by run/lifecycle.run_one, whoever starts it (docs/architecture.md "One run").
# Who may call each step of a run's lifecycle, outside the step's own module:
LIFECYCLE_STEPS = {
    "grpo_sweep.run.train.train": {"grpo_sweep.run.lifecycle"},
    # training gets its backend object from it; generate.py is a tool of its own, not a run
    "grpo_sweep.backends.get_backend": {"grpo_sweep.run.lifecycle", "grpo_sweep.run.train", "grpo_sweep.run.generate"},
    # launching/submit.py records a job whose process died: no process of the run is left to record it
    "grpo_sweep.run.results.record_failure": {"grpo_sweep.run.lifecycle", "grpo_sweep.launching.submit"},
}
# what starts a run: each reaches training through run_one only
RUN_STARTERS = ("grpo_sweep.app", "grpo_sweep.search.optuna.worker", "grpo_sweep.run.distributed")


def calls_of(name: str, path: Path, source: str) -> set[str]:
    """The functions of ours that module ``name`` (its file ``path``, its text ``source``) calls by a name it
    imported (``from .train import train``, then ``train(...)``), dotted: ``grpo_sweep.run.train.train``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(source, str(path))
    imported: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module.startswith(OURS):
                imported.update({alias.asname or alias.name: f"{module}.{alias.name}" for alias in node.names})
    return {
        imported[node.func.id]
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in imported
    }


def lifecycle_problems(sources: dict[str, str], modules: dict[str, Path]) -> list[str]:
    """Calls of a lifecycle step from outside run_one (LIFECYCLE_STEPS), and starters that import training."""
    problems = []
    for name, source in sorted(sources.items()):
        calls = calls_of(name, modules[name], source)
        for step, allowed in LIFECYCLE_STEPS.items():
            if step in calls and name != step.rpartition(".")[0] and name not in allowed:
                problems.append(f"{name} calls {step}: a run's lifecycle is run/lifecycle.run_one")
        if name in RUN_STARTERS and "grpo_sweep.run.train" in imports_of(name, modules[name], modules, source):
            problems.append(f"{name} imports grpo_sweep.run.train: it reaches training through run_one")
    return problems


def test_the_lifecycle_check_finds_a_second_lifecycle():
    """The check itself: a made-up worker that trains and records a failure on its own."""
    modules = module_files(ROOT)
    worker = (
        "from ...run.train import train\nfrom ...run.results import record_failure as rf\n"
        "def go(cfg, ctx):\n    try:\n        train(cfg, ctx)\n    except Exception:\n"
        "        rf(ctx.run_dir, 'x', [])\n"
    )
    assert lifecycle_problems({"grpo_sweep.search.optuna.worker": worker}, modules) == [
        "grpo_sweep.search.optuna.worker calls grpo_sweep.run.train.train: a run's lifecycle is run/lifecycle.run_one",
        "grpo_sweep.search.optuna.worker calls grpo_sweep.run.results.record_failure: a run's lifecycle is "
        "run/lifecycle.run_one",
        "grpo_sweep.search.optuna.worker imports grpo_sweep.run.train: it reaches training through run_one",
    ]


def test_one_lifecycle_entry():
    """Only run_one trains a run, imports its backend first and records its failure; the task and the Optuna
    worker call it, and the ranks are handed it (distributed.launch_here)."""
    modules = module_files(ROOT)
    sources = {name: path.read_text() for name, path in modules.items()}
    assert lifecycle_problems(sources, modules) == []
    for starter in ("grpo_sweep.app", "grpo_sweep.search.optuna.worker"):
        assert "grpo_sweep.run.lifecycle.run_one" in calls_of(starter, modules[starter], sources[starter])


# The validation metric's names are spelled once, in the run's record (run/record.py); every other module names
# them through its constants or reads RunSummary's attributes, so a rename is one edit and no reader drifts.
RECORD = "grpo_sweep.run.record"
RECORD_SPELLINGS = {"val_accuracy", "val/accuracy"}


def test_the_validation_metric_is_spelled_only_in_the_record_module():
    spelled = {
        name
        for name, path in module_files(ROOT).items()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and node.value in RECORD_SPELLINGS
    }
    assert spelled == {RECORD}


def test_one_module_computes_verdicts_and_nothing_reaches_into_its_private_parts():
    """Every verdict comes from stats.judge (issue 44): no module reads another module's ``_private`` statistics
    (``stats._x`` or ``from .stats import _x``), and none but stats imports scipy's studentized range, the verdicts'
    distribution."""
    import ast

    problems = []
    for path in sorted([*(ROOT / "grpo_sweep").rglob("*.py"), *(ROOT / "bench").rglob("*.py")]):
        name = path.relative_to(ROOT).as_posix()
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and isinstance(node.value, ast.Name)
                and node.value.id in ("stats", "sequential")
            ):
                problems.append(f"{name}:{node.lineno} reads {node.value.id}.{node.attr}")
            if (
                isinstance(node, ast.ImportFrom)
                and (node.module or "").endswith(("stats", "sequential"))
                and "scipy" not in (node.module or "")
            ):
                problems += [
                    f"{name}:{node.lineno} imports {a.name} from {node.module}"
                    for a in node.names
                    if a.name.startswith("_")
                ]
            if (
                isinstance(node, ast.ImportFrom)
                and node.module == "scipy.stats"
                and name != "grpo_sweep/reading/stats.py"
            ):
                problems += [
                    f"{name}:{node.lineno} imports scipy's {a.name}"
                    for a in node.names
                    if a.name == "studentized_range"
                ]
    assert problems == []


# The strategies are rooms: each registered name is a package of search/ with its STRATEGY, and each of our Hydra
# sweeper classes is found as its strategy's, not by the fallback.
def test_every_strategy_is_a_package_and_every_sweeper_finds_its_strategy():
    import importlib

    from grpo_sweep.search import STRATEGIES, for_sweeper, strategies
    from grpo_sweep.search.base import Strategy

    assert [s.name for s in strategies()] == list(STRATEGIES)
    for name in STRATEGIES:
        assert (ROOT / "grpo_sweep" / "search" / name / "__init__.py").is_file()
    found = {}
    for strategy in strategies():
        assert isinstance(strategy, Strategy)
        for option, conf in strategy.sweeper_configs():
            target = conf._target_
            module, _, cls = target.rpartition(".")
            assert module.startswith("hydra_plugins."), target  # Hydra instantiates sweepers from there only
            assert hasattr(importlib.import_module(module), cls), target
            found[option] = for_sweeper(target).name
    assert found == {"grpo_basic": "grid", "seeds": "seeds", "grpo_optuna": "optuna", "grpo_pbt": "pbt"}


# The end of a sweep asks the strategy; it guesses nothing from files, and nothing of a sweep's trade keeps state in
# a module (a list or dict at module level that calls fill, a `global`).
STATELESS = ("grpo_sweep.sweeps", "grpo_sweep.search", "grpo_sweep.reading", "grpo_sweep.launching")
# what is the process's own, not a sweep's: a pool worker's (or a job's) GPU slot lock lives as long as its process;
# the hub checks ask the hub once per model in a process (and remember whether they, not the user, set
# HF_HUB_OFFLINE); the forest plot's options are an empty constant
PROCESS_STATE = {
    "grpo_sweep.launching.placement._held_locks",
    "grpo_sweep.launching.hub._resolved",
    "grpo_sweep.launching.hub._set_here",
    "grpo_sweep.reading.report.FOREST_OPTIONS",
}


def module_state(name: str, source: str) -> list[str]:
    found = []
    for node in ast.parse(source).body:
        value = getattr(node, "value", None)
        empty = isinstance(value, (ast.List, ast.Dict, ast.Set)) and not (
            getattr(value, "elts", None) or getattr(value, "keys", None)
        )
        made = isinstance(value, ast.Call) and getattr(value.func, "id", None) in ("list", "dict", "set")
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and (empty or made):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            found.append(f"{name}.{getattr(target, 'id', '?')} keeps state at module level")
    found += [
        f"{name}.{g} is set as a global"
        for n in ast.walk(ast.parse(source))
        if isinstance(n, ast.Global)
        for g in n.names
    ]
    return found


def test_no_module_state_in_a_sweeps_trade_and_the_end_tests_no_files():
    problems = []
    for name, path in module_files(ROOT).items():
        if name.startswith(STATELESS):
            problems += [p for p in module_state(name, path.read_text()) if p.split(" ")[0] not in PROCESS_STATE]
    assert problems == []
    end = (ROOT / "grpo_sweep" / "sweeps" / "sweep_end.py").read_text()
    for sniff in (".exists(", ".is_file(", "_FILE", "LINEAGE", "glob("):
        assert sniff not in end.replace("VERDICTS_FILE", ""), sniff
    assert module_state("x", "A = []\nB: dict = {}\nC = dict()\nD = [1]\ndef f():\n    global D\n") == [
        "x.A keeps state at module level",
        "x.B keeps state at module level",
        "x.C keeps state at module level",
        "x.D is set as a global",
    ]


def test_no_test_skips_by_importing_our_own_modules():
    """pytest.importorskip skips on ImportError only: our modules raise their own errors when an optional package
    is absent (backends/unsloth_backend.py: BackendError), and the test then fails where it should skip."""
    found = [
        f"{path.name}:{n}"
        for path in (ROOT / "tests").glob("test_*.py")
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if 'importorskip("grpo_sweep' in line.replace(" ", "") and path.name != "test_architecture.py"
    ]
    assert found == []


# -- rules the code states -------------------------------------------------------------------------------------

# Another library's internals are reached from grpo_sweep/adapters/ only (adapters/__init__.py), beside the
# underscored names tests/test_adapters.py already holds: the modules a library does not export (math-verify exports
# parse and verify from its top), the HTTP client itself (the judge gets it through openai), and the client's stream
# class and the response attribute the judge's bound swaps.
EXPORTED_ONLY = ("math_verify",)
NOT_IMPORTED = ("httpx", "httpx2")
INTERNAL_NAMES = {"AsyncByteStream"}
INTERNAL_ATTRIBUTES_SET = {"stream"}
ADAPTERS = "grpo_sweep.adapters"


def internals_reached(name: str, source: str) -> list[str]:
    if name == ADAPTERS or name.startswith(ADAPTERS + "."):
        return []
    found = []
    for node in ast.walk(ast.parse(source)):
        modules = []
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            modules = [node.module or ""]
        for module in modules:
            top, _, rest = module.partition(".")
            if (top in EXPORTED_ONLY and rest) or top in NOT_IMPORTED:
                found.append(f"{name}:{node.lineno} imports {module}")
        if isinstance(node, ast.Name) and node.id in INTERNAL_NAMES:
            found.append(f"{name}:{node.lineno} uses {node.id}")
        elif isinstance(node, ast.Attribute):
            own = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")  # our object's attribute
            swapped = node.attr in INTERNAL_ATTRIBUTES_SET and isinstance(node.ctx, ast.Store) and not own
            if node.attr in INTERNAL_NAMES or swapped:
                found.append(f"{name}:{node.lineno} uses .{node.attr}")
    return found


def test_the_internals_check_finds_a_library_reached_into():
    source = (
        "import httpx\nfrom math_verify.grader import is_expr_of_only_symbols\nfrom math_verify import parse\n"
        "def hook(response, http):\n    response.stream = http.AsyncByteStream()\n"
    )
    assert internals_reached("grpo_sweep.rewards.judge", source) == [
        "grpo_sweep.rewards.judge:1 imports httpx",
        "grpo_sweep.rewards.judge:2 imports math_verify.grader",
        "grpo_sweep.rewards.judge:5 uses .stream",
        "grpo_sweep.rewards.judge:5 uses .AsyncByteStream",
    ]
    assert internals_reached("grpo_sweep.adapters.httpx", source) == []


def test_no_module_outside_adapters_reaches_into_a_librarys_internals():
    found = [p for name, path in module_files(ROOT).items() for p in internals_reached(name, path.read_text())]
    assert found == [], "put it behind an adapter (grpo_sweep/adapters/) with a guard test"


# One atomic writer: a file is written to a temporary name and moved into place only by run/files.py
# (write_text_atomic, write_json_atomic, write_jsonl_atomic). Moving a directory built aside is not writing a file:
MOVES_INTO_PLACE = {
    "grpo_sweep.run.files",
    # the tiny model's build directory, renamed into the cache when complete
    "grpo_sweep.models.tiny",
    # a take-over: the donor's checkpoint and metrics (written atomically) staged beside the recipient, then moved in
    "grpo_sweep.search.pbt.members",
}


def moves_into_place(name: str, source: str) -> list[str]:
    """``os.replace``/``os.rename``, ``Path.replace``/``Path.rename`` (one argument: str.replace takes two) and
    ``tempfile.mkstemp``/``NamedTemporaryFile``: the pieces of a write-then-rename."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        owner = node.func.value.id if isinstance(node.func.value, ast.Name) else None
        attr = node.func.attr
        if (owner == "os" and attr in ("replace", "rename")) or (
            owner == "tempfile" and attr in ("mkstemp", "NamedTemporaryFile")
        ):
            found.append(f"{name}:{node.lineno} calls {owner}.{attr}")
        elif owner not in ("os", "tempfile") and attr in ("replace", "rename") and len(node.args) == 1:
            if not node.keywords:
                found.append(f"{name}:{node.lineno} calls .{attr}(...)")
    return found


def test_the_atomic_write_check_finds_a_second_writer():
    source = (
        "import os, tempfile\ndef w(p, t):\n    tmp = p.with_suffix('.tmp')\n    tmp.write_text(t)\n"
        "    tmp.replace(p)\n    os.replace(tmp, p)\n    tempfile.mkstemp()\n    'a'.replace('a', 'b')\n"
    )
    assert moves_into_place("grpo_sweep.run.train", source) == [
        "grpo_sweep.run.train:5 calls .replace(...)",
        "grpo_sweep.run.train:6 calls os.replace",
        "grpo_sweep.run.train:7 calls tempfile.mkstemp",
    ]


def test_one_atomic_writer():
    found = [
        p
        for name, path in module_files(ROOT).items()
        if name not in MOVES_INTO_PLACE
        for p in moves_into_place(name, path.read_text())
    ]
    assert found == [], "write through grpo_sweep/run/files.py (write_text_atomic, write_json_atomic)"


# A public constant is defined once: the same name with the same value in two modules is one constant twice, and
# the two drift. Where two siblings share a file's name neither may import from the other, the name is the seam:
SHARED_SEAMS = {"VERDICTS_FILE"}  # reading/results.py and tracking/sweep_verdicts.py: siblings


def constants_defined_twice(sources: dict[str, str]) -> list[str]:
    where: dict[tuple[str, str], list[str]] = {}
    for name, source in sorted(sources.items()):
        for node in ast.parse(source).body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                target = node.targets[0] if isinstance(node, ast.Assign) else node.target
                if isinstance(target, ast.Name) and target.id.isupper() and not target.id.startswith("_"):
                    where.setdefault((target.id, ast.dump(node.value)), []).append(name)
    return [
        f"{constant} is defined in {', '.join(names)}"
        for (constant, _), names in sorted(where.items())
        if len(names) > 1 and constant not in SHARED_SEAMS
    ]


def test_a_constant_is_defined_once():
    assert constants_defined_twice({"a": "X = (1, 2)\nY = 1\n", "b": "X = (1, 2)\nY = 2\n"}) == ["X is defined in a, b"]
    sources = {name: path.read_text() for name, path in module_files(ROOT).items()}
    assert constants_defined_twice(sources) == []


# Every standard deviation and interval is computed in reading/ (stats.py, and moderation.py for the moderated
# verdicts' variances): the same figure one way everywhere. PB2 standardises its GP's targets as Ray Tune's PB2 does
# (population sd, ddof=0): a model's input scaling, not a figure anyone reads. The simulator's uncorrected_verdicts is
# the naive paired t the benchmarks measure the engine against: not the engine, on purpose.
COMPUTES_SPREAD = {
    "grpo_sweep.reading.stats",
    "grpo_sweep.reading.moderation",
    "grpo_sweep.search.pbt.pb2",
    "grpo_sweep.search.simulate",
}
SPREAD_CALLS = {"stdev", "pstdev", "variance", "pvariance", "std", "var", "nanstd", "nanvar"}


def spreads_computed(name: str, source: str) -> list[str]:
    """Calls of a library's sd or variance (statistics.stdev, numpy's std/var, an array's .std()), and a sum of
    squared deviations divided by n - 1 written out."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if called in SPREAD_CALLS:
                found.append(f"{name}:{node.lineno} calls {called}")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow) and isinstance(node.left, ast.BinOp):
            if isinstance(node.left.op, ast.Sub) and isinstance(node.right, ast.Constant) and node.right.value == 2:
                found.append(f"{name}:{node.lineno} squares a deviation")
    return found


def test_the_spread_check_finds_a_second_sd():
    source = (
        "import statistics, math\nimport numpy as np\ndef f(v, a):\n    s = statistics.stdev(v)\n    a.std()\n"
        "    m = sum(v) / len(v)\n    return math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1))\n"
    )
    assert spreads_computed("grpo_sweep.reading.plots", source) == [
        "grpo_sweep.reading.plots:4 calls stdev",
        "grpo_sweep.reading.plots:5 calls std",
        "grpo_sweep.reading.plots:7 squares a deviation",
    ]


def test_every_sd_and_interval_is_computed_in_reading():
    found = [
        p
        for name, path in module_files(ROOT).items()
        if name not in COMPUTES_SPREAD
        for p in spreads_computed(name, path.read_text())
    ]
    assert found == [], "use reading/stats.py (sd, standard_error, mean_interval)"


# PBT is one machine: pbt.jsonl has one event vocabulary (search/pbt/lineage.EVENTS; lineage.py alone reads the
# names a PBT written before it used), plot.py and report.py read one lineage shape with no branch on the mode, and
# every PBT setting's default is said once (settings.Settings; config.py's dataclass takes it, the preset sets only
# the keys it moves, and no code reads a setting with a fallback default).
PBT = ROOT / "grpo_sweep" / "search" / "pbt"
BEFORE_ONE_VOCABULARY = {"member_decide", "member_carried_out"}


def events_written(source: str) -> list[str]:
    """The values of every ``"event"`` key a dict literal or a comparison names."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and key.value == "event" and isinstance(value, ast.Constant):
                    found.append(value.value)
        elif isinstance(node, ast.Compare) and isinstance(node.left, ast.Subscript):
            index = node.left.slice
            if isinstance(index, ast.Constant) and index.value == "event":
                for right in node.comparators:
                    items = right.elts if isinstance(right, (ast.Tuple, ast.List, ast.Set)) else [right]
                    found += [item.value for item in items if isinstance(item, ast.Constant)]
    return found


def test_pbt_writes_and_reads_one_event_vocabulary():
    from grpo_sweep.search.pbt.lineage import EVENTS

    assert events_written('r = {"event": "round"}\nif r["event"] in ("report", "x"): pass\n') == [
        "round",
        "report",
        "x",
    ]
    for path in sorted(PBT.glob("*.py")):
        source = path.read_text()
        if path.name == "lineage.py":  # it reads a PBT written before (_today) into the one vocabulary
            source = source.split("    # -- a PBT written before one vocabulary", 1)[0]
        assert set(events_written(source)) <= set(EVENTS), path.name
        assert not BEFORE_ONE_VOCABULARY & strings_in_code(source), path.name


def strings_in_code(source: str) -> set[str]:
    """The string constants of ``source``'s code (its docstrings left out)."""
    tree = ast.parse(source)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    }


def test_pbts_plot_and_report_do_not_branch_on_the_mode():
    for name in ("plot.py", "report.py"):
        tree = ast.parse((PBT / name).read_text())
        branches = [node.test for node in ast.walk(tree) if isinstance(node, (ast.If, ast.IfExp, ast.While))]
        branches += [cond for node in ast.walk(tree) if isinstance(node, ast.comprehension) for cond in node.ifs]
        for test in branches:
            assert not {"synchronous", "reports"} & {
                n.attr if isinstance(n, ast.Attribute) else getattr(n, "id", None) for n in ast.walk(test)
            }, f"{name}:{test.lineno} branches on the PBT's mode"


def test_pbts_defaults_live_in_settings_only():
    import dataclasses

    from omegaconf import OmegaConf

    from grpo_sweep.search.pbt.config import GRPOPBTSweeperConf
    from grpo_sweep.search.pbt.settings import Settings

    defaults = {f.name: f.default for f in dataclasses.fields(Settings)}
    conf = GRPOPBTSweeperConf()
    for f in dataclasses.fields(GRPOPBTSweeperConf):
        if f.name in ("_target_", "params"):
            continue
        assert f.name in defaults, f"hydra.sweeper.{f.name} is no Settings field"
        value = getattr(conf, f.name)
        assert (tuple(value) if isinstance(value, list) else value) == defaults[f.name], f.name
    preset = OmegaConf.load(ROOT / "conf" / "hparams_search" / "pbt.yaml").hydra.sweeper
    assert set(preset) == {"params"}, "the preset sets only the keys it moves; defaults are Settings'"
    for path in sorted(PBT.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "getattr" and len(node.args) == 3:
                target = node.args[1]
                assert not (isinstance(target, ast.Constant) and target.value in defaults), (
                    f"{path.name}:{node.lineno} reads hydra.sweeper.{target.value} with a fallback default"
                )


# The tests stand on their own: no test module imports bench/ (a benchmark is run as the command a user runs,
# `python -m bench.<name>`, by the tests that test it), and bench/ never imports tests/ (what both need is in the
# package; what only the tests need is in tests/support/).
def imports_of_top(source: str, top: str) -> list[str]:
    """``line: what`` for each import of package ``top`` in ``source``: ``import``/``from`` statements (at any
    depth), ``importlib.import_module``/``__import__`` of a literal name, and a module loaded from a file under
    ``top/`` (``spec_from_file_location`` or ``runpy.run_path`` with ``"top"`` among its literal arguments)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names if a.name.split(".")[0] == top]
        elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == top:
            found.append(f"{node.lineno}: from {node.module} import")
        elif isinstance(node, ast.Call):
            func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            literals = [a.value for a in ast.walk(node) if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            if func in ("import_module", "__import__") and any(s.split(".")[0] == top for s in literals[:1]):
                found.append(f"{node.lineno}: {func}({literals[0]!r})")
            elif func in ("spec_from_file_location", "run_path") and any(
                s == top or s.startswith(top + "/") for s in literals
            ):
                found.append(f"{node.lineno}: {func} of a file under {top}/")
    return found


def test_the_bench_check_finds_each_way_of_importing_a_benchmark():
    source = (
        "import subprocess, importlib\nimport bench.simulate\nfrom bench.judge_servers import free_port\n"
        "def t():\n    from bench import verdict_battery\n    importlib.import_module('bench.report')\n"
        "    importlib.util.spec_from_file_location('s', ROOT / 'bench' / 'search_efficiency.py')\n"
        "    subprocess.run([sys.executable, '-m', 'bench.rewards', '--help'])\n"
        "    from .support.judge_servers import free_port\n    import benchmarks\n"
    )
    assert imports_of_top(source, "bench") == [
        "2: import bench.simulate",
        "3: from bench.judge_servers import",
        "5: from bench import",
        "6: import_module('bench.report')",
        "7: spec_from_file_location of a file under bench/",
    ]


def test_no_test_imports_bench_and_bench_imports_no_test():
    tests = [
        f"{path.relative_to(ROOT)}:{where}"
        for path in sorted((ROOT / "tests").rglob("*.py"))
        for where in imports_of_top(path.read_text(), "bench")
    ]
    assert tests == [], "run the benchmark as a command (python -m bench.<name>), or move what the test needs"
    benches = [
        f"{path.relative_to(ROOT)}:{where}"
        for path in sorted((ROOT / "bench").rglob("*.py"))
        for where in imports_of_top(path.read_text(), "tests")
    ]
    assert benches == [], "what a benchmark shares with the tests belongs in grpo_sweep/, not tests/"
