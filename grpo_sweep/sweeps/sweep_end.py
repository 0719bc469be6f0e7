"""The end of a ``-m`` sweep (a Hydra callback): the comparison table, verdicts.json, report.md and its plots, the
verdicts in W&B, and the exit status, all from one reading of the sweep by the strategy that ran it (search/:
``for_config`` finds it from the sweep's own config; each strategy says what it prints and what fails).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback

from ..reading.results import VERDICTS_FILE, SweepResults
from ..reading.tables import sweep_table
from ..run.files import write_json_atomic, write_text_atomic
from ..search import for_config


class SweepTable(Callback):
    """Hydra callback: after a multirun, what its strategy prints, the comparison table (saved as sweep_table.md),
    verdicts.json, report.md, W&B's verdicts run; then the launch exits 1 if a run failed (the sweep went on past
    it and printed the table), or with the strategy's own failure."""

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        strategy = for_config(config)
        detached = bool(config.hydra.launcher.get("detach"))
        if not strategy.has_table:
            return
        if detached and not strategy.continues_detached:
            return  # nothing has run yet: `python -m grpo_sweep.sweeps.status <sweep_dir>` prints the table later
        results = strategy.read(sweep_dir)  # read once: a cluster sweep has hundreds of summaries
        if detached and not strategy.finished(results):
            return  # between rounds: the job that ends the last round prints the table
        before = strategy.before_table(results)
        if before:
            print(before)
        failed = [run for run in results.runs if run.summary.status == "failed"] if strategy.failed_runs_fail else []
        table = sweep_table(results)
        write_text_atomic(sweep_dir / "sweep_table.md", table + "\n")
        write_verdicts(results, strategy.verdict_mode(results))
        print(f"\nSweep {sweep_dir} ({len(results.runs)} runs)\n{table}")
        try:
            from .report import report_of

            print(f"report with plots: {report_of(results, strategy)}")
        except Exception as exc:  # the runs are done and saved; a report problem must not fail the sweep
            print(
                f"no report ({type(exc).__name__}: {exc}); retry with: python -m grpo_sweep.sweeps.report {sweep_dir}"
            )
        if config.logger.name == "wandb":
            from ..tracking.sweep_verdicts import publish_verdicts

            publish_verdicts(config, sweep_dir)
        problem = strategy.failure(results)
        if problem:  # after the report: the trials' table says which failed and why
            from ..launching.gate import stop
            from ..run.validate import ConfigError

            stop(ConfigError(problem))
        if failed:
            raise SystemExit(1)


def write_verdicts(results: SweepResults, mode: str | None = None) -> None:
    """verdicts.json: the same comparisons as the table's, for readers without this package (the W&B run), and the
    damaged or missing files they were read past, each with what was used instead."""
    comparisons = results.verdict_records()  # reading the outcomes is what meets a damaged file
    write_json_atomic(
        results.sweep_dir / VERDICTS_FILE,
        {
            "direction": results.direction,
            "verdicts": mode or results.verdicts,
            "why_none": results.why_none,
            "comparisons": comparisons,
            "damaged_files": results.problems,
        },
    )
