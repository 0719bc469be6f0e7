"""Login-node speed and SLURM behaviour, measured against the local SLURM (bash scripts/slurm_local.sh start).

    python -m bench.slurm          # prints the numbers, writes bench/results/slurm.json

- compose + validate one config (in process, after imports; and `python launch.py --cfg job` as a process)
- submitting a 32-run sweep (detached, held in the queue, then cancelled; median of 5) and whether torch & co. were
  imported
- the 4-run grid (tiny CPU settings) through SLURM against the same grid with the local launcher
- preemption: from `scancel --signal=USR2` to the run resuming from its checkpoint in the same run dir
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._common import ROOT, SHORT_RUN, child_env, compose, launch, parser, record, tests_environment

SLURM = [
    "hydra/launcher=slurm",
    "hydra.launcher.gpus_per_node=null",
    "hydra.launcher.cpus_per_task=1",
    "hydra.launcher.mem_gb=2",
    "hydra.launcher.timeout_min=20",
]
GRID = ["reward_mix=format,correct", "lora.r=16,32"]
HEAVY = ("torch", "trl", "transformers", "unsloth")


def launch_in(args: list[str], out: Path) -> float:
    """`python launch.py ARGS` run from ``out`` (SLURM's job files land there): its wall seconds."""
    out.mkdir(parents=True, exist_ok=True)
    return launch(args, out, cwd=out, timeout=900)[0]


def sweep_dir(out: Path) -> Path:
    return sorted(out.glob("grpo/multiruns/*"))[-1]


def jobs(out: Path) -> list[dict]:
    return json.loads((sweep_dir(out) / "jobs.json").read_text())["jobs"]


def compose_validate() -> dict:
    from grpo_sweep.run.validate import validate

    validate(compose([]))  # warm: Hydra's first compose loads its plugins
    times = []
    for r in (16, 32, 64, 8, 4):
        started = time.perf_counter()
        validate(compose([f"lora.r={r}", "reward_mix=format_correct"]))
        times.append(time.perf_counter() - started)
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, str(ROOT / "launch.py"), "--cfg", "job"], capture_output=True, check=True, env=child_env()
    )
    return {
        "compose_validate_s": round(sorted(times)[len(times) // 2], 3),
        "launch_cfg_job_process_s": round(time.perf_counter() - started, 2),
    }


def submit_32(tmp: Path, repeats: int = 5) -> dict:
    """The median of ``repeats`` detached 32-run submissions (a shared 2-core machine is noisy)."""
    walls, last = [], {}
    for attempt in range(repeats):
        out = tmp / f"submit32_{attempt}"
        out.mkdir()
        args = [
            "-m",
            *SLURM,
            "hydra.launcher.detach=true",
            "+hydra.launcher.additional_parameters.hold=true",
            "reward_mix=format,correct,format_correct,length",
            "lora.r=8,16,32,64",
            "trainer.seed=1,2",
            f"output_root={out}",
        ]
        # held in the queue (sbatch --hold), so the 32 jobs never start; cancelled right after
        probe = (
            "import json, runpy, sys\n"
            f"sys.argv = ['launch.py', *{args!r}]\n"
            "try:\n"
            f"    runpy.run_path({str(ROOT / 'launch.py')!r}, run_name='__main__')\n"
            "except SystemExit:\n"
            "    pass\n"
            f"print('HEAVY ' + json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n"
        )
        started = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", probe], cwd=out, capture_output=True, text=True, env=child_env())
        walls.append(round(time.perf_counter() - started, 2))
        heavy = json.loads(proc.stdout.split("HEAVY ")[-1]) if "HEAVY " in proc.stdout else None
        submitted = jobs(out)
        validated = [line for line in (proc.stdout + proc.stderr).splitlines() if "validated" in line]
        subprocess.run(["scancel", submitted[0]["job_id"].split("_")[0]], check=True)
        last = {
            "jobs_submitted": len(submitted),
            "heavy_modules_imported": heavy,
            "validate_log": validated[-1].split("] ")[-1] if validated else None,
        }
    return {"submit_32_runs_s": sorted(walls)[len(walls) // 2], "submit_32_runs_all_s": walls, **last}


def grids(tmp: Path) -> dict:
    local_s = launch_in(["-m", *GRID, *SHORT_RUN], tmp / "local")
    slurm_s = launch_in(["-m", *SLURM, *GRID, *SHORT_RUN], tmp / "slurm")
    return {"grid4_local_launcher_s": round(local_s, 1), "grid4_slurm_launcher_s": round(slurm_s, 1)}


def preemption(tmp: Path) -> dict:
    out = tmp / "preempt"
    launch_in(
        [
            "-m",
            *SLURM,
            "hydra.launcher.detach=true",
            *SHORT_RUN,
            "trainer.max_steps=30",
            "trainer.save_steps=4",
            "trainer.disable_tqdm=true",
        ],
        out,
    )
    [job] = jobs(out)
    run_dir = Path(job["run_dir"])
    while not (run_dir / "checkpoints" / "checkpoint-4").exists():
        time.sleep(0.2)
    signalled = time.time()
    subprocess.run(["scancel", "--signal=USR2", job["job_id"]], check=True)
    running_again = None
    while not (run_dir / "resumes.jsonl").exists():
        if running_again is None:
            state = subprocess.run(
                ["sacct", "-X", "-n", "-P", "--duplicates", "-o", "State", "-j", job["job_id"]],
                capture_output=True,
                text=True,
            ).stdout.split()
            if "REQUEUED" in state and state[-1] == "RUNNING":
                running_again = time.time()
        time.sleep(0.2)
    resume = json.loads((run_dir / "resumes.jsonl").read_text().splitlines()[0])
    while not (run_dir / "summary.json").exists():
        time.sleep(0.5)
    steps = [
        json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines() if '"reward"' in line
    ]
    return {
        "signal_to_job_running_again_s": round(running_again - signalled, 1) if running_again else None,
        "signal_to_training_resumed_s": round(resume["time"] - signalled, 1),
        "resumed_from_step": resume["from_step"],
        "steps_logged_once_each": steps == list(range(1, 31)),
    }


def main() -> None:
    parser(__doc__).parse_args()
    tests_environment()
    results = {
        "machine": f"{os.cpu_count()} CPUs, {platform.python_version()}",
        "load_average_at_start": os.getloadavg(),
    }
    results.update(compose_validate())
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        results.update(submit_32(tmp))
        results.update(grids(tmp))
        results.update(preemption(tmp))
    results["load_average_at_end"] = os.getloadavg()
    record("slurm", results)


if __name__ == "__main__":
    main()
