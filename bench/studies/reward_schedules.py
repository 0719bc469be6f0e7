"""Does a reward-weight schedule, or population-based training, beat the best constant weight? Validation chooses,
test measures once.

    python -m bench.studies.reward_schedules [--seeds 5]

The protocol was fixed before any of its runs (issue 33 §3):

- Stage 0, the task, by one criterion and nothing else: a schedule can only win where the right emphasis changes
  during training, so the warm start must lack the answer format and the format must be learnable within the
  budget: one run (seed 0, used nowhere else) with the format paid (``xmlcount`` weight 1, ``correct`` 1) whose
  validation format reward starts below 0.5 and reaches 0.8 by the last step. Candidates (``TRIED``): the built-in
  task from warm starts with fewer chat steps (``model.tiny.warm_start.chat_fraction``; the shipped model has 0.4
  and knows the format, 0 never learns it: part 1), then a longer run and a larger learning rate. No accuracy was
  looked at to choose it; the one that met it is chat_fraction 0.027, 240 steps, lr 1e-3.
- The mix: the main job's two terms, ``correct`` (weight 1) and ``xmlcount`` (the format, dense partial credit);
  the main job's other settings.
- Stage 1, choose on validation, seeds 1..N: constant ``xmlcount`` weights 0, 0.5 and 1; schedules ``xmlcount``
  1 -> 0 (linear) ending at progress 0.25, 0.5 and 1; each family's best by mean validation accuracy (the sweep's
  own ranking); and one PBT (``hparams_search=pbt``'s settings: 4 members, 3 rounds, member seeds 1..4) over
  both weights, its best member's weights replayed as a schedule (``best_schedule.yaml``).
- Stage 2, measure on test: the three winners with fresh seeds N+1..2N in one sweep, equal total steps each, and
  that sweep's family-wise verdicts (reading/stats.py).

Writes bench/results/reward_schedules.json; each sweep's report stays in its directory (printed).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from bench._common import command, launch, machine, parser, record

# Stage 0's candidates in the order they were tried, each with what it measured (validation format reward at
# step 0 -> at the end, seed 0, the format paid): at 120 steps and lr 3e-4 the format is either known from the
# start (chat_fraction >= 0.029) or not learned (<= 0.028); a warm start at 0.027 learns it given 240 steps at lr
# 1e-3. Nothing but the format reward was looked at. `--all-candidates` runs every one again; by default only the
# one that met the criterion is run again, to check it.
TRIED = [
    (["model.tiny.warm_start.chat_fraction=0.02"], "0.05 -> 0.17"),
    (["model.tiny.warm_start.chat_fraction=0.05"], "0.98 -> 1.00"),
    (["model.tiny.warm_start.chat_fraction=0.1"], "1.00 -> 1.00"),
    (["model.tiny.warm_start.chat_fraction=0.03"], "0.92 -> 1.00"),
    (["model.tiny.warm_start.chat_fraction=0.035"], "0.95 -> 0.89"),
    (["model.tiny.warm_start.chat_fraction=0.022"], "0.05 -> 0.17"),
    (["model.tiny.warm_start.chat_fraction=0.025"], "0.07 -> 0.23"),
    (["model.tiny.warm_start.chat_fraction=0.027"], "0.21 -> 0.55"),
    (["model.tiny.warm_start.chat_fraction=0.028"], "0.21 -> 0.55"),
    (["model.tiny.warm_start.chat_fraction=0.029"], "0.88 -> 1.00"),
    (["model.tiny.warm_start.chat_fraction=0.027", "trainer.max_steps=240"], "0.21 -> 0.60"),
    (
        ["model.tiny.warm_start.chat_fraction=0.027", "trainer.max_steps=240", "optimizer.learning_rate=1e-3"],
        "0.21 -> 1.00",
    ),
]
FORMAT_BEFORE_BELOW, FORMAT_AFTER_AT_LEAST = 0.5, 0.8
CONSTANT = ["reward_mix.xmlcount.weight=0,0.5,1"]
SCHEDULED = [
    "reward_mix.xmlcount.weight=1",
    "++reward_mix.xmlcount.schedule.kind=linear",
    "++reward_mix.xmlcount.schedule.end=0",
    "++reward_mix.xmlcount.schedule.until=0.25,0.5,1",
]


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


def choose_task(tmp: Path, every: bool) -> tuple[list[str], list[dict]]:
    """Stage 0: the task, by the format criterion alone (the candidates ``TRIED``; the last met it)."""
    seen = []
    for task, measured in TRIED if every else TRIED[-1:]:
        out = tmp / f"task-{len(seen)}"
        wall, _ = launch([*task, "reward_mix.xmlcount.weight=1", "trainer.seed=0", "trainer.disable_tqdm=true"], out)
        [run] = sorted(out.glob("grpo/runs/*"))
        rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        evals = {r["step"]: r["val/xmlcount"] for r in rows if "val/xmlcount" in r}
        before, after = evals.get(0), evals.get(max(evals))
        ok = (
            before is not None and after is not None and before < FORMAT_BEFORE_BELOW and after >= FORMAT_AFTER_AT_LEAST
        )
        seen.append(
            {
                "task": task,
                "first_measured": measured,
                "val_format_before": before,
                "val_format_at_end": after,
                "meets": ok,
                "wall_s": round(wall),
            }
        )
        print(f"{' '.join(task)}: validation format {before} -> {after} ({'meets' if ok else 'no'})", file=sys.stderr)
        if ok:
            return task, seen
    raise SystemExit(f"no candidate task meets the criterion: {seen}")


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
    args.add_argument("--all-candidates", action="store_true", help="stage 0: run every candidate task again")
    args.add_argument(
        "--built-in",
        action="store_true",
        help="the control: the main job's task as it is (the format known from the start: no phase to "
        "exploit), no stage 0; results in reward_schedules_built_in.json",
    )
    options = args.parse_args()
    n = options.seeds
    tmp = Path(tempfile.mkdtemp(prefix="reward-schedules-"))
    seeds = lambda first: "trainer.seed=" + ",".join(str(s) for s in range(first, first + n))  # noqa: E731
    started = time.perf_counter()
    task, stage_0 = ([], []) if options.built_in else choose_task(tmp, options.all_candidates)
    const_dir, const, const_s = sweep([*CONSTANT, seeds(1)], tmp / "constant", task)
    sched_dir, sched, sched_s = sweep([*SCHEDULED, seeds(1)], tmp / "scheduled", task)
    conf = tmp / "conf"
    (conf / "hparams_search").mkdir(parents=True)
    (conf / "hparams_search" / "pbt_bench.yaml").write_text(PBT_OPTION)
    pbt_s, proc = launch(
        [
            "-m",
            "hydra/launcher=pool",
            *task,
            f"hydra.searchpath=[file://{conf}]",
            "hparams_search=pbt_bench",
            "trainer.seed=1",
            "trainer.disable_tqdm=true",
        ],
        tmp / "pbt",
    )
    pbt_dir = tmp / "pbt" / "grpo" / "pbt" / "bench"
    from grpo_sweep.search.pbt.lineage import Lineage

    lineage = Lineage.read(pbt_dir / "pbt.jsonl")
    const_best, sched_best = best(const), best(sched)
    weight = float(const_best["config"].split("=")[-1])
    until = float(sched_best["config"].split("=")[-1])
    mix_file(conf / "reward_mix" / "best_constant.yaml", {"weight": weight})
    mix_file(
        conf / "reward_mix" / "best_schedule.yaml",
        {"weight": 1.0, "schedule": {"kind": "linear", "end": 0.0, "until": until}},
    )
    (conf / "reward_mix" / "pbt_schedule.yaml").write_text(
        (pbt_dir / "conf" / "reward_mix" / "best_schedule.yaml").read_text()
    )
    final_dir, final, final_s = sweep(
        [f"hydra.searchpath=[file://{conf}]", "reward_mix=best_constant,best_schedule,pbt_schedule", seeds(n + 1)],
        tmp / "final",
        task,
    )

    def row(c: dict) -> dict:
        return {k: c[k] for k in ("config", "rank_mean", "mean", "delta", "low", "high", "verdict", "note")}

    test = lineage.test
    copied: dict[int, int] = {}
    for r in lineage.timeline:
        if r["event"] == "carried_out":
            copied[r["round"]] = copied.get(r["round"], 0) + (r.get("bytes") or 0)
    record(
        "reward_schedules_built_in" if options.built_in else "reward_schedules",
        {
            "command": command("bench.studies.reward_schedules"),
            "machine": machine("at the end"),
            "stage_0_task": stage_0,
            "task": task,
            "stage_1_constant": [row(c) for c in const["comparisons"]],
            "stage_1_scheduled": [row(c) for c in sched["comparisons"]],
            "stage_1_pbt": {
                "rounds": [{"round": r, "scores": scores} for r, scores in lineage.scores.items()],
                "take_overs": [t for r in sorted(lineage.decisions) for t in lineage.decisions[r]],
                "copied_bytes_per_round": [copied[r] for r in sorted(copied)],
                "best": lineage.best,
                "best_member_test_accuracy": test["test_accuracy"],
                "replayed_mix": (conf / "reward_mix" / "pbt_schedule.yaml").read_text(),
            },
            "chosen": {"constant xmlcount weight": weight, "schedule xmlcount 1 -> 0 until": until},
            "stage_2": [row(c) for c in final["comparisons"]],
            "stage_2_method": final["comparisons"][0]["method"] if final["comparisons"] else final.get("why_none"),
            # the pool's two workers were busy throughout each: a family's core-seconds are about twice its wall
            "wall_s": {
                "stage_1_constant": round(const_s),
                "stage_1_scheduled": round(sched_s),
                "stage_1_pbt": round(pbt_s),
                "stage_2": round(final_s),
                "total": round(time.perf_counter() - started),
            },
            "reports": [str(d / "report.md") for d in (const_dir, sched_dir, final_dir)] + [str(pbt_dir / "pbt.png")],
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
