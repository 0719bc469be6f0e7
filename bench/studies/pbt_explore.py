"""PBT's explore strategies side by side on the built-in task, at an equal budget: the perturb/resample explore and
PB2's GP bandit (``hydra.sweeper.explore=pb2``), each over several PBT seeds (``hydra.sweeper.seed``: the first
population, who takes over from whom, the moves), with the noise guard on and off.

    python -m bench.studies.pbt_explore [--seeds 5] [--explores perturb,pb2] [--guards on] [--out pbt_explore]

Each PBT is the issue's command, ``python launch.py -m hparams_search=pbt hydra/launcher=pool`` (4 members, 3 rounds of
40 steps, the preset's space: the two weights and the learning rate), without its head-to-head (measured elsewhere).
For each: the best member's final validation (what PBT ranks by) and its test (measured once), the exploits beyond
and within the ranking look's noise, the members held back, the wall time. Then, per strategy, the mean and the
spread (sd) over the PBT seeds, and the difference in test between the strategies with a t interval over seeds
(paired by PBT seed: the same seed draws the same first population).

Writes bench/results/pbt_explore.json (``--out``: another name, e.g. for the guard off).
"""

from __future__ import annotations

import json
import math
import statistics
import tempfile
from pathlib import Path

from bench._common import command, launch, machine, parser, record


def launch_pbt(name: str, overrides: list[str], out: Path):
    """The issue's PBT on the pool, without its head-to-head, with ``overrides``: its wall seconds and its lineage
    (pbt.jsonl read back)."""
    from grpo_sweep.search.pbt.lineage import Lineage

    wall, _ = launch(
        [
            "-m",
            "hparams_search=pbt",
            "hydra/launcher=pool",
            *overrides,
            f"hydra.sweeper.name={name}",
            "hydra.sweeper.head_to_head_seeds=0",
            "trainer.disable_tqdm=true",
        ],
        out,
    )
    return wall, Lineage.read(out / "grpo" / "pbt" / name / "pbt.jsonl")


def one(explore: str, guard: bool, seed: int, out: Path) -> dict:
    name = f"{explore}-{'guard' if guard else 'plain'}-{seed}"
    wall, lineage = launch_pbt(
        name,
        [
            f"hydra.sweeper.explore={explore}",
            f"hydra.sweeper.noise_guard={str(guard).lower()}",
            f"hydra.sweeper.seed={seed}",
        ],
        out,
    )
    best, test = lineage.best, lineage.test
    moves = [t for r in sorted(lineage.decisions) for t in lineage.decisions[r]]
    return {
        "explore": explore,
        "noise_guard": guard,
        "seed": seed,
        "best_val": best["score"],
        "test": test["test_accuracy"],
        "exploits_beyond_noise": sum(1 for t in moves if t.get("beyond_noise") is True),
        "exploits_within_noise": sum(1 for t in moves if t.get("beyond_noise") is False),
        "held_back": sum(len(held) for held in lineage.held_back.values()),
        "wall_s": round(wall, 1),
    }


def summary(runs: list[dict]) -> dict:
    def mean_sd(key: str) -> str:
        xs = [r[key] for r in runs]
        return f"{statistics.mean(xs):.3f} (sd {statistics.stdev(xs):.3f})" if len(xs) > 1 else f"{xs[0]:.3f}"

    return {
        "runs": len(runs),
        "best_val": mean_sd("best_val"),
        "test": mean_sd("test"),
        "exploits beyond / within noise / held back": (
            f"{sum(r['exploits_beyond_noise'] for r in runs)} / {sum(r['exploits_within_noise'] for r in runs)} / "
            f"{sum(r['held_back'] for r in runs)}"
        ),
        "wall_s median": statistics.median(r["wall_s"] for r in runs),
    }


def paired(a: list[dict], b: list[dict]) -> str:
    """Test of ``a`` minus ``b``, paired by PBT seed, with a 95 % t interval over the seeds."""
    from scipy import stats

    by_seed = {r["seed"]: r["test"] for r in b}
    diffs = [r["test"] - by_seed[r["seed"]] for r in a if r["seed"] in by_seed]
    if len(diffs) < 2:
        return "too few seeds"
    mean, se = statistics.mean(diffs), statistics.stdev(diffs) / math.sqrt(len(diffs))
    half = stats.t.ppf(0.975, len(diffs) - 1) * se
    return f"{mean:+.3f} [{mean - half:+.3f}, {mean + half:+.3f}] over {len(diffs)} seeds"


def main(argv: list[str] | None = None) -> None:
    args = parser(__doc__)
    args.add_argument("--seeds", type=int, default=5)
    args.add_argument("--explores", default="perturb,pb2")
    args.add_argument("--guards", default="on", help="on, off or on,off")
    args.add_argument("--out", default="pbt_explore", help="bench/results/<out>.json")
    ns = args.parse_args(argv)
    explores = ns.explores.split(",")
    guards = [g == "on" for g in ns.guards.split(",")]
    runs = []
    with tempfile.TemporaryDirectory(prefix="pbt-explore-") as tmp:
        for seed in range(ns.seeds):
            for explore in explores:
                for guard in guards:
                    runs.append(one(explore, guard, seed, Path(tmp)))
                    print(json.dumps(runs[-1]))
    result = {"command": command("bench.studies.pbt_explore", argv), "machine": machine("at the end"), "runs": runs}
    arms = {(e, g): [r for r in runs if r["explore"] == e and r["noise_guard"] == g] for e in explores for g in guards}
    for (e, g), group in arms.items():
        result[f"{e}, guard {'on' if g else 'off'}"] = summary(group)
    if len(explores) == 2:
        for g in guards:
            a, b = arms[(explores[1], g)], arms[(explores[0], g)]
            result[f"test {explores[1]} - {explores[0]}, guard {'on' if g else 'off'}"] = paired(a, b)
    if len(guards) == 2:
        for e in explores:
            result[f"test {e}: guard on - off"] = paired(arms[(e, True)], arms[(e, False)])
    record(ns.out, result)


if __name__ == "__main__":
    main()
