"""Pruned TPE search vs random search, replayed from a grid's cached results (tiny model, CPU).

    python -m bench.studies.search_efficiency --grid [--steps 40] [--seeds 3]  # train the grid once, cache it (min)
    python -m bench.studies.search_efficiency [--sampler-seeds 20]   # replay from the cache (seconds, no training)
    # both -> bench/results/search_efficiency.json ("grid": the cache, "replay": the comparison)

Space: learning rate in {1e-4, 3e-4, 1e-3, 3e-3, 1e-2} x num_generations in {4, 8} (10 configurations).
``--grid`` trains every configuration on ``--seeds`` seeds and records, per run, the objective on VALIDATION
(``optimized_metric``, default val_accuracy), its validation curve (metrics.jsonl every ``--every`` steps), the test
accuracy, steps and seconds.

The replay runs, for each of ``--sampler-seeds`` sampler seeds, the search a study would run, with each trial's
value looked up in the cache instead of trained: TPE with the median pruner (bench/conf/hparams_search/
bench_space.yaml's settings), the same TPE without the pruner (what pruning adds or costs), and random search
without pruning. The pruner reads the cached validation curve of the trial's first replica, as the
worker's pruning does (on the whole validation split, where a live probe reads prune_eval_samples of it).
Trials follow the worker's rules: a configuration drawn again gets its next cached seeds and the mean over all of
them; a repeat of a pruned configuration is pruned at no cost. Time to target: the trial-steps spent until the
configuration the search would pick (the best mean over its seeds so far) has a grid mean (over all cached seeds)
within 95 % of the grid's best. Reported: the median and interquartile range of that over the sampler seeds, and how
many never reached it within the budget.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from bench._common import RESULTS, ROOT, command, launch, machine, parser, write

LRS = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2)
GENERATIONS = (4, 8)
AXES = ("optimizer.learning_rate", "trainer.num_generations")
COMMON = ["data.max_val_samples=64", "data.max_test_samples=64", "trainer.per_device_train_batch_size=16"]
DEST = RESULTS / "search_efficiency.json"


def _space_settings() -> tuple[int, int, int, int]:
    """bench_space.yaml's TPE startup trials, median pruner startup and warm-up, and probe interval."""
    from omegaconf import OmegaConf

    s = OmegaConf.load(ROOT / "bench" / "conf" / "hparams_search" / "bench_space.yaml").hydra.sweeper
    return s.sampler.n_startup_trials, s.pruner.n_startup_trials, s.pruner.n_warmup_steps, s.prune_every


TPE_STARTUP, PRUNE_STARTUP, PRUNE_WARMUP, PRUNE_EVERY = _space_settings()


def config_key(values: dict) -> str:
    return " ".join(f"{axis}={float(values[axis]) if axis == AXES[0] else int(values[axis])}" for axis in AXES)


def train_grid(steps: int, seeds: list[int], every: int, objective: str, extra: list[str]) -> dict:
    """Train every configuration on every seed; the cache the replay reads."""
    from grpo_sweep.reading.results import SweepResults
    from grpo_sweep.run.files import read_jsonl
    from grpo_sweep.run.results import lookup

    out = Path(tempfile.mkdtemp(prefix="grpo-bench-search-"))
    args = [
        "-m",
        f"optimizer.learning_rate={','.join(map(str, LRS))}",
        f"trainer.num_generations={','.join(map(str, GENERATIONS))}",
        f"trainer.seed={','.join(map(str, seeds))}",
        f"optimized_metric={objective}",
        f"trainer.max_steps={steps}",
        f"trainer.save_steps={steps}",
        f"trainer.eval.every_steps={every}",
        *COMMON,
        *extra,
    ]
    wall, _ = launch(args, out)
    # the curve of the objective: val/<name> rows of metrics.jsonl (val_accuracy -> val/accuracy)
    curve_key = "val/" + objective.removeprefix("val_").removeprefix("rewards.")
    runs = []
    for run_dir, summary in ((r.dir, r.summary) for r in SweepResults.read(out / "grpo" / "multiruns").runs):
        cfg = json.loads(json.dumps(_load_config(run_dir)))
        values = {AXES[0]: cfg["optimizer"]["learning_rate"], AXES[1]: cfg["trainer"]["num_generations"]}
        data = summary.to_dict()
        curve = {
            str(row["step"]): row[curve_key]
            for row in read_jsonl(run_dir / "metrics.jsonl")
            if isinstance(row.get(curve_key), (int, float)) and row.get("step")
        }
        runs.append(
            {
                "config": config_key(values),
                "seed": cfg["trainer"]["seed"],
                "value": summary.objective,
                "test_accuracy": lookup(data, "test_accuracy"),
                "steps": summary.steps,
                "runtime_s": summary.runtime_s,
                "curve": curve,
            }
        )
    if any(r["value"] is None for r in runs):
        raise SystemExit(
            f"some runs have no {objective} in summary.json: {[r['config'] for r in runs if r['value'] is None]}"
        )
    return {
        "objective": objective,
        "max_steps": steps,
        "every_steps": every,
        "seeds": seeds,
        "overrides": extra,
        "runs": runs,
        "wall_seconds": round(wall, 1),
        "date": time.strftime("%Y-%m-%d"),
        "machine": machine(),
        "command": command("bench.studies.search_efficiency"),
    }


def _load_config(run_dir: Path) -> dict:
    from omegaconf import OmegaConf

    return OmegaConf.to_container(OmegaConf.load(run_dir / ".hydra" / "config.yaml"), resolve=True)


def cached_runs(grid: dict) -> tuple[dict[str, list[dict]], str | None]:
    """{config: its runs in seed order} and, for a cache older than the validation split, why it is a stand-in."""
    if isinstance(grid.get("runs"), list):
        by_config: dict[str, list[dict]] = {}
        for run in sorted(grid["runs"], key=lambda r: r["seed"]):
            by_config.setdefault(run["config"], []).append(run)
        legacy = (
            None
            if str(grid.get("objective", "")).startswith("val_")
            else (f"the cached grid's objective is {grid.get('objective')!r}, not a validation figure")
        )
        return by_config, legacy
    # the cache of the script's first version: one seed, final values only, on the held-out set later split into
    # validation and test. Usable as a stand-in for the replay's mechanics; regenerate with --grid.
    by_config = {}
    for key, value in grid["objectives"].items():
        values = dict(part.split("=", 1) for part in key.split())
        by_config[config_key(values)] = [
            {"seed": 42, "value": value, "steps": grid.get("max_steps", 40), "curve": None}
        ]
    return by_config, (
        f"the cached grid holds {grid.get('objective', 'eval_accuracy')!r} on the old held-out set "
        "(one seed, no validation curves: no pruning in the replay); regenerate it with "
        "`python -m bench.studies.search_efficiency --grid` once runs report val_accuracy"
    )


def replay(
    by_config: dict[str, list[dict]],
    sampler: str,
    seed: int,
    n_trials: int,
    seeds_per_trial: int,
    target: float,
    grid_mean: dict[str, float],
) -> dict:
    """One search replayed on the cache: its trial-steps and trials until the pick is within target."""
    import optuna

    prune = sampler == "tpe" and all(run.get("curve") for runs in by_config.values() for run in runs)
    study = optuna.create_study(
        direction="maximize",
        sampler=(
            optuna.samplers.TPESampler(seed=seed, n_startup_trials=TPE_STARTUP, constant_liar=True)
            if sampler.startswith("tpe")
            else optuna.samplers.RandomSampler(seed=seed)
        ),
        pruner=(
            optuna.pruners.MedianPruner(n_startup_trials=PRUNE_STARTUP, n_warmup_steps=PRUNE_WARMUP)
            if prune
            else optuna.pruners.NopPruner()
        ),
    )
    seen: dict[str, dict] = {}  # config -> {"seeds": claimed, "values": {seed: value}, "pruned": bool}
    spent = {"steps": 0, "reached": None, "trials": None}

    def objective(trial):
        values = {
            AXES[0]: trial.suggest_categorical(AXES[0], list(LRS)),
            AXES[1]: trial.suggest_categorical(AXES[1], list(GENERATIONS)),
        }
        key = config_key(values)
        state = seen.setdefault(key, {"seeds": set(), "values": {}, "pruned": False})
        if state["pruned"] and not state["values"]:
            raise optuna.TrialPruned()  # the worker's rule: no training for a repeat of a pruned configuration
        runs = {run["seed"]: run for run in by_config[key]}
        free = [s for s in sorted(runs) if s not in state["seeds"]]
        # past the cached seeds a repeat re-reads them (it costs steps and teaches nothing new)
        seeds = (free + sorted(runs))[:seeds_per_trial] if len(free) < seeds_per_trial else free[:seeds_per_trial]
        for i, s in enumerate(seeds):
            run = runs[s]
            if prune and i == 0 and not state["values"]:
                for step in sorted(int(k) for k in run["curve"]):
                    if step % PRUNE_EVERY or step >= run["steps"]:
                        continue
                    trial.report(run["curve"][str(step)], step)
                    if trial.should_prune():
                        spent["steps"] += step
                        state["pruned"] = True
                        state["seeds"].add(s)
                        raise optuna.TrialPruned()
            spent["steps"] += run["steps"]
            state["seeds"].add(s)
            state["values"][s] = run["value"]
        return sum(state["values"].values()) / len(state["values"])

    def check(study, trial):
        scored = {k: sum(v["values"].values()) / len(v["values"]) for k, v in seen.items() if v["values"]}
        if spent["reached"] is None and scored:
            pick = max(scored, key=scored.get)
            if grid_mean[pick] >= target:
                spent["reached"], spent["trials"] = spent["steps"], trial.number + 1

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study.optimize(objective, n_trials=n_trials, callbacks=[check])
    return {
        "steps_to_target": spent["reached"],
        "trials_to_target": spent["trials"],
        "steps_total": spent["steps"],
        "pruned": sum(t.state.name == "PRUNED" for t in study.trials),
        "configurations": len(seen),
    }


def quantiles(values: list[float | None]) -> dict:
    """Median and interquartile range; a search that never reached the target counts as infinitely long."""
    import numpy as np

    finite = np.array([float("inf") if v is None else float(v) for v in values])
    q = np.quantile(finite, [0.25, 0.5, 0.75], method="inverted_cdf")  # no interpolation towards inf
    as_number = lambda x: None if not np.isfinite(x) else float(x)  # noqa: E731
    return {
        "median": as_number(q[1]),
        "q25": as_number(q[0]),
        "q75": as_number(q[2]),
        "not_reached": sum(v is None for v in values),
        "of": len(values),
    }


def compare(grid: dict, sampler_seeds: int, n_trials: int, seeds_per_trial: int) -> dict:
    by_config, legacy = cached_runs(grid)
    grid_mean = {k: sum(r["value"] for r in runs) / len(runs) for k, runs in by_config.items()}
    best = max(grid_mean.values())
    target = 0.95 * best
    full_grid = sum(runs[0]["steps"] * min(seeds_per_trial, len(runs)) for runs in by_config.values())
    out = {
        "objective": grid.get("objective"),
        "sampler_seeds": sampler_seeds,
        "trials_per_search": n_trials,
        "seeds_per_trial": seeds_per_trial,
        "grid_best_mean": best,
        "target": target,
        "configurations_within_target": sum(v >= target for v in grid_mean.values()),
        "configurations": len(grid_mean),
        "grid_trial_steps": full_grid,
    }
    if legacy:
        out["caveat"] = legacy
    # TPE with the median pruner (the study's setting), TPE alone (what pruning adds or costs), random search
    for sampler in ("tpe", "tpe_unpruned", "random"):
        runs = [
            replay(by_config, sampler, seed, n_trials, seeds_per_trial, target, grid_mean)
            for seed in range(sampler_seeds)
        ]
        out[sampler] = {
            "pruning": sampler == "tpe" and all(r.get("curve") for v in by_config.values() for r in v),
            "steps_to_target": quantiles([r["steps_to_target"] for r in runs]),
            "trials_to_target": quantiles([r["trials_to_target"] for r in runs]),
            "pruned_trials_mean": sum(r["pruned"] for r in runs) / len(runs),
            "per_seed": [r["steps_to_target"] for r in runs],
        }
    med_tpe, med_random = out["tpe"]["steps_to_target"]["median"], out["random"]["steps_to_target"]["median"]
    out["ratio_median_steps_tpe_to_random"] = round(med_tpe / med_random, 3) if med_tpe and med_random else None
    return out


def main() -> None:
    cli = parser(__doc__)
    cli.add_argument("--grid", action="store_true", help="train the grid and cache it (otherwise: replay the cache)")
    cli.add_argument("--steps", type=int, default=40)
    cli.add_argument("--seeds", type=int, default=3, help="seeds per configuration in the grid (42, 43, ...)")
    cli.add_argument("--every", type=int, default=PRUNE_EVERY, help="validation every N steps in the grid's runs")
    cli.add_argument("--objective", default="val_accuracy")
    cli.add_argument("--sampler-seeds", type=int, default=20)
    cli.add_argument("--trials", type=int, default=16, help="trials per replayed search")
    cli.add_argument("--seeds-per-trial", type=int, default=1)
    cli.add_argument("--results", type=Path, default=DEST, help="the file holding the grid, where the replay goes")
    cli.add_argument("overrides", nargs="*", help="more overrides for every grid run")
    args = cli.parse_args()
    if args.sampler_seeds < 1 or args.trials < 1 or args.seeds_per_trial < 1:
        raise SystemExit("--sampler-seeds, --trials and --seeds-per-trial must be >= 1")
    if args.objective.startswith("test_"):
        raise SystemExit(f"--objective {args.objective}: a search selects on validation, not on the test split")
    previous = json.loads(args.results.read_text()) if args.results.exists() else {}
    if args.grid:
        grid = train_grid(args.steps, [42 + i for i in range(args.seeds)], args.every, args.objective, args.overrides)
    elif "replay" in previous:
        grid = previous["grid"]
    elif "grid" in previous:  # the first version's file: its grid's final objectives only
        grid = {
            "objective": previous.get("objective", "eval_accuracy"),
            "objectives": previous["grid"]["objectives"],
            "max_steps": previous.get("space", {}).get("max_steps", 40),
            "date": previous.get("date"),
            "command": previous.get("command"),
        }
    else:
        raise SystemExit(f"no cached grid in {args.results}: run with --grid first")
    start = time.perf_counter()
    result = {"grid": grid, "replay": compare(grid, args.sampler_seeds, args.trials, args.seeds_per_trial)}
    result["replay"].update(
        seconds=round(time.perf_counter() - start, 1),
        date=time.strftime("%Y-%m-%d"),
        command=command("bench.studies.search_efficiency"),
    )
    print(json.dumps(result["replay"], indent=2))
    if args.results == DEST:
        write(DEST.name, result)
    else:
        args.results.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {args.results}")


if __name__ == "__main__":
    main()
