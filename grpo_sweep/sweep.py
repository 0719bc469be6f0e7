"""End-of-sweep comparison table, built from the run directories alone (no torch)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback

from .results import read_summary, write_text_atomic


# Written by an Optuna worker job into its Hydra run dir: it holds no run, its trials are under trials/.
WORKER_MARKER = "optuna_worker.json"


def collect_runs(sweep_dir: Path) -> list[tuple[Path, dict]]:
    """(run_dir, summary) for every run directory under ``sweep_dir`` (a missing summary = still running)."""
    runs = []
    for config in sorted(Path(sweep_dir).glob("**/.hydra/config.yaml")):
        run_dir = config.parent.parent
        if (run_dir / WORKER_MARKER).exists():
            continue
        summary = read_summary(run_dir) or {"status": "running"}
        runs.append((run_dir, summary))
    return sorted(runs, key=lambda item: _order(item[0].name))


def _order(name: str):
    return (0, int(name)) if name.isdigit() else (1, name)


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def varying_overrides(summaries: list[dict]) -> list[list[str]]:
    """Each run's overrides, keeping only those that differ across the sweep (the swept axes)."""
    all_sets = [summary.get("overrides") or [] for summary in summaries]
    common = set.intersection(*map(set, all_sets)) if len(all_sets) > 1 else set()
    return [[o for o in overrides if o not in common] for overrides in all_sets]


def _best(summary: dict) -> str:
    """The best evaluation's value of the metric the best step is chosen on, and its step."""
    if summary.get("best_step") is None:
        return "-"
    return f"{_fmt(summary.get('best_objective'))} ({summary['best_step']})"


def sweep_table(sweep_dir: Path) -> str:
    runs = collect_runs(sweep_dir)
    if not runs:
        return f"no runs under {sweep_dir}"
    summaries = [summary for _, summary in runs]
    reward_names = sorted({name for s in summaries for name in (s.get("train_rewards") or {})})
    header = ["run", "overrides", "status", "eval_accuracy", "before", "lenient", "best (step)", "objective", "reward"] + [
        f"rewards/{name}" for name in reward_names
    ]
    rows = []
    for (run_dir, summary), overrides in zip(runs, varying_overrides(summaries)):
        train_rewards = summary.get("train_rewards") or {}
        rows.append(
            [
                run_dir.name,
                " ".join(overrides) or "(defaults)",
                summary.get("status", "?"),
                _fmt(summary.get("eval_accuracy")),
                _fmt(summary.get("eval_accuracy_before")),
                _fmt(summary.get("eval_accuracy_lenient")),
                _best(summary),
                _fmt(summary.get("objective")),
                _fmt(summary.get("reward")),
            ]
            + [_fmt(train_rewards.get(name)) for name in reward_names]
        )
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    table = [line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] + [line(r) for r in rows]
    failed = [(d, s) for d, s in runs if s.get("status") == "failed"]
    notes = [f"run {d.name} failed: {s.get('error', '?')}" for d, s in failed]
    return "\n".join(table + notes)


# Runs that failed in the last sweep of this process; launch.py exits non-zero when there are any.
FAILED_RUNS: list[str] = []


class SweepTable(Callback):
    """Hydra callback: after a multirun, print the comparison table and save it as sweep_table.md."""

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        if config.hydra.launcher.get("detach"):
            return  # nothing has run yet: `python -m grpo_sweep.status <sweep_dir>` prints the table later
        from .search.config import SWEEPER_TARGET

        if config.hydra.sweeper.get("_target_") != SWEEPER_TARGET:
            # (an Optuna study expects some failed trials: its own max_failures decides its exit status)
            FAILED_RUNS[:] = [str(d) for d, s in collect_runs(sweep_dir) if s.get("status") == "failed"]
        table = sweep_table(sweep_dir)
        write_text_atomic(sweep_dir / "sweep_table.md", table + "\n")
        print(f"\nSweep {sweep_dir} ({len(collect_runs(sweep_dir))} runs)\n{table}")
        try:
            from .report import build_report

            print(f"report with plots: {build_report(sweep_dir)}")
        except Exception as exc:  # the runs are done and saved; a report problem must not fail the sweep
            print(f"no report ({type(exc).__name__}: {exc}); retry with: python -m grpo_sweep.report {sweep_dir}")
