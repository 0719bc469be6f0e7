"""Submit, watch and re-submit a 1,000-run SLURM sweep, against stand-in SLURM commands (issue 15, part 2).

    python -m bench.submit_scale [--runs 1000] [--label after] [--code DIR]

A real cluster would run the 1,000 jobs; here ``sbatch`` only keeps the job script it is given and answers with a
job id, ``srun`` is there because submitit looks for it, and ``sacct`` answers from a state file this script writes
(and logs each call). Steps, each a fresh process timed by os.wait4 (wall, CPU, peak RSS):

1. submit: ``python launch.py -m hydra/launcher=slurm hydra.launcher.detach=true`` + a grid of --runs runs
   (4 reward mixes x 5 LoRA ranks x 5 learning rates x seeds), with the heavy modules it loaded (must be none);
2. the sweep mid-way: each run's directory gets what a run leaves (summary.json done or failed, metrics.jsonl),
   sacct says running / requeued / cancelled / out of memory / pending (the array's pending tasks as one line,
   as sacct prints them); then ``python -m grpo_sweep.sweeps.status <sweep>``, timed, with the number of sacct calls;
3. re-submit: the same command with ``hydra.sweep.dir=<sweep>``: only the failed runs and the runs whose job
   ended without a result should be queued (not the done ones, not those still pending or running);
4. ``status`` once every run has ended (it then also prints the sweep table).

``--code DIR`` runs another checkout's code (e.g. ``git archive <commit> | tar -x -C DIR`` for a "before" row).
Results go to bench/results/submit_scale.json under ``--label``.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import sys
from pathlib import Path

from bench._common import ROOT, command, machine, parser, record_labelled, timed_process

HEAVY = ("torch", "trl", "transformers", "unsloth", "peft", "datasets")
ARRAY = 4242  # the first job id the stand-in sbatch hands out


def fake_slurm(bin_dir: Path, scripts: Path, states: Path, calls: Path) -> None:
    for path in (bin_dir, scripts):
        path.mkdir(parents=True, exist_ok=True)
    counter = bin_dir / "next_id"
    counter.write_text(str(ARRAY))
    tools = {
        # keeps the script, answers with the next job id
        "sbatch": f'#!/bin/sh\nid=$(cat {counter})\necho $((id + 1)) > {counter}\ncp "$1" {scripts}/$id.sh\n'
        f'echo "Submitted batch job $id"\n',
        "srun": '#!/bin/sh\necho "stand-in srun: not for running" >&2\nexit 1\n',
        # one line per call to the call log; the answer is the state file, whatever was asked
        "sacct": f'#!/bin/sh\necho "$*" >> {calls}\ncat {states} 2>/dev/null\n',
    }
    for name, text in tools.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)


def grid(n: int) -> list[str]:
    seeds = math.ceil(n / 100)
    if n % 100:
        raise SystemExit(f"--runs={n}: use a multiple of 100 (4 mixes x 5 ranks x 5 learning rates x seeds)")
    return [
        "reward_mix=format,correct,format_correct,smoke",
        "lora.r=4,8,16,32,64",
        "optimizer.learning_rate=1e-5,3e-5,1e-4,3e-4,1e-3",
        f"trainer.seed=range(1,{seeds + 1})",
    ]


PROBE = f"""
import json, os, runpy, sys
sys.argv = ["launch.py", *json.loads(os.environ["BENCH_ARGS"])]
code = 0
try:
    runpy.run_path(os.environ["BENCH_LAUNCH"], run_name="__main__")
except SystemExit as exc:
    code = exc.code if isinstance(exc.code, int) or exc.code is None else 1
    if not isinstance(exc.code, (int, type(None))):
        print(exc.code, file=sys.stderr)
print("PROBE " + json.dumps({{"code": code, "heavy": [m for m in {HEAVY!r} if m in sys.modules]}}))
"""


def submit(args: list[str], env: dict, cwd: Path, code: Path) -> tuple[dict, str]:
    env = {**env, "BENCH_ARGS": json.dumps(args), "BENCH_LAUNCH": str(code / "launch.py")}
    row = timed_process([sys.executable, "-c", PROBE], cwd, env)
    out = row.pop("output")
    probes = [line for line in out.splitlines() if line.startswith("PROBE ")]
    if not probes or json.loads(probes[-1][6:])["code"] not in (0, None):
        raise SystemExit(f"submit failed:\n{out[-3000:]}")
    row["heavy_modules"] = json.loads(probes[-1][6:])["heavy"]
    return row, out


def array_line(script: Path) -> str:
    match = re.search(r"#SBATCH --array=(\S+)", script.read_text())
    return match.group(1) if match else ""


def simulate(sweep: Path, jobs: list[dict], states: Path) -> dict[str, list[int]]:
    """Give each run what a sweep mid-way leaves; return the run numbers by what happened to them."""
    n = len(jobs)
    cut = {
        "done": int(n * 0.90),
        "failed": int(n * 0.94),
        "running": int(n * 0.96),
        "requeued": int(n * 0.97),
        "lost": int(n * 0.98),
    }  # lost: the job ended (cancelled, out of memory) without a summary; then pending
    fate: dict[str, list[int]] = {k: [] for k in (*cut, "pending")}
    lines = []
    for job in jobs:
        num, run = job["num"], Path(job["run_dir"])
        kind = next((k for k, end in cut.items() if num < end), "pending")
        fate[kind].append(num)
        if kind == "pending":
            continue
        run.mkdir(parents=True, exist_ok=True)
        steps = 200 if kind in ("done", "failed") else 120
        (run / "metrics.jsonl").write_text(
            "".join(json.dumps({"step": s, "reward": s / 200}) + "\n" for s in range(10, steps + 1, 10))
        )
        if kind == "done":
            summary = {"status": "completed", "objective": 0.3 + (num % 37) / 100, "overrides": job["overrides"]}
            lines.append(f"{job['job_id']}|COMPLETED")
        elif kind == "failed":
            summary = {
                "status": "failed",
                "error": "RuntimeError: CUDA out of memory (synthetic)",
                "traceback": "Traceback ...\nRuntimeError: CUDA out of memory",
                "overrides": job["overrides"],
            }
            lines.append(f"{job['job_id']}|FAILED")
        else:
            summary = None
            lines += {
                "running": [f"{job['job_id']}|RUNNING"],
                "requeued": [f"{job['job_id']}|REQUEUED", f"{job['job_id']}|PENDING"],
                "lost": [f"{job['job_id']}|{'CANCELLED by 0' if num % 2 else 'OUT_OF_MEMORY'}"],
            }[kind]
        if summary:
            (run / "summary.json").write_text(json.dumps(summary, indent=2))
    if fate["pending"]:
        lines.append(f"{ARRAY}_[{fate['pending'][0]}-{fate['pending'][-1]}%64]|PENDING")
    states.write_text("".join(line + "\n" for line in lines))
    return fate


def status(sweep: Path, env: dict, code: Path, calls: Path) -> dict:
    calls.write_text("")
    row = timed_process([sys.executable, "-m", "grpo_sweep.sweeps.status", str(sweep)], code, env)
    out = row.pop("output")
    lines = out.splitlines()
    row.update(
        sacct_calls=len(calls.read_text().splitlines()),
        output_lines=len(lines),
        first_line=lines[0][:300] if lines else "",
    )
    return row


def main() -> None:
    cli = parser(__doc__)
    cli.add_argument("--runs", type=int, default=1000)
    cli.add_argument("--root", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "submit_scale")
    cli.add_argument("--label", default="after")
    cli.add_argument("--code", type=Path, default=ROOT, help="the checkout whose code runs (default: this one)")
    args = cli.parse_args()
    code = args.code.resolve()
    if args.root.exists():
        shutil.rmtree(args.root)
    bin_dir, scripts, out_root = args.root / "bin", args.root / "sbatch_scripts", args.root / "out"
    states, calls = args.root / "sacct_states.txt", args.root / "sacct_calls.txt"
    fake_slurm(bin_dir, scripts, states, calls)
    out_root.mkdir(parents=True)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTHONPATH": str(code)}
    env.pop("SLURM_CONF", None)
    sweep_args = [
        "-m",
        "hydra/launcher=slurm",
        "hydra.launcher.gpus_per_node=null",
        "hydra.launcher.detach=true",
        *grid(args.runs),
        f"output_root={out_root}",
    ]
    entry: dict = {"runs": args.runs, "code": "this checkout" if code == ROOT else str(code)}

    row, out = submit(sweep_args, env, out_root, code)
    [sweep] = list(out_root.glob("grpo/multiruns/*"))
    jobs = json.loads((sweep / "jobs.json").read_text())["jobs"]
    first = sorted(scripts.iterdir())
    row.update(
        jobs_json_entries=len(jobs),
        sbatch_calls=len(first),
        array=[array_line(s) for s in first][:3],
        submitted_line=next((line for line in out.splitlines() if line.startswith("Submitted")), "")[:300],
    )
    entry["submit"] = row
    print(f"submit: {row}", flush=True)

    fate = simulate(sweep, jobs, states)
    entry["mid_sweep"] = {k: len(v) for k, v in fate.items()}
    entry["status_mid"] = status(sweep, env, code, calls)
    print(f"status mid-sweep: {entry['status_mid']}", flush=True)

    calls.write_text("")
    row, out = submit([*sweep_args, f"hydra.sweep.dir={sweep}"], env, out_root, code)
    again = sorted(set(scripts.iterdir()) - set(first))
    queued = []
    for script in again:
        spec = array_line(script).split("%")[0]
        queued += [
            n
            for part in spec.split(",")
            if part
            for a, _, b in [part.partition("-")]
            for n in range(int(a), int(b or a) + 1)
        ]
    jobs = json.loads((sweep / "jobs.json").read_text())["jobs"]
    new_ids = sorted(j["num"] for j in jobs if str(j["job_id"]).split("_")[0] not in ("None", str(ARRAY)))
    expected = sorted(fate["failed"] + fate["lost"])
    row.update(
        sbatch_calls=len(again),
        queued=len(queued),
        queued_runs_with_new_job_id=len(new_ids),
        expected=len(expected),
        only_unfinished=new_ids == expected and len(queued) == len(expected),
        sacct_calls=len(calls.read_text().splitlines()),
        not_queued_line=next((line for line in out.splitlines() if line.startswith("not queued")), "")[:300],
    )
    entry["resubmit"] = row
    print(f"resubmit: {row}", flush=True)

    # every run ended: the failed and lost ones done on their second try, the rest as they were
    for job in jobs:
        run = Path(job["run_dir"])
        if not (run / "summary.json").exists() or job["num"] in new_ids:
            run.mkdir(parents=True, exist_ok=True)
            (run / "summary.json").write_text(
                json.dumps({"status": "completed", "objective": 0.5, "overrides": job["overrides"]})
            )
    states.write_text("".join(f"{j['job_id']}|COMPLETED\n" for j in jobs if j["job_id"]))
    entry["status_ended"] = status(sweep, env, code, calls)
    print(f"status when every run ended: {entry['status_ended']}", flush=True)

    entry["machine"] = machine("at the end")
    entry["command"] = command("bench.submit_scale", ["--runs", str(args.runs), "--label", args.label])
    record_labelled("submit_scale", args.label, entry)


if __name__ == "__main__":
    main()
