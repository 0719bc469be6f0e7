"""Pruned asynchronous Optuna search vs the full grid over the same space (tiny model, CPU).

    python bench/search_efficiency.py [--steps 40] [--objective eval_accuracy]   # -> bench/results/search_efficiency.json

Space: learning rate in {1e-4, 3e-4, 1e-3, 3e-3, 1e-2} x num_generations in {4, 8} (10 configurations),
objective: held-out accuracy of the warm-started main job (``--objective eval_rewards.xmlcount`` with
``model.tiny.warm_start.steps=0``: the random model's format score, this benchmark's objective before the
built-in task moved accuracy). The grid runs all 10 to completion;
the search runs 16 TPE trials with the median pruner (a trial that repeats an
earlier point is answered from it without training). Reported: trial-steps and wall time until the best
objective so far reaches 95 % of the grid's best, as a ratio to the full grid.
"""
from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LRS = "1e-4,3e-4,1e-3,3e-3,1e-2"
N_TRIALS = 16
COMMON = ["data.max_val_samples=64", "data.max_test_samples=64", "trainer.per_device_train_batch_size=16"]


def launch(args: list[str]) -> float:
    start = time.perf_counter()
    out = subprocess.run([sys.executable, str(ROOT / "launch.py"), *args], cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(out.stderr[-3000:])
    return time.perf_counter() - start


def summaries(paths) -> list[dict]:
    return [json.loads(p.read_text()) for p in paths]


def to_reach(rows: list[dict], target: float) -> tuple[int | None, float | None, int | None]:
    """Trial-steps and seconds spent (in trial order) until the best objective reaches ``target``; None if never."""
    steps = seconds = 0.0
    for i, row in enumerate(rows, 1):
        steps += row["steps"]
        seconds += row["runtime_s"]
        if row.get("status") == "completed" and (row.get("objective") or 0) >= target:
            return int(steps), seconds, i
    return None, None, None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--objective", default="eval_accuracy")
    parser.add_argument("overrides", nargs="*", help="more overrides for every run, e.g. model.tiny.warm_start.steps=0")
    args = parser.parse_args()
    common = [f"optimized_metric={args.objective}", *COMMON, *args.overrides]
    out = Path(tempfile.mkdtemp(prefix="grpo-bench-search-"))
    steps = [f"trainer.max_steps={args.steps}", f"trainer.save_steps={args.steps}"]

    grid_wall = launch(["-m", f"optimizer.learning_rate={LRS}", "trainer.num_generations=4,8", *common, *steps,
                        f"output_root={out / 'grid'}"])
    grid = sorted(summaries((out / "grid").glob("grpo/multiruns/*/*/summary.json")), key=lambda s: s["run_dir"])
    grid = sorted(grid, key=lambda s: int(Path(s["run_dir"]).name))
    grid_best = max(s["objective"] for s in grid)
    target = 0.95 * grid_best

    search_wall = launch(["-m", "--config-dir", str(ROOT / "bench" / "conf"), "hparams_search=bench_space", f"hydra.sweeper.n_trials={N_TRIALS}", *common,
                          *steps, f"output_root={out / 'search'}"])
    # trials that repeated an earlier point were answered from it without training (no run dir, 0 steps)
    n_trials_total = N_TRIALS
    trials = summaries((out / "search").glob("grpo/studies/bench_space/trials/*/summary.json"))
    trials = sorted(trials, key=lambda s: s["trial"]["number"])
    search_steps, search_seconds, search_trials = to_reach(trials, target)
    search_best = max((s["objective"] or 0) for s in trials if s.get("status") == "completed")
    grid_steps = sum(s["steps"] for s in grid)
    grid_seconds = sum(s["runtime_s"] for s in grid)
    result = {
        "space": {"learning_rate": LRS.split(","), "num_generations": [4, 8], "max_steps": args.steps},
        "objective": args.objective, "overrides": args.overrides,
        "grid": {"runs": len(grid), "best": grid_best, "trial_steps": grid_steps, "run_seconds": round(grid_seconds, 1),
                 "wall_seconds": round(grid_wall, 1),
                 "objectives": {" ".join(s["overrides"][:2]): s["objective"] for s in grid},
                 # how easy the target is: the chance that one configuration drawn at random already reaches it
                 "configurations_reaching_95pct": sum(s["objective"] >= target for s in grid)},
        "search": {"trials": len(trials), "best": search_best,
                   "states": {st: sum(1 for s in trials if s["trial"]["state"] == st) for st in ("COMPLETE", "PRUNED", "FAIL")},
                   "trial_steps_total": sum(s["steps"] for s in trials), "wall_seconds": round(search_wall, 1),
                   "trials_to_95pct": search_trials, "trial_steps_to_95pct": search_steps,
                   "run_seconds_to_95pct": round(search_seconds, 1) if search_seconds is not None else None,
                   "duplicates_skipped": n_trials_total - len(trials)},
        "reached_95pct": search_steps is not None,
        "ratio_trial_steps_to_95pct": round(search_steps / grid_steps, 3) if search_steps is not None else None,
        "ratio_run_seconds_to_95pct": round(search_seconds / grid_seconds, 3) if search_steps is not None else None,
        "machine": f"{platform.machine()} {platform.processor()}".strip(),
        "date": time.strftime("%Y-%m-%d"),
        "command": "python bench/search_efficiency.py " + " ".join(sys.argv[1:]),
    }
    print(json.dumps(result, indent=2))
    dest = ROOT / "bench" / "results" / "search_efficiency.json"
    dest.parent.mkdir(exist_ok=True)
    dest.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
