"""A sweep directory read back: its runs, its study file, and the end-of-sweep comparison table (no torch)."""
from __future__ import annotations

import json
from pathlib import Path

from ..run.cost import cost_line
from ..run.results import METRICS, read_outcomes, read_run_summary
from ..run.summary import RunSummary
from .stats import SEED_HINT, Comparison, RunRecord, ci_text, compare, is_seed, seed_text, signed, verdict_source, verdict_text
from .tables import aligned_columns, markdown_table, number


# An Optuna study's sweep directory holds it (directions, objectives), written by its sweeper (search/).
STUDY_FILE = "study.json"
# Written by an Optuna worker job into its Hydra run dir: it holds no run, its trials are under trials/.
WORKER_MARKER = "optuna_worker.json"
# The end of a sweep writes its verdicts here (sweep_end.py): the comparisons as JSON, for W&B and other readers.
VERDICTS_FILE = "verdicts.json"
# A run whose summary.json exists but cannot be read (see collect_runs).
UNREADABLE = "unreadable"


def read_study_file(sweep_dir: Path) -> dict:
    path = Path(sweep_dir) / STUDY_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{sweep_dir} holds no {STUDY_FILE}; is it the directory of an Optuna sweep?")
    return json.loads(path.read_text())


def collect_runs(sweep_dir: Path) -> list[tuple[Path, RunSummary]]:
    """(run_dir, summary) for every run directory under ``sweep_dir`` (a missing summary = status ``running``).

    A summary.json that cannot be read (half-written, not JSON) gives status ``unreadable`` with the reason as its
    ``error``: one bad run must not stop the table or the report of the others.
    """
    runs = []
    for config in sorted(Path(sweep_dir).glob("**/.hydra/config.yaml")):
        run_dir = config.parent.parent
        if (run_dir / WORKER_MARKER).exists():
            continue
        summary, problem = read_run_summary(run_dir)
        if problem:
            summary = RunSummary(status=UNREADABLE, error=problem)
        runs.append((run_dir, summary or RunSummary(status="running")))
    return sorted(runs, key=lambda item: _order(item[0].name))


def _order(name: str):
    return (0, int(name)) if name.isdigit() else (1, name)


def run_name(run_dir: Path, sweep_dir: Path) -> str:
    """A run as the tables name it: its path under the sweep (``3``, or ``trials/5/seed44`` for a replicated Optuna
    trial, whose runs' own directory names repeat across trials)."""
    try:
        return Path(run_dir).relative_to(sweep_dir).as_posix()
    except ValueError:
        return Path(run_dir).name


def last_step(run_dir: Path, tail_bytes: int = 16384) -> int | None:
    """The last logged step: read from the end of metrics.jsonl (a long run's file is hundreds of KB, and the status
    command reads one per run), the whole file only when its tail holds no step."""
    path = run_dir / METRICS
    try:
        with path.open("rb") as f:
            size = f.seek(0, 2)
            f.seek(max(0, size - tail_bytes))
            lines = f.read().decode(errors="replace").splitlines()
    except FileNotFoundError:
        return None
    for line in reversed(lines):
        try:
            return json.loads(line)["step"]
        except (ValueError, KeyError, TypeError):
            continue  # the first line of the tail may be cut; a row without a step
    return last_step(run_dir, size + 1) if size > tail_bytes else None


def varying_overrides(all_sets: list[list[str] | None]) -> list[list[str]]:
    """Each run's overrides, keeping only those that differ across the sweep (the swept axes)."""
    all_sets = [overrides or [] for overrides in all_sets]
    common = set.intersection(*map(set, all_sets)) if len(all_sets) > 1 else set()
    return [[o for o in overrides if o not in common] for overrides in all_sets]


def best_cell(summary: RunSummary) -> str:
    """The best evaluation's value of the metric the best step is chosen on, and its step."""
    if summary.best_step is None:
        return "-"
    return f"{number(summary.best_objective)} ({summary.best_step})"


def sweep_direction(sweep_dir: Path, summaries: list[RunSummary]) -> str:
    """How the objective ranks: an Optuna study's first direction (study.json, else a trial's), else maximize."""
    try:
        return str(read_study_file(sweep_dir)["directions"][0]).lower()
    except (FileNotFoundError, KeyError, IndexError):
        pass
    for summary in summaries:
        trial_direction = (summary.trial or {}).get("direction")
        if trial_direction:
            return str(trial_direction).lower()
    return "maximize"


def _summary_value(summary: RunSummary, key: str | None):
    """A summary value by key, ``a.b`` reading into a dict (``test_rewards.fmt``); None when absent."""
    if key is None:
        return None
    head, _, name = key.partition(".")
    value = getattr(summary, head, None) if head in RunSummary.__dataclass_fields__ else summary.extra.get(head)
    if name:
        value = value.get(name) if isinstance(value, dict) else None
    return value


def run_record(run_dir: Path, summary: RunSummary, seed, rank_value: float | None = None) -> RunRecord:
    """One run for stats.compare: its objective (``rank_value``, default summary.objective) ranks; the objective's
    test counterpart, with per-question outcomes from outcomes/test.jsonl when the objective is an accuracy, is what
    the verdict is about."""
    value_key, field, accuracy = verdict_source(summary.optimized_metric)
    outcomes = read_outcomes(run_dir, "test", field=field) if field else None
    rank_samples = summary.val_samples if value_key else _summary_value(summary, "eval_samples")
    return RunRecord(seed=seed, rank_value=summary.objective if rank_value is None else rank_value,
                     value=_summary_value(summary, value_key),
                     n_questions=summary.test_samples if accuracy else None, outcomes=outcomes,
                     rank_n_questions=rank_samples if accuracy else None)


def _seed_hint(overrides: list[list[str]]) -> str:
    keys = sorted({o.partition("=")[0] for run_overrides in overrides for o in run_overrides
                   if is_seed(o.partition("=")[0])})
    return f"{keys[0]}=1,2,3" if keys else SEED_HINT


def sweep_comparisons(runs: list[tuple[Path, RunSummary]], overrides: list[list[str]], direction: str
                      ) -> tuple[list[Comparison], str | None]:
    """(the configurations compared by stats.compare, best first; a line saying why there are none, or None).
    Runs differing only in a seed are one configuration's replicates."""
    groups: dict[str, list[RunRecord]] = {}
    for (run_dir, summary), run_overrides in zip(runs, overrides):
        if summary.overrides is None:  # still running: its configuration is not in its (missing) summary yet
            continue
        config = " ".join(o for o in run_overrides if not is_seed(o.partition("=")[0])) or "(defaults)"
        seed = tuple(sorted(o for o in run_overrides if is_seed(o.partition("=")[0])))
        groups.setdefault(config, []).append(run_record(run_dir, summary, seed))
    seeded = any(is_seed(o.partition("=")[0]) for run_overrides in overrides for o in run_overrides)
    if len(groups) < 2:  # one configuration: nothing to compare
        return [], None
    if not seeded:
        return [], (f"No verdicts: one seed per configuration cannot tell a difference from seed noise; add seeds "
                    f"({_seed_hint(overrides)}) to compare them.")
    return compare(groups, direction, seed_hint=_seed_hint(overrides)), None


def verdict_records(rows: list[Comparison]) -> list[dict]:
    """The comparisons as JSON rows (verdicts.json, which W&B and other readers take without this package)."""
    keys = ("config", "rank_mean", "mean", "std", "delta", "low", "high", "verdict", "note", "mde", "seeds_needed",
            "method")
    out = []
    for row in rows:
        record = {key: getattr(row, key, None) for key in keys}
        record["seeds"] = [seed_text(seed) for seed in row.seeds]
        record["missing_seeds"] = [seed_text(seed) for seed in row.missing_seeds]
        record["verdict_text"] = verdict_text(row)
        out.append(record)
    return out


def seed_block(runs: list[tuple[Path, RunSummary]], overrides: list[list[str]], direction: str) -> list[str]:
    """One line per configuration (runs differing only in a seed): validation mean (ranks), test mean, the test
    difference from the reference with its family-wise interval, and the verdict (stats.compare)."""
    rows, why_not = sweep_comparisons(runs, overrides, direction)
    if not rows:
        return [why_not] if why_not else []
    cells = [[r.config, f"{len(r.seeds)} seed{'' if len(r.seeds) == 1 else 's'}",
              "val " + ("-" if r.rank_mean is None else f"{r.rank_mean:.3f}"),
              "test " + ("-" if r.mean is None else f"{r.mean:.3f}"),
              "Δ 0 (reference)" if r.is_best else ("" if r.delta is None else f"Δ {signed(r.delta)}"),
              ci_text(r) if r.low is not None else "", verdict_text(r)] for r in rows]
    method = next((r.method for r in rows if r.method), "")
    return ([f"Per configuration over seeds ({direction}; ranked by validation, the reference is the best; "
             f"verdicts on test):"] + aligned_columns(cells, indent="  ") + ([f"  ({method})"] if method else []))


# The end-of-sweep table shows at most this many runs (the best by objective); every run is in runs.csv.
TOP_RUNS = 20
TOP_NOTES = 10


def _ranked(runs: list[tuple[Path, RunSummary]], direction: str) -> list[int]:
    """Indexes of ``runs``, best objective first, runs without one last (in run order)."""
    sign = -1 if direction == "maximize" else 1

    def key(i: int):
        value = runs[i][1].objective
        ok = isinstance(value, (int, float)) and value == value and abs(value) != float("inf")
        return (not ok, sign * value if ok else 0.0, i)

    return sorted(range(len(runs)), key=key)


def sweep_table(sweep_dir: Path, direction: str | None = None, top: int = TOP_RUNS,
                runs: list[tuple[Path, RunSummary]] | None = None) -> str:
    """The runs' comparison table, best validation objective first (runs without one last), validation and test
    side by side; for more than ``top`` runs, the ``top`` best. ``runs``: ``collect_runs(sweep_dir)`` when the
    caller has read them already."""
    runs = collect_runs(sweep_dir) if runs is None else runs
    if not runs:
        return f"no runs under {sweep_dir}"
    summaries = [summary for _, summary in runs]
    direction = direction or sweep_direction(sweep_dir, summaries)
    reward_names = sorted({name for s in summaries for name in (s.train_rewards or {})})
    # the default objective is validation accuracy: then one column shows both
    own_objective = any(s.optimized_metric not in (None, "val_accuracy") for s in summaries)
    header = ["run", "overrides", "status"] + (["objective", "val_accuracy"] if own_objective else
                                               ["val_accuracy (objective)"])
    header += ["best (step)", "test_accuracy", "test before", "reward"] + [f"rewards/{name}" for name in reward_names]
    rows = []
    swept = varying_overrides([s.overrides for s in summaries])
    for i in _ranked(runs, direction)[:top]:
        (run_dir, summary), overrides = runs[i], swept[i]
        train_rewards = summary.train_rewards or {}
        rows.append(
            [run_name(run_dir, sweep_dir), " ".join(overrides) or "(defaults)", summary.status]
            + ([number(summary.objective), number(summary.val_accuracy)] if own_objective else [number(summary.objective)])
            + [best_cell(summary), number(summary.test_accuracy), number(summary.test_accuracy_before),
               number(summary.reward)]
            + [number(train_rewards.get(name)) for name in reward_names]
        )
    table = markdown_table(header, rows)
    if len(runs) > top:
        table.append(f"(the {top} best of {len(runs)} runs by objective, {direction}; every run, its overrides as "
                     f"columns: {Path(sweep_dir) / 'runs.csv'}, and per configuration: {Path(sweep_dir) / 'report.md'}"
                     f" — both written by python -m grpo_sweep.sweeps.report {sweep_dir})")
    bad = [(d, s) for d, s in runs if s.status in ("failed", UNREADABLE)]
    notes = [f"run {d.name} {s.status}: {s.error or '?'}" for d, s in bad[:TOP_NOTES]]
    if len(bad) > TOP_NOTES:
        notes.append(f"... and {len(bad) - TOP_NOTES} more failed or unreadable runs (report.md lists them all)")
    per_config = seed_block(runs, swept, direction)
    cost = cost_line(summaries)
    return "\n".join(table + notes + ([""] + per_config if per_config else []) + ([cost] if cost else []))
