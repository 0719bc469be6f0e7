"""Time the sweep report (and status) on synthetic 1,000- and 10,000-run sweeps built from one real run.

    python launch.py trainer.max_steps=10 trainer.save_steps=10 output_root=/tmp/scale-src   # one real run (~30 s)
    python -m bench.report_scale --source /tmp/scale-src/grpo/runs/<time> [--runs 1000 10000] [--label after]

Each synthetic sweep is laid out like a Hydra multirun: ``<sweep>/<i>/`` holding the real run's ``.hydra/``
(config.yaml, hydra.yaml; overrides.yaml rewritten), its ``summary.json`` with the run's overrides and varied
objective, validation and test accuracy and rewards, and its ``metrics.jsonl`` stretched to ``--steps`` logged steps
(the real rows repeated with their step and reward values changed). Overrides: 4 reward mixes x 4 LoRA ranks x 5
learning rates x as many seeds as needed (80 configurations). About 1 % of the runs failed, one is still running (no
summary), one has a half-written summary.json: the bad input a real sweep has.

Each command runs in a fresh process; wall time and peak RSS come from os.wait4 on that process. Results are added
to bench/results/report_scale.json under ``--label`` (e.g. ``before`` / ``after``).
"""

from __future__ import annotations

import itertools
import json
import math
import os
import random
import shutil
import sys
import time
from pathlib import Path

from bench._common import command, machine, parser, read_jsonl, record_labelled, timed_process

MIXES = {
    "format": ["xmlcount"],
    "correct": ["correct"],
    "format_correct": ["xmlcount", "correct"],
    "smoke": ["xmlcount", "correct", "length"],
}
RANKS = [8, 16, 32, 64]
LRS = [1e-5, 3e-5, 1e-4, 3e-4, 1e-3]
COMMON = ["trainer.max_steps=200", "trainer.save_steps=200"]


def grid(n: int) -> list[tuple[str, int, float, int]]:
    """(mix, rank, lr, seed) for n runs, seeds innermost like `-m ... trainer.seed=1,2,...` last."""
    per_seed = len(MIXES) * len(RANKS) * len(LRS)
    seeds = range(1, math.ceil(n / per_seed) + 1)
    return list(itertools.product(MIXES, RANKS, LRS, seeds))[:n]


def build(sweep: Path, n: int, source: Path, steps: int, half_written: bool = True) -> Path:
    if sweep.exists():
        shutil.rmtree(sweep)
    sweep.mkdir(parents=True)
    summary0 = json.loads((source / "summary.json").read_text())
    summary0 = {k: v for k, v in summary0.items() if not k.startswith("eval_")}  # a source from before val/test
    rows0 = read_jsonl(source / "metrics.jsonl")
    train_rows = [r for r in rows0 if "reward" in r and "train_runtime" not in r]
    config_yaml = (source / ".hydra" / "config.yaml").read_text()
    hydra_yaml = (source / ".hydra" / "hydra.yaml").read_text()
    rng = random.Random(0)
    for i, (mix, rank, lr, seed) in enumerate(grid(n)):
        run = sweep / str(i)
        (run / ".hydra").mkdir(parents=True)
        overrides = COMMON + [
            f"reward_mix={mix}",
            f"lora.r={rank}",
            f"optimizer.learning_rate={lr}",
            f"trainer.seed={seed}",
        ]
        (run / ".hydra" / "config.yaml").write_text(config_yaml)
        (run / ".hydra" / "hydra.yaml").write_text(hydra_yaml)
        (run / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
        # a made-up landscape: best near lr 1e-4, rank helps a little, mixes differ, seed noise on top
        quality = 0.6 - 0.08 * abs(math.log10(lr) + 4) + 0.02 * math.log2(rank / 8) + 0.05 * list(MIXES).index(mix)
        final = min(1.0, max(0.0, quality + rng.gauss(0, 0.05)))
        history = []
        for step in range(0, steps + 1):
            if step % 50 == 0:  # periodic validation, from before training to the end
                history.append(
                    {
                        "step": step,
                        "val/accuracy": 0.3 + (final - 0.3) * step / steps,
                        "val/accuracy_lenient": 0.3 + (final - 0.3) * step / steps,
                        "val/runtime": 1.0,
                    }
                )
            if step == 0:
                continue
            row = dict(train_rows[(step - 1) % len(train_rows)])
            reward = final * (0.2 + 0.8 * step / steps) + rng.gauss(0, 0.03)
            row.update(step=step, reward=reward, epoch=step / 256)
            for name in ("xmlcount", "correct", "length"):
                row.pop(f"rewards/{name}/mean", None), row.pop(f"rewards/{name}/std", None)
            for name in MIXES[mix]:
                row[f"rewards/{name}/mean"] = reward / len(MIXES[mix])
                row[f"rewards/{name}/std"] = 0.1
            history.append(row)
        (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in history))
        if i == n - 1:
            continue  # still running: no summary yet
        rewards = {name: round(final * 0.8 / len(MIXES[mix]), 4) for name in MIXES[mix]}
        summary = {
            **summary0,
            "overrides": overrides,
            "run_dir": str(run),
            "optimized_metric": "val_accuracy",
            "objective": final,
            "val_accuracy": final,
            "val_accuracy_lenient": min(1.0, final + 0.05),
            "val_accuracy_before": 0.3,
            "val_rewards": rewards,
            "test_accuracy": min(1.0, max(0.0, final - 0.02 + rng.gauss(0, 0.03))),
            "test_accuracy_before": 0.3,
            "test_rewards": rewards,
            "steps": steps,
            "reward": history[-1]["reward"],
            "reward_first": history[1]["reward"],
            "train_rewards": rewards,
            "best_objective": final,
            "best_step": steps,
            "best_metric": "val_accuracy",
            "reward_weights": {name: 1.0 for name in MIXES[mix]},
        }
        if i % 97 == 5:
            summary.update(
                status="failed",
                error="RuntimeError: CUDA out of memory (synthetic)",
                objective=None,
                val_accuracy=None,
                test_accuracy=None,
            )
        text = json.dumps(summary, indent=2)
        if half_written and i == n // 2:
            text = text[: len(text) // 2]  # half-written (a copy cut short, a full disk)
        (run / "summary.json").write_text(text)
    return sweep


def timed(cmd: list[str]) -> dict:
    """Wall seconds and peak RSS (MB) of one fresh process, and its last line of output."""
    run = timed_process(cmd)
    out = run.pop("output").strip()
    return {**run, "last_line": out.splitlines()[-1][:300] if out else ""}


def main() -> None:
    cli = parser(__doc__)
    cli.add_argument("--source", type=Path, required=True, help="a real run's directory (summary.json, ...)")
    cli.add_argument("--runs", type=int, nargs="+", default=[1000, 10000])
    cli.add_argument("--steps", type=int, default=200, help="logged training steps per synthetic run")
    cli.add_argument("--root", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "report_scale")
    cli.add_argument("--label", default="after", help="key in report_scale.json (before / after)")
    cli.add_argument("--status", action="store_true", help="also time python -m grpo_sweep.sweeps.status")
    cli.add_argument(
        "--no-half-written",
        action="store_true",
        help="leave out the half-written summary (the report before this change stopped at it)",
    )
    cli.add_argument("--keep", action="store_true", help="reuse sweeps already built under --root")
    args = cli.parse_args()
    entry: dict = {}
    for n in args.runs:
        sweep = args.root / f"sweep_{n}"
        if not (args.keep and sweep.exists()):
            started = time.perf_counter()
            build(sweep, n, args.source, args.steps, not args.no_half_written)
            print(f"built {sweep} ({n} runs) in {time.perf_counter() - started:.1f} s", flush=True)
        row = {
            "runs": n,
            "steps_per_run": args.steps,
            "sweep_mb": round(sum(f.stat().st_size for f in sweep.rglob("*") if f.is_file()) / 2**20, 1),
        }
        row["report"] = timed([sys.executable, "-m", "grpo_sweep.reading.report", str(sweep)])
        print(f"{n} runs: report {row['report']}", flush=True)
        for name in ("report.md", "runs.csv", "plots/val_accuracy.png", "plots/reward_terms.png"):
            path = sweep / name
            if path.exists():
                row[f"{name}_kb"] = round(path.stat().st_size / 1024, 1)
        for png in sorted((sweep / "plots").glob("*.png")):
            import matplotlib.image

            row[f"{png.stem}_px"] = list(matplotlib.image.imread(png).shape[:2])
        if args.status:
            row["status"] = timed([sys.executable, "-m", "grpo_sweep.sweeps.status", str(sweep)])
            print(f"{n} runs: status {row['status']}", flush=True)
        entry[str(n)] = row
    entry["machine"] = machine("at the end")
    entry["command"] = command(
        "bench.report_scale",
        [
            "--source",
            "SRC",
            "--runs",
            *map(str, args.runs),
            "--label",
            args.label,
            *(["--status"] if args.status else []),
            *(["--no-half-written"] if args.no_half_written else []),
        ],
    )
    record_labelled("report_scale", args.label, entry)


if __name__ == "__main__":
    main()
