"""The tables the tools print and write: markdown (report.md, the sweep table, the study report) and plain aligned
columns (status, the per-configuration lines). One place, so every table escapes and aligns the same way; the
end-of-sweep table (sweep_table.md) and the per-configuration verdict lines are here too, drawn from the sweep's
one reading (results.SweepResults)."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from ..run.cost import cost_line
from ..run.record import VAL_ACCURACY, RunSummary
from .results import NO_CONFIGURATION, UNREADABLE, SweepResults
from .stats import Comparison
from .wording import ci_text, signed, verdict_text


def number(value: Any, digits: int = 3, missing: str = "-") -> str:
    """A value as every table and summary line shows it: ``digits`` decimals, a small non-zero float in ``digits``
    significant figures (a learning rate is not 0.000), a list as ``(a, b)``, ``missing`` for None."""
    if value is None:
        return missing
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 1e-2 and value != 0 else f"{value:.{digits}f}"
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(number(v, digits, missing) for v in value) + ")"
    return str(value)


def markdown_table(header: Sequence[Any], rows: Sequence[Sequence[Any]]) -> list[str]:
    """Lines of a markdown table, columns padded to line up in a terminal too; a ``|`` in a cell is escaped."""
    cells = [[str(c).replace("|", "\\|") for c in row] for row in [header, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |" for row in cells]
    return [lines[0], "|" + "|".join("-" * (w + 2) for w in widths) + "|", *lines[1:]]


def aligned_columns(rows: Sequence[Sequence[Any]], indent: str = "") -> list[str]:
    """Plain text rows with their columns aligned, two spaces apart, no trailing spaces."""
    cells = [[str(c) for c in row] for row in rows]
    if not cells:
        return []
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    return [indent + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]


# --- the sweep's tables, from its one reading (results.SweepResults) ---------------------------------------------


def best_cell(summary: RunSummary) -> str:
    """The best evaluation's value of the metric the best step is chosen on, and its step."""
    if summary.best_step is None:
        return "-"
    return f"{number(summary.best_objective)} ({summary.best_step})"


def objective_is_val(summaries: Sequence[RunSummary]) -> bool:
    """Whether every run's objective is its validation accuracy (the default): then one column shows both."""
    return all(s.optimized_metric in (None, VAL_ACCURACY) for s in summaries)


def seed_block(results: SweepResults, shown: Callable[[Comparison], bool] = lambda row: True) -> list[str]:
    """One line per configuration (runs differing only in a seed): validation mean (ranks), test mean, the test
    difference from the reference with its family-wise interval, and the verdict (results.comparisons).
    ``shown``: which configurations get a line (the study report: those with a finished run)."""
    if len(results.configurations) < 2:  # one configuration: nothing to compare
        return []
    rows = [r for r in results.comparisons if shown(r)]
    if not rows:
        return [results.why_none] if results.why_none else []
    cells = [
        [
            r.config,
            f"{len(r.seeds)} seed{'' if len(r.seeds) == 1 else 's'}",
            "val " + ("-" if r.rank_mean is None else f"{r.rank_mean:.3f}"),
            "test " + ("-" if r.mean is None else f"{r.mean:.3f}"),
            "Δ 0 (reference)" if r.is_best else ("" if r.delta is None else f"Δ {signed(r.delta)}"),
            ci_text(r) if r.low is not None else "",
            verdict_text(r),
        ]
        + ([r.stopped] if r.stopped else [])
        for r in rows
    ]
    width = max(map(len, cells))
    cells = [c + [""] * (width - len(c)) for c in cells]
    method = next((r.method for r in rows if r.method), "")
    return (
        [
            f"Per configuration over seeds ({results.direction}; ranked by validation, the reference is the best; "
            f"verdicts on test):"
        ]
        + aligned_columns(cells, indent="  ")
        + ([f"  ({method})"] if method else [])
    )


# The end-of-sweep table and report.md show at most this many runs (the best by objective); every run is in runs.csv.
TOP_RUNS = 20
TOP_NOTES = 10


def sweep_table(results: SweepResults, top: int = TOP_RUNS) -> str:
    """The runs' comparison table (sweep_table.md), best validation objective first (runs without one last),
    validation and test side by side; for more than ``top`` runs, the ``top`` best; then failures, the
    per-configuration verdicts and the cost."""
    sweep_dir, runs = results.sweep_dir, results.runs
    if not runs:
        return f"no runs under {sweep_dir}"
    summaries = results.summaries
    reward_names = sorted({name for s in summaries for name in (s.train_rewards or {})})
    own_objective = not objective_is_val(summaries)
    header = ["run", "overrides", "status"] + (
        ["objective", VAL_ACCURACY] if own_objective else [f"{VAL_ACCURACY} (objective)"]
    )
    header += ["best (step)", "test_accuracy", "test before", "reward"] + [f"rewards/{name}" for name in reward_names]
    rows = []
    for run in results.ranked[:top]:
        summary = run.summary
        train_rewards = summary.train_rewards or {}
        rows.append(
            [run.name, " ".join(run.overrides) or NO_CONFIGURATION, summary.status]
            + (
                [number(summary.objective), number(summary.val_accuracy)]
                if own_objective
                else [number(summary.objective)]
            )
            + [
                best_cell(summary),
                number(summary.test_accuracy),
                number(summary.test_accuracy_before),
                number(summary.reward),
            ]
            + [number(train_rewards.get(name)) for name in reward_names]
        )
    table = markdown_table(header, rows)
    if len(runs) > top:
        table.append(
            f"(the {top} best of {len(runs)} runs by objective, {results.direction}; every run, its "
            f"overrides as columns: {sweep_dir / 'runs.csv'}, and per configuration: {sweep_dir / 'report.md'}"
            f" — both written by python -m grpo_sweep.sweeps.report {sweep_dir})"
        )
    bad = [run for run in runs if run.summary.status in ("failed", UNREADABLE)]
    notes = [f"run {run.dir.name} {run.summary.status}: {run.summary.error or '?'}" for run in bad[:TOP_NOTES]]
    if len(bad) > TOP_NOTES:
        notes.append(f"... and {len(bad) - TOP_NOTES} more failed or unreadable runs (report.md lists them all)")
    per_config = seed_block(results)
    cost = cost_line(summaries)
    damaged = problem_lines(results)  # after the verdicts: they read the outcomes
    return "\n".join(table + notes + ([""] + per_config if per_config else []) + ([cost] if cost else []) + damaged)


def problem_lines(results: SweepResults) -> list[str]:
    """The damaged or missing files the reading met (``SweepResults.problems``), one line each, headed."""
    found = results.problems
    if not found:
        return []
    return ["", f"Damaged or missing files ({len(found)}), each with what was done instead:"] + [
        f"  {line}" for line in found
    ]
