"""Re-running a sweep into its own directory queues only what did not finish.

``python launch.py -m <same sweep> hydra.sweep.dir=<its dir>`` after some runs failed, were cancelled or never
started: a run whose ``summary.json`` says ``completed`` is not queued again (its job would start a process,
import torch and exit: on a cluster, a queue slot and a minute each), and on SLURM a run whose job from an earlier
submission is still pending or running (``jobs.json`` + one ``sacct`` call) is not queued a second time (two jobs
would train into the same run directory). Everything else is queued: failed runs, runs whose job ended without a
result, runs never started. The training process still skips a completed run (app.run_task) should one be
queued by another way. No torch here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ..run.results import read_run_summary
from .jobs import JOBS, slurm_jobs

# SLURM states of a job that will still run (or is running) its run
SLURM_LIVE = (
    "PENDING",
    "RUNNING",
    "REQUEUED",
    "REQUEUE_HOLD",
    "REQUEUE_FED",
    "RESIZING",
    "SUSPENDED",
    "COMPLETING",
    "CONFIGURING",
    "STAGE_OUT",
    "SIGNALING",
)


@dataclass(frozen=True)
class Skipped:
    """A run that is not queued again, and why: ``completed`` (its objective) or ``queued`` (its live job)."""

    why: str
    objective: float | None = None
    job_id: str | None = None
    state: str | None = None


def skipped_runs(sweep_dir: Path, nums: Sequence[int], run_dirs: Sequence[Path], slurm: bool) -> dict[int, Skipped]:
    """Run number -> why it is not queued, for the runs of this batch that finished or still have a live job."""
    skipped: dict[int, Skipped] = {}
    for num, run_dir in zip(nums, run_dirs):
        summary, _ = read_run_summary(run_dir)  # an unreadable summary is no finished run: queued again
        if summary and summary.status == "completed":
            skipped[num] = Skipped("completed", objective=summary.objective)
    if not slurm:
        return skipped
    jobs_file = Path(sweep_dir) / JOBS
    try:
        known = {e["num"]: e.get("job_id") for e in json.loads(jobs_file.read_text())["jobs"]}
    except (OSError, ValueError, KeyError, TypeError):
        return skipped  # no earlier submission (or none readable): nothing can still be queued
    earlier = {num: known[num] for num in nums if num not in skipped and known.get(num)}
    if not earlier:
        return skipped

    states = slurm_jobs(sorted(set(earlier.values())))
    for num, job_id in earlier.items():
        state = states.get(job_id, (None, 0))[0]
        if state in SLURM_LIVE:
            skipped[num] = Skipped("queued", job_id=job_id, state=state)
    return skipped


def left_by_earlier_job(run_dir: Path) -> tuple[bool, float | None]:
    """What a run's job from an earlier submission left once it ended: (whether it wrote a result, its
    objective). A summary still ``running``, or none, is a job that ended without one."""
    summary, _ = read_run_summary(run_dir)
    if summary is None or summary.status == "running":
        return False, None
    return True, summary.objective


def completed_objective(run_dir: Path) -> tuple[bool, float | None]:
    """(whether the run completed, its objective), from its summary.json."""
    summary, _ = read_run_summary(run_dir)
    return (True, summary.objective) if summary is not None and summary.status == "completed" else (False, None)


def describe(skipped: dict[int, Skipped]) -> str:
    """One line: how many runs were left out, and why."""
    done = sum(s.why == "completed" for s in skipped.values())
    live = sorted((n, s) for n, s in skipped.items() if s.why == "queued")
    parts = []
    if done:
        parts.append(f"{done} already completed")
    if live:
        shown = ", ".join(f"{n} ({s.job_id} {s.state})" for n, s in live[:5])
        parts.append(f"{len(live)} still queued or running: {shown}{', ...' if len(live) > 5 else ''}")
    return f"not queued again: {'; '.join(parts)}"
