"""The end of a ``-m`` sweep (a Hydra callback): the comparison table, report.md and its plots, and the exit status.

Kept apart from ``sweep`` (reading a sweep's runs) and ``report`` (writing the report), which both sit below it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback

from ..run.files import write_json_atomic, write_text_atomic
from .runs import STUDY_FILE, VERDICTS_FILE, collect_runs, sweep_comparisons, sweep_direction, sweep_table, \
    varying_overrides, verdict_records

# the runs of this process's sweep that failed: launch.py exits 1 when there is one
FAILED_RUNS: list[str] = []


class SweepTable(Callback):
    """Hydra callback: after a multirun, print the comparison table and save it as sweep_table.md."""

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        if config.hydra.launcher.get("detach"):
            return  # nothing has run yet: `python -m grpo_sweep.sweeps.status <sweep_dir>` prints the table later
        runs = collect_runs(sweep_dir)  # read once: a cluster sweep has hundreds of summaries
        if not (sweep_dir / STUDY_FILE).exists():
            # (an Optuna study expects some failed trials: its own max_failures decides its exit status)
            FAILED_RUNS[:] = [str(d) for d, s in runs if s.status == "failed"]
        table = sweep_table(sweep_dir, runs=runs)
        write_text_atomic(sweep_dir / "sweep_table.md", table + "\n")
        write_verdicts(sweep_dir, runs)
        print(f"\nSweep {sweep_dir} ({len(runs)} runs)\n{table}")
        try:
            from .report import build_report

            print(f"report with plots: {build_report(sweep_dir)}")
        except Exception as exc:  # the runs are done and saved; a report problem must not fail the sweep
            print(f"no report ({type(exc).__name__}: {exc}); retry with: python -m grpo_sweep.sweeps.report {sweep_dir}")


def write_verdicts(sweep_dir: Path, runs: list) -> None:
    """verdicts.json: the same comparisons as the table's, for readers without this package (the W&B callback)."""
    summaries = [summary for _, summary in runs]
    direction = sweep_direction(sweep_dir, summaries)
    rows, why_not = sweep_comparisons(runs, varying_overrides([s.overrides for s in summaries]), direction)
    write_json_atomic(sweep_dir / VERDICTS_FILE, {"direction": direction, "why_none": why_not,
                                                  "comparisons": verdict_records(rows)})
