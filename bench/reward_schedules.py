"""Does a reward-weight schedule, or population-based training, beat the best constant weight? Validation chooses,
test measures once.

    python -m bench.reward_schedules [--seeds 5]

The protocol was fixed before any of its runs (issue 33 §3):

- Stage 0, the task, by one criterion and nothing else: a schedule can only win where the right emphasis changes
  during training, so the warm start must lack the answer format and the format must be learnable within the
  budget. Candidates: the built-in task from warm starts with fewer chat steps (``model.tiny.warm_start.
  chat_fraction`` 0.02, 0.05, 0.1; the shipped model has 0.4 and knows the format, 0 never learns it in 120 steps:
  part 1). One run each (seed 0, used nowhere else) with the format paid (``xmlcount`` weight 1, ``correct`` 1):
  the variant is the smallest fraction whose validation format reward starts below 0.5 and reaches 0.8 at step
  120. No accuracy is looked at to choose it.
- The mix: the main job's two terms, ``correct`` (weight 1) and ``xmlcount`` (the format, dense partial credit);
  the main job's other settings (120 steps, lr 3e-4).
- Stage 1, choose on validation, seeds 1..N: constant ``xmlcount`` weights 0, 0.5 and 1; schedules ``xmlcount``
  1 -> 0 (linear) ending at progress 0.25, 0.5 and 1; each family's best by mean validation accuracy (the sweep's
  own ranking); and one PBT (``hparams_search=pbt``'s settings: 4 members, 3 rounds of 40 steps, member seeds
  1..4) over both weights, its best member's weights replayed as a schedule (``best_schedule.yaml``).
- Stage 2, measure on test: the three winners with fresh seeds N+1..2N in one sweep, equal total steps each, and
  that sweep's family-wise verdicts (sweeps/stats.py).

Writes bench/results/reward_schedules.json; each sweep's report stays in its directory (printed).
"""
from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from bench._common import command, launch, machine, parser, record

CANDIDATES = (0.02, 0.05, 0.1)
FORMAT_BEFORE_BELOW, FORMAT_AFTER_AT_LEAST = 0.5, 0.8
CONSTANT = ["reward_mix.xmlcount.weight=0,0.5,1"]
SCHEDULED = ["reward_mix.xmlcount.weight=1", "++reward_mix.xmlcount.schedule.kind=linear",
             "++reward_mix.xmlcount.schedule.end=0", "++reward_mix.xmlcount.schedule.until=0.25,0.5,1"]


PBT_OPTION = """# @package _global_
defaults:
  - override /hydra/sweeper: grpo_pbt
optimized_metric: val_accuracy
trainer:
  eval:
    report: final
hydra:
  sweep:
    dir: ${output_root}/${task_name}/pbt/${hydra.sweeper.name}
    subdir: members/${hydra.job.num}
  sweeper:
    name: bench
    population: 4
    rounds: 3
    seed: 0
    params:
      reward_mix.xmlcount.weight: {low: 0.05, high: 2.0, log: true}
      reward_mix.correct.weight: {low: 0.25, high: 4.0, log: true}
"""


def choose_task(tmp: Path) -> tuple[list[str], list[dict]]:
    """Stage 0: the warm start, by the format criterion alone."""
    seen = []
    for fraction in CANDIDATES:
        task = [f"model.tiny.warm_start.chat_fraction={fraction}"]
        out = tmp / f"task-{fraction}"
        wall, _ = launch([*task, "reward_mix.xmlcount.weight=1", "trainer.seed=0", "trainer.disable_tqdm=true"], out)
        [run] = sorted(out.glob("grpo/runs/*"))
        rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        evals = {r["step"]: r["val/xmlcount"] for r in rows if "val/xmlcount" in r}
        before, after = evals.get(0), evals.get(max(evals))
        ok = before is not None and after is not None and before < FORMAT_BEFORE_BELOW and after >= FORMAT_AFTER_AT_LEAST
        seen.append({"chat_fraction": fraction, "val_format_before": before, "val_format_at_end": after,
                     "meets": ok, "wall_s": round(wall)})
        print(f"chat_fraction={fraction}: validation format {before} -> {after} ({'meets' if ok else 'no'})",
              file=sys.stderr)
        if ok:
            return task, seen
    raise SystemExit(f"no candidate warm start meets the criterion: {seen}")


def sweep(args: list[str], out: Path, task: list[str]) -> tuple[Path, dict, float]:
    """A pool sweep; its directory, its verdicts.json and its wall seconds."""
    wall, proc = launch(["-m", "hydra/launcher=pool", *task, *args], out)
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
    task, stage_0 = choose_task(tmp)
    const_dir, const, const_s = sweep([*CONSTANT, seeds(1)], tmp / "constant", task)
    sched_dir, sched, sched_s = sweep([*SCHEDULED, seeds(1)], tmp / "scheduled", task)
    conf = tmp / "conf"
    (conf / "hparams_search").mkdir(parents=True)
    (conf / "hparams_search" / "pbt_bench.yaml").write_text(PBT_OPTION)
    pbt_s, proc = launch(["-m", "hydra/launcher=pool", *task, f"hydra.searchpath=[file://{conf}]",
                          "hparams_search=pbt_bench", "trainer.seed=1", "trainer.disable_tqdm=true"], tmp / "pbt")
    pbt_dir = tmp / "pbt" / "grpo" / "pbt" / "bench"
    lineage = [json.loads(line) for line in (pbt_dir / "pbt.jsonl").read_text().splitlines()]
    const_best, sched_best = best(const), best(sched)
    weight = float(const_best["config"].split("=")[-1])
    until = float(sched_best["config"].split("=")[-1])
    mix_file(conf / "reward_mix" / "best_constant.yaml", {"weight": weight})
    mix_file(conf / "reward_mix" / "best_schedule.yaml",
             {"weight": 1.0, "schedule": {"kind": "linear", "end": 0.0, "until": until}})
    (conf / "reward_mix" / "pbt_schedule.yaml").write_text((pbt_dir / "conf" / "reward_mix" / "best_schedule.yaml").read_text())
    final_dir, final, final_s = sweep([f"hydra.searchpath=[file://{conf}]",
                                       "reward_mix=best_constant,best_schedule,pbt_schedule", seeds(n + 1)],
                                      tmp / "final", task)

    def row(c: dict) -> dict:
        return {k: c[k] for k in ("config", "rank_mean", "mean", "delta", "low", "high", "verdict", "note")}

    events = lambda kind: [r for r in lineage if r["event"] == kind]  # noqa: E731
    [test] = events("test")
    record("reward_schedules", {
        "command": command("bench.reward_schedules"),
        "machine": machine("at the end"),
        "stage_0_task": stage_0,
        "task": task,
        "stage_1_constant": [row(c) for c in const["comparisons"]],
        "stage_1_scheduled": [row(c) for c in sched["comparisons"]],
        "stage_1_pbt": {"rounds": [{"round": r["round"], "scores": r["scores"], "seconds": r["seconds"]}
                                   for r in events("round")],
                        "take_overs": [t for r in events("decide") for t in r["take_overs"]],
                        "copied_bytes_per_round": [r["bytes"] for r in events("carried_out")],
                        "best": events("best")[0], "best_member_test_accuracy": test["test_accuracy"],
                        "replayed_mix": (conf / "reward_mix" / "pbt_schedule.yaml").read_text()},
        "chosen": {"constant xmlcount weight": weight, "schedule xmlcount 1 -> 0 until": until},
        "stage_2": [row(c) for c in final["comparisons"]],
        "stage_2_method": final["comparisons"][0]["method"] if final["comparisons"] else final.get("why_none"),
        # the pool's two workers were busy throughout each: a family's core-seconds are about twice its wall
        "wall_s": {"stage_1_constant": round(const_s), "stage_1_scheduled": round(sched_s),
                   "stage_1_pbt": round(pbt_s), "stage_2": round(final_s),
                   "total": round(time.perf_counter() - started)},
        "reports": [str(d / "report.md") for d in (const_dir, sched_dir, final_dir)] + [str(pbt_dir / "pbt.png")],
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
