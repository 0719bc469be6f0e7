"""Optuna at cluster concurrency: N worker processes, one study, each storage grpo-sweep offers (issue 15, part 3).

    python -m bench.optuna_concurrency [--workers 32] [--trials 500] [--storages sqlite journal mysql postgresql]
        [--mysql-url mysql+pymysql://...] [--postgresql-url postgresql+psycopg2://...] [--label NAME]
        [--budget lock|callback]

Each storage is opened exactly as the workers of ``hparams_search=*`` open it (grpo_sweep.search.optuna.storage:
``open_storage(resolve_url(...), heartbeat_interval, grace_period)``), and each worker runs what
grpo_sweep/search/optuna/worker.py runs: ``study.optimize`` on ``adapters.optuna.load_budgeted_study`` (the trial count
and the next trial's creation under one lock file; ``--budget callback``: Optuna's ``MaxTrialsCallback(n_trials,
states=None)`` instead, as before) and a seeded TPE sampler with ``constant_liar``. The objective is a 2-D
quadratic plus a ``--sleep`` (10 ms), so what is measured is the framework and the storage:

- lost or duplicated trials: every trial number once, 0..N-1; every value a worker returned is in the storage as
  COMPLETE with that value, and no COMPLETE trial that no worker returned;
- per-trial overhead: from the end of one objective call to the start of the next one's body in the same worker
  (tell, callbacks, ask, the sampler's suggest calls), median and p95 over all trials;
- total wall time from the start signal (after every worker imported optuna and opened the storage) to the last
  worker's exit, and the workers' CPU seconds (this machine has few cores: the load is reported as it was);
- a worker SIGKILLed mid-trial: whether, and how long after the kill, its trial is FAIL (heartbeat:
  ``--heartbeat-interval`` / ``--grace-period``, small here so that it happens within the run), and that the
  study still reaches its trial budget.

Writes bench/results/optuna_concurrency.json (under --label) and prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from bench._common import RESULTS, ROOT, child_env, command, parser, record_labelled

VICTIM_TRIAL = 1  # the killed worker dies in its 2nd trial: early, so that the others run most of the study after it


def worker(args: argparse.Namespace) -> None:
    """One worker process: wait for the start signal, then optimize as grpo_sweep's workers do."""
    import optuna
    from optuna.samplers import TPESampler
    from optuna.study import MaxTrialsCallback

    from grpo_sweep.adapters.optuna import TrialBudgetSpent, load_budgeted_study
    from grpo_sweep.search.optuna.storage import open_storage

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    storage = open_storage(args.url, args.heartbeat_interval or None, args.grace_period or None)
    sampler = TPESampler(seed=args.index, constant_liar=True)
    if args.budget == "lock":
        study = load_budgeted_study(
            args.study, storage, sampler, None, args.trials, str(Path(args.out) / "trial_budget")
        )
        callbacks = []
    else:
        study = optuna.load_study(study_name=args.study, storage=storage, sampler=sampler)
        callbacks = [MaxTrialsCallback(args.trials, states=None)]
    out = Path(args.out)
    (out / f"ready.{args.index}").write_text("")
    go = out / "go"
    while not go.exists():
        time.sleep(0.02)
    told: list[tuple[int, float]] = []
    overheads: list[float] = []
    last_end = [time.perf_counter()]
    told_file = (out / f"told.{args.index}.jsonl").open("a")  # line by line: the killed worker's count too

    def objective(trial: optuna.Trial) -> float:
        x = trial.suggest_float("x", -10, 10)
        y = trial.suggest_float("y", -10, 10)
        overheads.append(time.perf_counter() - last_end[0])
        if args.victim and len(told) == VICTIM_TRIAL:
            (out / "victim").write_text(str(trial.number))
            time.sleep(3600)  # killed here, mid-trial
        time.sleep(args.sleep)
        value = (x - 2) ** 2 + (y + 1) ** 2
        told.append((trial.number, value))
        told_file.write(json.dumps([trial.number, value]) + "\n")
        told_file.flush()
        last_end[0] = time.perf_counter()
        return value

    try:
        study.optimize(objective, callbacks=callbacks, catch=(Exception,))
    except TrialBudgetSpent:
        pass
    (out / f"worker.{args.index}.json").write_text(json.dumps({"overheads": overheads}))


def _spread(counts: list[int]) -> list[float]:
    return [min(counts), statistics.median(counts), max(counts)]


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def url_for(kind: str, args: argparse.Namespace, tmp: Path) -> str:
    from grpo_sweep.search.optuna.storage import resolve_url

    if kind == "sqlite":
        return resolve_url(None, tmp)  # the default: optuna.db in the sweep dir
    if kind == "journal":
        return resolve_url("journal", tmp)
    url = {"mysql": args.mysql_url, "postgresql": args.postgresql_url}[kind]
    if not url:
        raise SystemExit(f"--{kind}-url is needed for storage {kind}")
    return url


def run_one(kind: str, args: argparse.Namespace) -> dict:
    import optuna

    from grpo_sweep.search.optuna.storage import open_storage

    tmp = Path(tempfile.mkdtemp(prefix=f"optuna_{kind}_", dir=args.root))
    url = url_for(kind, args, tmp)
    study_name = f"bench_{kind}_{int(time.time())}"
    optuna.create_study(study_name=study_name, storage=open_storage(url), direction="minimize")
    procs = []
    for i in range(args.workers):
        cmd = [
            sys.executable,
            "-m",
            "bench.optuna_concurrency",
            "--worker",
            "--url",
            url,
            "--study",
            study_name,
            "--index",
            str(i),
            "--out",
            str(tmp),
            "--trials",
            str(args.trials),
            "--sleep",
            str(args.sleep),
            "--heartbeat-interval",
            str(args.heartbeat_interval),
            "--grace-period",
            str(args.grace_period),
            "--budget",
            args.budget,
        ]
        if i == 0:
            cmd.append("--victim")
        procs.append(
            subprocess.Popen(
                cmd, cwd=ROOT, env=child_env(), stdout=subprocess.DEVNULL, stderr=open(tmp / f"err.{i}", "w")
            )
        )
    deadline = time.time() + 600
    while sum((tmp / f"ready.{i}").exists() for i in range(args.workers)) < args.workers:
        if time.time() > deadline or any(p.poll() not in (None, 0) for p in procs):
            raise SystemExit(f"{kind}: workers did not start: " + (tmp / "err.0").read_text()[-2000:])
        time.sleep(0.1)
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    (tmp / "go").write_text("")

    victim_trial = None
    while procs[0].poll() is None:  # a worker that ended before its 2nd trial is no victim: nothing is killed
        if (tmp / "victim").exists() and (tmp / "victim").read_text():  # created, then written
            victim_trial = int((tmp / "victim").read_text())
            procs[0].send_signal(signal.SIGKILL)
            break
        time.sleep(0.01)
    killed_at = time.perf_counter()
    storage = open_storage(url)
    study_id = storage.get_study_id_from_name(study_name)
    failed_after = None
    rusage_cpu = 0.0
    pending = {p.pid: p for p in procs}
    codes = {}
    while pending or (failed_after is None and victim_trial is not None):
        for pid, _proc in list(pending.items()):
            got, status, usage = os.wait4(pid, os.WNOHANG)
            if got:
                codes[pid] = os.waitstatus_to_exitcode(status)
                rusage_cpu += usage.ru_utime + usage.ru_stime
                del pending[pid]
        if failed_after is None and victim_trial is not None:
            # this one trial, not the study's every trial (which would load the storage under test)
            victim_state = storage.get_trial(
                storage.get_trial_id_from_study_id_trial_number(study_id, victim_trial)
            ).state
            if victim_state == optuna.trial.TrialState.FAIL:
                failed_after = round(time.perf_counter() - killed_at, 1)
            elif not pending:
                break  # every worker is gone and nobody failed it
        if not pending and time.perf_counter() - killed_at > args.grace_period + 30:
            break
        time.sleep(0.2)
    wall = time.perf_counter() - started
    load_after = os.getloadavg()[0]

    study = optuna.load_study(study_name=study_name, storage=open_storage(url))
    trials = study.get_trials(deepcopy=False)
    numbers = [t.number for t in trials]
    told: list[tuple[int, float]] = []
    overheads: list[float] = []
    for i in range(args.workers):
        told += [tuple(json.loads(line)) for line in (tmp / f"told.{i}.jsonl").read_text().splitlines() if line]
        path = tmp / f"worker.{i}.json"
        if path.exists():
            overheads += json.loads(path.read_text())["overheads"][1:]  # the first includes waiting for the start
    complete = {t.number: t.value for t in trials if t.state == optuna.trial.TrialState.COMPLETE}
    told_numbers = Counter(n for n, _ in told)
    lost = sorted(n for n, v in told if complete.get(n) != v)
    row = {
        "storage": kind,
        "url": url.split("@")[-1] if "@" in url else url.split(":")[0],
        "workers": args.workers,
        "trials_budget": args.trials,
        "budget_by": args.budget,
        "trials_in_storage": len(trials),
        "states": dict(Counter(t.state.name for t in trials)),
        "numbers_unique_and_contiguous": sorted(numbers) == list(range(len(trials))),
        "lost": lost,
        "told_twice": sorted(n for n, c in told_numbers.items() if c > 1),
        "complete_not_told": sorted(set(complete) - set(told_numbers)),
        "overhead_ms_median": round(1000 * statistics.median(overheads), 1),
        "overhead_ms_p95": round(1000 * percentile(overheads, 0.95), 1),
        "wall_s": round(wall, 1),
        "trials_per_s": round(len(trials) / wall, 1),
        "workers_cpu_s": round(rusage_cpu, 1),
        "victim_trial": victim_trial,
        "victim_state": None if victim_trial is None else study.trials[victim_trial].state.name,
        "victim_failed_after_kill_s": failed_after,
        "workers_exit_codes": dict(Counter(codes.values())),
        # how evenly the workers shared the trials (a worker that made none waited on the others the whole time)
        "trials_per_worker_min_median_max": _spread(
            [sum(1 for _ in open(tmp / f"told.{i}.jsonl")) for i in range(args.workers)]
        ),
        "load_avg_before_after": [round(load_before, 1), round(load_after, 1)],
    }
    return row


def table(rows: list[dict]) -> str:
    out = [
        "| storage | budget by | trials (states) | lost / duplicated | trials a worker, min / median / max "
        "| overhead per trial, median / p95 | wall | trials/s | killed worker's trial |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        states = ", ".join(f"{n} {s}" for s, n in sorted(r["states"].items()))
        ok = "numbers 0..N-1 once" if r["numbers_unique_and_contiguous"] else "numbers NOT contiguous/unique"
        victim = (
            f"FAIL {r['victim_failed_after_kill_s']} s after the kill"
            if r["victim_state"] == "FAIL"
            else "none killed"
            if r["victim_state"] is None
            else f"{r['victim_state']} (never failed)"
        )
        spread = " / ".join(str(n) for n in r.get("trials_per_worker_min_median_max", [])) or "not recorded"
        out.append(
            f"| {r['storage']} | {r.get('budget_by', 'callback')} | {r['trials_in_storage']} ({states}) | "
            f"{len(r['lost'])} / {len(r['told_twice'])}; {ok} | {spread} | "
            f"{r['overhead_ms_median']} / {r['overhead_ms_p95']} ms | "
            f"{r['wall_s']} s | {r['trials_per_s']} | {victim} |"
        )
    return "\n".join(out)


def main() -> None:
    cli = parser(__doc__)
    cli.add_argument("--workers", type=int, default=32)
    cli.add_argument("--trials", type=int, default=500)
    cli.add_argument("--sleep", type=float, default=0.01, help="seconds of 'training' per trial")
    cli.add_argument("--storages", nargs="+", default=["sqlite", "journal", "mysql", "postgresql"])
    cli.add_argument("--mysql-url", default=os.environ.get("BENCH_MYSQL_URL"))
    cli.add_argument("--postgresql-url", default=os.environ.get("BENCH_POSTGRESQL_URL"))
    cli.add_argument("--heartbeat-interval", type=int, default=1)
    cli.add_argument("--grace-period", type=int, default=3)
    cli.add_argument("--root", default=None, help="where the SQLite/journal files go (default: a temp dir)")
    cli.add_argument("--label", default="after")
    cli.add_argument(
        "--budget",
        choices=["lock", "callback"],
        default="lock",
        help="lock: grpo-sweep's workers (exactly --trials); callback: Optuna's MaxTrialsCallback",
    )
    # a worker process (started by this script)
    cli.add_argument("--worker", action="store_true")
    cli.add_argument("--url")
    cli.add_argument("--study")
    cli.add_argument("--index", type=int, default=0)
    cli.add_argument("--out")
    cli.add_argument("--victim", action="store_true")
    args = cli.parse_args()
    if args.worker:
        return worker(args)
    saved = RESULTS / "optuna_concurrency.json"
    for kind in args.storages:
        row = run_one(kind, args)
        row["command"] = command("bench.optuna_concurrency")
        print(json.dumps(row), flush=True)
        # saved storage by storage (a later storage's failure keeps the earlier rows), one row per storage a label
        entry = (json.loads(saved.read_text()) if saved.exists() else {}).get(args.label, {"rows": []})
        entry["rows"] = [r for r in entry["rows"] if r["storage"] != kind] + [row]
        entry.update(
            table=table(entry["rows"]),
            cpus=os.cpu_count(),
            machine=platform.machine(),
            heartbeat_interval=args.heartbeat_interval,
            grace_period=args.grace_period,
            sleep_s=args.sleep,
        )
        record_labelled("optuna_concurrency", args.label, entry)
    print(entry["table"])


if __name__ == "__main__":
    main()
