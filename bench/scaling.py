"""How sweep wall time grows with the number of runs (1, 4, 16) on each launcher, and where each run's time
goes (start-up, setup, training, saving, evaluation; from summary.json `timings_s`).

Launchers: local (one process, runs in turn), pool (a worker per core, several runs each), submitit_local
(a process per run, at most cores // cpus_per_task at a time), the same with every run started at once (what
the stock hydra-submitit-launcher does: the "before"), and local SLURM. "startup" is a process's start and
imports for its first run, and the gap since the previous run for the next runs of the same process.

    python -m bench.scaling [--steps 10]     # SLURM part needs `bash scripts/slurm_local.sh start`
                                             # writes bench/results/scaling.json
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bench._common import command, launch, machine, parser, write

LAUNCHERS = {
    "local": [],
    "pool": ["hydra/launcher=pool"],
    "submitit_local": ["hydra/launcher=submitit_local", "hydra.launcher.timeout_min=30"],
    "submitit_local_all_at_once": [
        "hydra/launcher=submitit_local",
        "hydra.launcher.timeout_min=30",
        "hydra.launcher.array_parallelism=1000",
    ],
    "slurm": [
        "hydra/launcher=slurm",
        "hydra.launcher.gpus_per_node=null",
        "hydra.launcher.cpus_per_task=1",
        "hydra.launcher.mem_gb=2",
        "hydra.launcher.timeout_min=30",
    ],
}
PHASES = ("startup", "setup", "train", "save", "eval")


def sweep(launcher: str, n: int, steps: int, out: Path) -> dict:
    seeds = ",".join(str(i) for i in range(1, n + 1))
    wall, _ = launch(
        [
            "-m",
            f"trainer.seed={seeds}",
            f"trainer.max_steps={steps}",
            f"trainer.save_steps={steps}",
            "data.max_val_samples=16",
            "data.max_test_samples=16",
            *LAUNCHERS[launcher],
        ],
        out,
    )
    summaries = [json.loads(p.read_text()) for p in out.glob("grpo/multiruns/*/*/summary.json")]
    assert len(summaries) == n, (launcher, n, len(summaries))
    per_phase = {ph: round(statistics.mean(s["timings_s"][ph] or 0 for s in summaries), 2) for ph in PHASES}
    return {
        "runs": n,
        "sweep_wall_s": round(wall, 1),
        "per_run_mean_s": per_phase,
        "per_run_total_mean_s": round(sum(per_phase.values()), 2),
    }


def main() -> None:
    cli = parser(__doc__)
    cli.add_argument("--steps", type=int, default=10)
    cli.add_argument("--sizes", default="1,4,16")
    cli.add_argument("--launchers", default=",".join(LAUNCHERS))
    cli.add_argument("--out", default="scaling.json", help="file name under bench/results/")
    args = cli.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    slurm_up = shutil.which("sbatch") and subprocess.run(["sinfo", "-h"], capture_output=True).returncode == 0
    results = {}
    for launcher in args.launchers.split(","):
        if launcher == "slurm" and not slurm_up:
            results[launcher] = "skipped: no SLURM controller answers (bash scripts/slurm_local.sh start)"
            continue
        results[launcher] = []
        for n in sizes:
            row = sweep(launcher, n, args.steps, Path(tempfile.mkdtemp(prefix=f"grpo-scale-{launcher}-{n}-")))
            results[launcher].append(row)
            print(launcher, json.dumps(row), flush=True)
    write(
        args.out,
        {
            "results": results,
            "steps": args.steps,
            "machine": machine(),
            "date": time.strftime("%Y-%m-%d"),
            "command": command("bench.scaling"),
        },
    )


if __name__ == "__main__":
    main()
