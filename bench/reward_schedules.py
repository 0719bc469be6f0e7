"""Does a reward-weight schedule beat the best constant weight? Validation chooses, test measures once.

    python -m bench.reward_schedules [--seeds 5]

The protocol was fixed before any of its runs (issue 33 §3; the population-based arm is not built yet):

- Task: the built-in arithmetic task from a warm start that never saw the answer format
  (``model.tiny.warm_start.chat_fraction=0``: the plain facts only), so the format must be learned before
  correctness can pay: the phase a schedule could exploit. The main job's other settings (120 steps).
- Mix: the main job's two terms, ``correct`` (weight 1) and ``xmlcount`` (the format, dense partial credit).
- Stage 1, choose on validation: constant ``xmlcount`` weights 0, 0.5 and 1, and schedules ``xmlcount`` 1 -> 0
  (linear) ending at progress 0.25, 0.5 and 1; seeds 1..N each; the best of each family by mean validation accuracy
  (the sweep's own ranking).
- Stage 2, measure on test: the two winners with fresh seeds N+1..2N in one sweep, and that sweep's family-wise
  verdict (sweeps/stats.py).

Writes bench/results/reward_schedules.json; each sweep's report stays in its directory (printed).
"""
from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from bench._common import command, launch, machine, parser, record

TASK = ["model.tiny.warm_start.chat_fraction=0"]
CONSTANT = ["reward_mix.xmlcount.weight=0,0.5,1"]
SCHEDULED = ["reward_mix.xmlcount.weight=1", "++reward_mix.xmlcount.schedule.kind=linear",
             "++reward_mix.xmlcount.schedule.end=0", "++reward_mix.xmlcount.schedule.until=0.25,0.5,1"]


def sweep(args: list[str], out: Path) -> tuple[Path, dict, float]:
    """A pool sweep; its directory, its verdicts.json and its wall seconds."""
    wall, proc = launch(["-m", "hydra/launcher=pool", *TASK, *args], out)
    [sweep_dir] = sorted(out.glob("grpo/multiruns/*"))
    print(f"{' '.join(args)}: {wall:.0f} s, report {sweep_dir / 'report.md'}", file=sys.stderr)
    return sweep_dir, json.loads((sweep_dir / "verdicts.json").read_text()), wall


def best(verdicts: dict) -> dict:
    """The configuration the sweep ranks first on validation."""
    return max(verdicts["comparisons"], key=lambda c: c["rank_mean"])


def mix_file(path: Path, xmlcount: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"xmlcount": xmlcount, "correct": {"weight": 1.0}}))  # JSON is YAML


def main() -> int:
    args = parser(__doc__)
    args.add_argument("--seeds", type=int, default=5, help="seeds per configuration in each stage")
    n = args.parse_args().seeds
    tmp = Path(tempfile.mkdtemp(prefix="reward-schedules-"))
    seeds = lambda first: "trainer.seed=" + ",".join(str(s) for s in range(first, first + n))  # noqa: E731
    started = time.perf_counter()
    const_dir, const, const_s = sweep([*CONSTANT, seeds(1)], tmp / "constant")
    sched_dir, sched, sched_s = sweep([*SCHEDULED, seeds(1)], tmp / "scheduled")
    const_best, sched_best = best(const), best(sched)
    weight = float(const_best["config"].split("=")[-1])
    until = float(sched_best["config"].split("=")[-1])
    conf = tmp / "conf"
    mix_file(conf / "reward_mix" / "best_constant.yaml", {"weight": weight})
    mix_file(conf / "reward_mix" / "best_schedule.yaml",
             {"weight": 1.0, "schedule": {"kind": "linear", "end": 0.0, "until": until}})
    final_dir, final, final_s = sweep([f"hydra.searchpath=[file://{conf}]", "reward_mix=best_constant,best_schedule",
                                       seeds(n + 1)], tmp / "final")

    def row(c: dict) -> dict:
        return {k: c[k] for k in ("config", "rank_mean", "mean", "delta", "low", "high", "verdict", "note")}

    record("reward_schedules", {
        "command": command("bench.reward_schedules"),
        "machine": machine("at the end"),
        "task": TASK,
        "stage_1_constant": [row(c) for c in const["comparisons"]],
        "stage_1_scheduled": [row(c) for c in sched["comparisons"]],
        "chosen": {"constant xmlcount weight": weight, "schedule xmlcount 1 -> 0 until": until},
        "stage_2": [row(c) for c in final["comparisons"]],
        "stage_2_method": final["comparisons"][0]["method"] if final["comparisons"] else final.get("why_none"),
        "wall_s": {"stage_1_constant": round(const_s), "stage_1_scheduled": round(sched_s),
                   "stage_2": round(final_s), "total": round(time.perf_counter() - started)},
        "reports": [str(d / "report.md") for d in (const_dir, sched_dir, final_dir)],
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
