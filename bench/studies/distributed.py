"""The main job as one process and as one run of two processes (distributed=ddp, gloo) with the same global batch
(1 x 16 and 2 x 8 prompts' completions a step), over several training seeds: optimizer steps, samples seen, wall
time, held-out accuracy. With --slurm, the two-process run also as a 2-task job on the local SLURM.

    python -m bench.studies.distributed --seeds 1 2 3 4 5 [--slurm]

Rows and the table go to bench/results/distributed.{json,md}.
"""

from __future__ import annotations

import json
import statistics
import tempfile
from pathlib import Path

from bench._common import RESULTS, command, last_error, launch, machine, parser, read_jsonl, write

ARMS = {
    "1 process (batch 16)": [],
    "2 processes (2 x 8), torchrun's engine": [
        "distributed=ddp",
        "distributed.nproc_per_node=2",
        "trainer.per_device_train_batch_size=8",
    ],
    "2 processes (2 x 8), 2-task SLURM job": [
        "-m",
        "hydra/launcher=slurm_local",
        "hydra.launcher.tasks_per_node=2",
        "distributed=ddp",
        "trainer.per_device_train_batch_size=8",
    ],
}


def one(arm: str, seed: int) -> dict:
    with tempfile.TemporaryDirectory() as out:
        wall, proc = launch([*ARMS[arm], f"trainer.seed={seed}", "trainer.disable_tqdm=true"], out, check=False)
        found = list(Path(out).glob("grpo/runs/*/summary.json")) + list(
            Path(out).glob("grpo/multiruns/*/0/summary.json")
        )
        if proc.returncode != 0 or not found:
            return {"arm": arm, "seed": seed, "error": last_error(proc)}
        summary = json.loads(found[0].read_text())
        last = [r for r in read_jsonl(found[0].parent / "metrics.jsonl") if "reward" in r][-1]
    return {
        "arm": arm,
        "seed": seed,
        "world_size": summary["distributed"]["world_size"],
        "steps": summary["steps"],
        "epoch": round(last["epoch"], 4),  # samples seen / train set: equal when the global batch is
        "train_s": summary["timings_s"]["train"],
        "run_s": round(summary["runtime_s"], 1),
        "wall_s": round(wall, 1),
        "val_accuracy": summary["val_accuracy"],
        "test_accuracy": summary["test_accuracy"],
        "test_pass_at_k": summary["test_pass_at_k"],
    }


def table(rows: list[dict]) -> str:
    lines = [
        "| arm | runs | steps | epoch | train s | process wall s | val accuracy | test accuracy | pass@4 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]

    def ms(values: list[float], digits: int = 3) -> str:
        sd = statistics.stdev(values) if len(values) > 1 else 0.0
        return f"{statistics.mean(values):.{digits}f} ± {sd:.{digits}f}"

    for arm in ARMS:
        done = [r for r in rows if r["arm"] == arm and "error" not in r]
        if not done:
            continue
        lines.append(
            f"| {arm} | {len(done)} | {sorted({r['steps'] for r in done})} | {sorted({r['epoch'] for r in done})} | "
            f"{ms([r['train_s'] for r in done], 1)} | {ms([r['wall_s'] for r in done], 1)} | "
            f"{ms([r['val_accuracy'] for r in done])} | {ms([r['test_accuracy'] for r in done])} | "
            f"{ms([r['test_pass_at_k'] for r in done])} |"
        )
    return "\n".join(lines)


def main() -> None:
    cli = parser(__doc__)
    cli.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    cli.add_argument("--slurm", action="store_true", help="also the 2-task job on the local SLURM")
    cli.add_argument("--add", action="store_true", help="keep the rows already in bench/results/distributed.json")
    args = cli.parse_args()
    arms = [a for a in ARMS if args.slurm or "SLURM" not in a]
    kept = json.loads((RESULTS / "distributed.json").read_text()) if args.add else {}
    rows, commands = kept.get("rows", []), kept.get("commands", [])
    commands.append(
        command(
            "bench.studies.distributed",
            ["--seeds", *map(str, args.seeds), *(["--slurm"] if args.slurm else []), *(["--add"] if args.add else [])],
        )
    )
    for seed in args.seeds:
        for arm in arms:  # interleaved: a drift of the machine's speed hits every arm alike
            rows.append(one(arm, seed))
            print(json.dumps(rows[-1]), flush=True)
    host = machine()
    write("distributed.json", {"machine": host, "commands": commands, "rows": rows})
    text = (
        f"# One run over two processes against one process (same global batch)\n\n"
        f"{'; '.join(f'`{c}`' for c in commands)} on {host}, mean ± sd over the training seeds.\n\n"
        f"{table(rows)}\n"
    )
    write("distributed.md", text)
    print(text)


if __name__ == "__main__":
    main()
