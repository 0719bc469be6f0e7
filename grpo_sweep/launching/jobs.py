"""A submitted sweep's jobs: jobs.json (each run's number, job id, run dir and overrides, which launching/submit.py
writes) and what SLURM says of them (``sacct``), for status, resubmit and the seeds sweeper's driver."""

from __future__ import annotations

import re
import shutil
import subprocess

JOBS = "jobs.json"  # in the sweep dir: each run's number, job id, run dir and overrides (launching/submit.py writes it)

# SLURM states of a job that ended; without a summary.json it ended without finishing its run
SLURM_ENDED = (
    "BOOT_FAIL",
    "CANCELLED",
    "COMPLETED",
    "DEADLINE",
    "FAILED",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "TIMEOUT",
)

_ARRAY_TASKS = re.compile(r"(\d+)_\[([^\]]*)\]")


def array_tasks(job_id: str) -> list[str]:
    """sacct's line for an array's pending tasks, ``4242_[5-9,12%64]``, as task ids; any other id as itself."""
    match = _ARRAY_TASKS.fullmatch(job_id)
    if not match:
        return [job_id]
    base, spec = match.group(1), match.group(2).split("%")[0]
    tasks = []
    for part in spec.split(","):
        first, _, last = part.partition("-")
        if first.isdigit() and (not last or last.isdigit()):
            tasks += [f"{base}_{n}" for n in range(int(first), int(last or first) + 1)]
    return tasks


def slurm_jobs(job_ids: list[str]) -> dict[str, tuple[str, int]]:
    """job id -> (current SLURM state, times requeued), from one sacct call; empty where sacct is not there.

    Asked by each array's own id, not task by task: sacct answers nothing for ``-j 4242_7`` while that task is
    pending (the array's pending tasks are one line, ``4242_[7-999%64]``), and one id per array keeps the call
    short at 1,000 tasks.
    """
    if not job_ids or not shutil.which("sacct"):
        return {}
    asked = sorted({job_id.split("_")[0] for job_id in job_ids})
    try:
        out = subprocess.run(
            ["sacct", "-X", "-n", "-P", "--duplicates", "-o", "JobID,State", "-j", ",".join(asked)],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (subprocess.SubprocessError, OSError):
        return {}
    jobs: dict[str, tuple[str, int]] = {}
    for line in out.splitlines():
        job_id, _, state = line.partition("|")
        state = state.split()[0] if state else "UNKNOWN"  # "CANCELLED by 0"
        for task in array_tasks(job_id):
            _, requeues = jobs.get(task, ("", 0))
            jobs[task] = (state, requeues + (state == "REQUEUED"))
    wanted = set(job_ids)
    return {job_id: state for job_id, state in jobs.items() if job_id in wanted}
