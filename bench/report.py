"""Time the sweep report (report.md + PNGs) for a real 16-run sweep.

    python -m bench.report                      # runs a 16-run tiny sweep first (a few minutes on 2 cores)
    python -m bench.report --sweep-dir DIR      # times the report of an existing sweep

Prints the numbers and writes bench/results/report.json. The sweep: 4 reward mixes x 2 seeds x 2 LoRA ranks,
30 steps each, with the tiny CPU model.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench._common import ROOT, child_env, launch, machine, parser, record

GRID = ["reward_mix=format,smoke,correct,format_correct", "trainer.seed=1,2", "lora.r=8,16"]
SETTINGS = [
    "trainer.max_steps=30",
    "trainer.save_steps=30",
    "trainer.max_completion_length=32",
    "trainer.eval.max_new_tokens=32",
    "data.max_val_samples=16",
    "data.max_test_samples=16",
    "data.arithmetic.n_train=128",
    "data.arithmetic.n_val=16",
    "data.arithmetic.n_test=16",
    "trainer.disable_tqdm=true",
]


def run_sweep(out_root: Path) -> tuple[Path, float]:
    wall, _ = launch(["-m", *GRID, *SETTINGS], out_root)
    return max(out_root.glob("grpo/multiruns/*")), wall


def main() -> None:
    cli = parser(__doc__)
    cli.add_argument("--sweep-dir", type=Path)
    cli.add_argument("--out-root", type=Path, default=ROOT / "outputs" / "bench_report")
    cli.add_argument("--repeats", type=int, default=3)
    args = cli.parse_args()
    os.environ.setdefault("GRPO_SWEEP_CACHE", str(Path(os.environ.get("TMPDIR", "/tmp")) / "grpo-sweep-test-cache"))
    sweep_s = None
    if args.sweep_dir:
        sweep_dir = args.sweep_dir
    else:
        sweep_dir, sweep_s = run_sweep(args.out_root)
    runs = len(list(sweep_dir.glob("*/summary.json")))

    cli = []  # what a user waits for: a fresh process (imports included)
    for _ in range(args.repeats):
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "grpo_sweep.reading.report", str(sweep_dir)],
            check=True,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            env=child_env(),
        )
        cli.append(time.perf_counter() - started)

    from grpo_sweep.sweeps.report import build_report

    build_report(sweep_dir)  # warm: matplotlib imported
    inproc, table_only = [], []
    for _ in range(args.repeats):
        started = time.perf_counter()
        build_report(sweep_dir)
        inproc.append(time.perf_counter() - started)
        started = time.perf_counter()
        build_report(sweep_dir, plots=False)
        table_only.append(time.perf_counter() - started)

    result = {
        "runs": runs,
        "pngs": len(list((sweep_dir / "plots").glob("*.png"))),
        "report_cli_s_median": round(statistics.median(cli), 2),
        "report_in_process_s_median": round(statistics.median(inproc), 2),
        "table_only_s_median": round(statistics.median(table_only), 3),
        "repeats": args.repeats,
        "sweep_wall_s": round(sweep_s, 1) if sweep_s else None,
        "command": "python -m bench.report" + (f" --sweep-dir {sweep_dir}" if args.sweep_dir else ""),
        "machine": machine("at the end"),
    }
    record("report", result)


if __name__ == "__main__":
    main()
