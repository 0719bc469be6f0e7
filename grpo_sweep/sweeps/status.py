"""`python -m grpo_sweep.sweeps.status <sweep_dir>`: where each run of a (detached) sweep stands.

Per run: pending / running / requeued / done / failed, its last logged step, its objective, and for a failed
run the tail of its error. When every run has ended it prints the sweep table (and saves sweep_table.md); a seeds
sweep between rounds is not over, and it says which round is due instead.
Reads the run directories and, for SLURM sweeps, `sacct`; no torch, safe on a login node.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..launching.jobs import JOBS, SLURM_ENDED, slurm_jobs
from ..reading.results import UNREADABLE, SweepResults, varying_overrides
from ..reading.tables import aligned_columns, problem_lines, sweep_table
from ..run.files import read_jsonl, write_text_atomic
from ..run.results import METRICS
from ..run.resume import RESUMES
from ..search import of_sweep

ENDED = ("done", "failed")


def _job_log_tail(sweep_dir: Path, job_id: str, lines: int = 8) -> str:
    logs = sorted((sweep_dir / ".submitit" / job_id).glob("*_log.err"))
    if not logs:
        return ""
    return "\n".join(logs[-1].read_text(errors="replace").splitlines()[-lines:])


def _jobs(sweep_dir: Path) -> list[dict] | None:
    """jobs.json's runs (a submitted sweep), None without one; ValueError naming it when it cannot be read."""
    jobs_file = Path(sweep_dir) / JOBS
    if not jobs_file.exists():
        return None
    try:
        jobs = json.loads(jobs_file.read_text())["jobs"]
        if not all(isinstance(job, dict) and "run_dir" in job for job in jobs):
            raise ValueError("a job without its run_dir")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{JOBS} cannot be read ({type(exc).__name__}: {exc})") from None
    return jobs


def _readable_jobs(sweep_dir: Path) -> list[dict] | None:
    """``_jobs``, None where jobs.json is damaged (read_sweep names it): the run directories are read instead."""
    try:
        return _jobs(sweep_dir)
    except ValueError:
        return None


def read_sweep(sweep_dir: Path) -> SweepResults:
    """The sweep's runs, read once by the strategy that ran it: its run directories and those jobs.json lists
    (started or not); a damaged jobs.json is named in the reading's notes."""
    try:
        jobs, damaged = _jobs(sweep_dir), None
    except ValueError as exc:
        jobs, damaged = None, exc
    results = of_sweep(sweep_dir).read(sweep_dir, also=[Path(job["run_dir"]) for job in jobs or []])
    if damaged:
        results.note(f"{damaged}: the job ids and the runs not started are not shown; the run directories are")
    return results


def run_states(sweep_dir: Path, results: SweepResults | None = None) -> list[dict]:
    """One dict per run: num, run_dir, overrides, job_id, state, requeues, step, objective, error. ``results``: the
    sweep as read_sweep read it, when the caller has it."""
    sweep_dir = Path(sweep_dir)
    results = results or read_sweep(sweep_dir)
    runs = _readable_jobs(sweep_dir)
    if runs is None:  # a local sweep or a study: the run directories are all there is (trials/5/seed44 in a study)
        runs = [
            {"num": run.name, "run_dir": str(run.dir), "job_id": None, "overrides": list(run.summary.overrides)}
            for run in results.runs
        ]
    slurm = slurm_jobs([r["job_id"] for r in runs if r.get("job_id")])
    states = []
    for run in runs:
        run_dir = Path(run["run_dir"])
        found = results.run_at(run_dir)
        summary = found.summary if found is not None and found.summary.status not in ("running", UNREADABLE) else None
        unreadable = found.summary.error if found is not None and found.summary.status == UNREADABLE else None
        status = summary.status if summary else None
        slurm_state, requeues = slurm.get(run.get("job_id") or "", (None, 0))
        try:
            resumes = len(read_jsonl(run_dir / RESUMES))
        except OSError as exc:  # a directory in its place: the count is not known
            results.note(
                f"{found.name if found else run_dir}: {RESUMES} cannot be read ({exc.strerror}); requeues not counted"
            )
            resumes = 0
        error = ""
        if unreadable:  # reported with its reason; the other runs' states still count
            state, error = "unreadable", unreadable
        elif status == "completed":
            state = "done"
        elif status == "pruned":  # an Optuna trial stopped early on purpose: finished, not running
            state = "pruned"
        elif status == "paused":  # trainer.pause_at_step: stopped on purpose, continued later (a PBT round)
            state = "paused"
        elif status == "failed":
            state = "failed"
            error = "\n".join([summary.error or ""] + (summary.traceback or "").splitlines()[-6:])
        elif slurm_state in SLURM_ENDED:
            state = "failed"
            error = f"SLURM job {run['job_id']} is {slurm_state} and its run left no summary.json\n"
            error += _job_log_tail(sweep_dir, run["job_id"])
        elif slurm_state == "PENDING":
            state = "requeued" if requeues else "pending"
        elif slurm_state in ("RUNNING", "REQUEUED", "COMPLETING", "CONFIGURING"):
            state = "requeued" if slurm_state == "REQUEUED" else "running"
        else:  # no scheduler to ask: judge from the files
            state = "running" if (run_dir / METRICS).exists() else "pending"
        states.append(
            {
                "num": run["num"],
                "run_dir": str(run_dir),
                "overrides": run.get("overrides", []),
                "job_id": run.get("job_id"),
                "state": state,
                "requeues": max(requeues, resumes),
                "step": results.last_logged(run_dir),
                "objective": summary.objective if summary else None,
                "error": error.strip(),
            }
        )
    return states


# the summary line's order; a state outside it (unreadable) follows when some run has it
COUNTED = ("pending", "running", "requeued", "done", "failed")
# up to this many runs, each has its row; above, only the runs not done, at most this many rows and error tails
SHOWN = 50
ERRORS_SHOWN = 10


def summary_line(sweep_dir: Path, states: list[dict]) -> str:
    """``Sweep <dir>: 1000 runs: 3 pending, 2 running, 0 requeued, 990 done, 5 failed`` (+ other states)."""
    counts = dict.fromkeys(COUNTED, 0)
    for s in states:
        counts[s["state"]] = counts.get(s["state"], 0) + 1
    return f"Sweep {sweep_dir}: {len(states)} runs: " + ", ".join(f"{n} {k}" for k, n in counts.items())


def report(sweep_dir: Path, show_all: bool = False) -> tuple[str, bool]:
    """The status text, and whether every run has ended: the summary line first, then a row per run (above
    ``SHOWN`` runs, only the runs not done, bounded, unless ``show_all``), then failed runs' error tails."""
    results = read_sweep(sweep_dir)
    states = run_states(sweep_dir, results)
    if not states:
        due = round_due(results)
        text = due or f"no runs under {sweep_dir} (no {JOBS}, no run directories)"
        return "\n".join([text, *problem_lines(results)]), False
    lines = [summary_line(sweep_dir, states)]
    swept = varying_overrides([s["overrides"] for s in states])
    listed = list(zip(states, swept))
    more = ""
    if not show_all and len(states) > SHOWN:
        listed = [(s, o) for s, o in listed if s["state"] != "done"]
        if len(listed) > SHOWN:
            more = f"... and {len(listed) - SHOWN} more runs not done"
            listed = listed[:SHOWN]
        more += ("; " if more else "") + f"done runs not listed (all {len(states)}: --all)"
    if listed:
        header = ["run", "job", "state", "requeues", "step", "objective", "overrides"]
        rows = [
            [
                str(s["num"]),
                s["job_id"] or "-",
                s["state"],
                str(s["requeues"]),
                "-" if s["step"] is None else str(s["step"]),
                "-" if s["objective"] is None else f"{s['objective']:.3f}",
                " ".join(o) or "(defaults)",
            ]
            for s, o in listed
        ]
        lines += aligned_columns([header] + rows)
    if more:
        lines.append(more)
    errors = [s for s in states if s["error"]]
    for s in errors if show_all else errors[:ERRORS_SHOWN]:
        lines.append(f"\nrun {s['num']} {s['state']}:\n  " + s["error"].replace("\n", "\n  "))
    if len(errors) > ERRORS_SHOWN and not show_all:
        rest = [str(s["num"]) for s in errors[ERRORS_SHOWN:]]
        lines.append(
            f"\n{len(rest)} more runs with errors: {' '.join(rest[:40])}{' ...' if len(rest) > 40 else ''} (--all)"
        )
    finished = all(s["state"] in ENDED for s in states)
    due = round_due(results) if finished else None
    if due:  # the runs so far ended, the sweep did not: its table would be a round early
        lines.append(f"\n{due}")
        finished = False
    elif finished:
        table = sweep_table(results)  # with the damaged files it met
        lines.append(f"\nAll runs ended.\n{table}\nReport with plots: python -m grpo_sweep.sweeps.report {sweep_dir}")
        try:
            write_text_atomic(Path(sweep_dir) / "sweep_table.md", table + "\n")
        except OSError as exc:  # a read-only sweep: the status is still printed
            lines.append(f"(sweep_table.md not saved in {sweep_dir}: {exc.strerror or exc})")
    if not finished:
        lines += problem_lines(results)
    return "\n".join(lines), finished


def round_due(results: SweepResults) -> str | None:
    """What the strategy says when the runs so far are not the whole sweep (a seeds sweep's due round), or None."""
    return of_sweep(results.sweep_dir).status_line(results)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grpo_sweep.sweeps.status", description=__doc__.splitlines()[0])
    parser.add_argument("sweep_dir", type=Path)
    parser.add_argument(
        "--all",
        action="store_true",
        help=f"a row and the error of every run (above {SHOWN} runs only the runs not done are listed)",
    )
    args = parser.parse_args(argv)
    if not args.sweep_dir.is_dir():
        print(f"error: sweep_dir={args.sweep_dir} is not a directory", file=sys.stderr)
        return 2
    text, _ = report(args.sweep_dir, show_all=args.all)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
