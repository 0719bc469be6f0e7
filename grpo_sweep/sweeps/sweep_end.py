"""The end of a ``-m`` sweep (a Hydra callback): the comparison table, verdicts.json, report.md and its plots, and
the exit status, all from one reading of the sweep (results.SweepResults).

Kept apart from ``results`` (reading a sweep's runs) and ``report`` (writing the report), which both sit below it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback

from ..run.files import write_json_atomic, write_text_atomic
from .results import PBT_LINEAGE, SEEDS_FILE, STUDY_FILE, VERDICTS_FILE, SweepResults
from .tables import sweep_table

# the runs of this process's sweep that failed: launch.py exits 1 when there is one
FAILED_RUNS: list[str] = []
# An Optuna study's sweeper reads its runs for the study report just before Hydra calls the multirun-end callbacks;
# it hands that reading over (hand_over) and SweepTable takes it, so that a study's end, like a grid's, reads each
# run once. Keyed by the resolved sweep directory; emptied when a multirun starts.
_HANDED: dict[Path, SweepResults] = {}


def hand_over(results: SweepResults) -> None:
    """Leave ``results`` (this sweep's runs, just read) to SweepTable, which runs next, instead of a second read."""
    _HANDED[results.sweep_dir.resolve()] = results


class SweepTable(Callback):
    """Hydra callback: after a multirun, print the comparison table and save it as sweep_table.md."""

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        _HANDED.clear()  # a reading left by an earlier multirun of this process (one whose end raised) is stale

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        handed = _HANDED.pop(sweep_dir.resolve(), None)
        if config.hydra.launcher.get("detach") and not (sweep_dir / SEEDS_FILE).exists():
            return  # nothing has run yet: `python -m grpo_sweep.sweeps.status <sweep_dir>` prints the table later
        if (sweep_dir / PBT_LINEAGE).exists():
            # a PBT's members changed config every round and only the best was tested: a table of configurations
            # with verdicts would compare what was never compared; the PBT printed its own report
            return
        results = handed or SweepResults.read(sweep_dir)  # read once: a cluster sweep has hundreds of summaries
        if config.hydra.launcher.get("detach") and not results.adaptive.plan.done:
            return  # a detached seeds sweep between rounds: the job that ends its last round prints the table
        if not (sweep_dir / STUDY_FILE).exists():
            # (an Optuna study expects some failed trials: its own max_failures decides its exit status)
            FAILED_RUNS[:] = [str(run.dir) for run in results.runs if run.summary.status == "failed"]
        table = sweep_table(results)
        write_text_atomic(sweep_dir / "sweep_table.md", table + "\n")
        write_verdicts(results)
        print(f"\nSweep {sweep_dir} ({len(results.runs)} runs)\n{table}")
        try:
            from .report import write_report

            print(f"report with plots: {write_report(results)}")
        except Exception as exc:  # the runs are done and saved; a report problem must not fail the sweep
            print(f"no report ({type(exc).__name__}: {exc}); retry with: python -m grpo_sweep.sweeps.report {sweep_dir}")


def write_verdicts(results: SweepResults) -> None:
    """verdicts.json: the same comparisons as the table's, for readers without this package (the W&B callback)."""
    write_json_atomic(results.sweep_dir / VERDICTS_FILE, {"direction": results.direction, "why_none": results.why_none,
                                                          "comparisons": results.verdict_records()})
