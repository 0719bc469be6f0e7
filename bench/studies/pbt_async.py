"""Synchronous against asynchronous PBT rounds (``hydra.sweeper.synchronous``), in two parts.

    python -m bench.studies.pbt_async [--sims 200] [--slow-share 0.25] [--slow-factor 5] [--real-seeds 3]

1. **A cluster with a slow node, simulated.** The PBT's driver itself (search/pbt/rounds.py, the code a sweep runs,
   synchronous or not) drives a stand-in cluster on a simulated clock: each job (a member's round) takes 100 s, or
   ``--slow-factor`` times that when it lands on a slow node (each job with probability ``--slow-share``), the same
   draws for the same job in both modes. A synchronous PBT's decisions wait for a round's slowest member (the
   barrier). The members learn
   as in a real PBT (a round adds most near lr 1e-3; a look of 64 questions, binomial), so the driver exploits,
   holds back and goes back as it would. For 4 members x 3 rounds, with a slot per member (a cluster) and with 2
   slots (a pool on 2 cores): the wall time of each, their ratio, and the jobs the asynchronous one adds (a
   recipient going back to a round it had trained).
2. **The tiny model on this machine's pool, for real** (``--real-seeds``; 0 skips it): the issue's command
   ``python launch.py -m hparams_search=pbt hydra/launcher=pool`` with ``hydra.sweeper.synchronous=true`` and
   ``false``, over PBT seeds, without the head-to-head: the wall time, the best member's validation and test, the
   jobs trained. Jobs here take equal times, so this part shows the cost, not the gain.

Writes bench/results/pbt_async.json.
"""

from __future__ import annotations

import json
import math
import random
import statistics
import tempfile
from pathlib import Path
from types import SimpleNamespace

from bench._common import RESULTS, command, machine, parser, record

STEPS = 40
QUESTIONS = 64
BASE_S = 100.0
RESULT = RESULTS / "pbt_async.json"
LR = "optimizer.learning_rate"  # the one value the simulated members move


class Clock:
    """The driver's ``time`` module, on a simulated clock: ``sleep`` moves it on."""

    def __init__(self) -> None:
        self.now = 0.0

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def gain(lr: float) -> float:
    return max(0.0, 0.15 - 0.1 * abs(math.log10(lr) + 3))


class Cluster:
    """Jobs that end after their drawn duration on the clock, then leave what a paused run leaves: the round's
    checkpoint (carrying the member's true accuracy, so a take-over carries it too) and its validation."""

    def __init__(self, sweep: Path, lineage, clock: Clock, duration, rng: random.Random) -> None:
        self.sweep, self.lineage, self.clock, self.duration, self.rng = sweep, lineage, clock, duration, rng
        self.started: list[tuple[int, int]] = []
        self.looks: dict[tuple[int, int], dict] = {}

    def start_job(self, m: int, r: int):
        values = self.lineage.history(m, r)[-1]
        seconds = self.duration(m, r, self.started.count((m, r)))
        self.started.append((m, r))
        return Job(self, m, r, values, self.clock.now + seconds)

    def train(self, m: int, r: int, values: dict) -> None:
        from grpo_sweep.search.pbt.members import member_dir

        run = member_dir(self.sweep, m)
        before = run / "checkpoints" / f"checkpoint-{r * STEPS}" / "trainer_state.json"
        accuracy = json.loads(before.read_text())["accuracy"] if r else 0.25
        accuracy = min(0.95, accuracy + gain(values[LR]))
        right = sum(self.rng.random() < accuracy for _ in range(QUESTIONS))
        step = (r + 1) * STEPS
        metrics = run / "metrics.jsonl"
        rows = [json.loads(line) for line in metrics.read_text().splitlines()] if metrics.exists() else []
        rows = [row for row in rows if row["step"] <= r * STEPS] + [{"step": step, "val/accuracy": right / QUESTIONS}]
        run.mkdir(parents=True, exist_ok=True)
        metrics.write_text("".join(json.dumps(row) + "\n" for row in rows))
        checkpoint = run / "checkpoints" / f"checkpoint-{step}"
        checkpoint.mkdir(parents=True, exist_ok=True)
        (checkpoint / "trainer_state.json").write_text(json.dumps({"global_step": step, "accuracy": accuracy}))
        self.looks[(m, r)] = {f"q{i}": float(i < right) for i in range(QUESTIONS)}

    def look(self, m: int, r: int, score):
        return None if score is None else self.looks.get((m, r))

    def kept_look(self, m: int, r: int):
        return self.looks.get((m, r))


class Job:
    def __init__(self, cluster: Cluster, m: int, r: int, values: dict, ends: float) -> None:
        self.cluster, self.m, self.r, self.values, self.ends, self.trained = cluster, m, r, values, ends, False

    def done(self) -> bool:
        if self.cluster.clock.now >= self.ends and not self.trained:
            self.cluster.train(self.m, self.r, self.values)
            self.trained = True
        return self.trained

    def results(self):
        return [SimpleNamespace(return_value=0.0)]


def simulate(sim: int, population: int, rounds: int, slots: int, slow_share: float, slow_factor: float) -> dict:
    draws: dict[tuple[int, int, int], float] = {}
    rng = random.Random(sim)

    def duration(m: int, r: int, again: int) -> float:
        if (m, r, again) not in draws:
            draws[(m, r, again)] = BASE_S * (slow_factor if rng.random() < slow_share else 1.0)
        return draws[(m, r, again)]

    # each member's first run of each round drawn first, in one order, whichever mode asks for it first
    for r in range(rounds):
        for m in range(population):
            duration(m, r, 0)
    out = {}
    for mode, synchronous in (("sync", True), ("async", False)):
        ran = drive(sim, population, rounds, slots, duration, synchronous)
        out[f"{mode}_s"], out[f"jobs_{mode}"] = ran["wall_s"], ran["jobs"]
        if not synchronous:
            out["take_overs"], out["went_back"] = ran["take_overs"], ran["went_back"]
    return out


def drive(sim: int, population: int, rounds: int, slots: int, duration, synchronous: bool) -> dict:
    """One PBT through the real driver on the simulated cluster: its wall time, jobs and take-overs."""
    from grpo_sweep.search.pbt import rounds as driving
    from grpo_sweep.search.pbt.decisions import start_row
    from grpo_sweep.search.pbt.lineage import Lineage
    from grpo_sweep.search.pbt.members import LINEAGE
    from grpo_sweep.search.pbt.rounds import PBTRun, Rounds
    from grpo_sweep.search.pbt.settings import Param, Settings, check_settings

    param = Param(LR, 1e-4, 3e-3, log=True)
    raw = Settings(population=population, rounds=rounds, steps_per_round=STEPS, seed=sim, synchronous=synchronous)
    settings = check_settings(raw, rounds * STEPS)
    clock = Clock()
    with tempfile.TemporaryDirectory(prefix="pbt-async-sim-") as tmp:
        sweep = Path(tmp)
        lineage = Lineage.read(sweep / LINEAGE)
        lineage.write(start_row("sim", settings, [param], "val_accuracy", 42))
        cluster = Cluster(sweep, lineage, clock, duration, random.Random(sim + 10_000))
        real_time, driving.time = driving.time, clock
        try:
            run = PBTRun(sweep, lineage, [param], settings, "val_accuracy", 42)
            Rounds(run, cluster.start_job, cluster.look, cluster.kept_look, slots, poll_s=1.0).run()
        finally:
            driving.time = real_time
        takes = [row for row in lineage.timeline if row["event"] == "decide" and row["take_over"]]
        return {
            "wall_s": clock.now,
            "jobs": len(cluster.started),
            "take_overs": len(takes),
            "went_back": sum(1 for t in takes if t["take_over"]["donor_round"] < t["round"]),
        }


def simulated(sims: int, slots: int, slow_share: float, slow_factor: float) -> dict:
    runs = [simulate(s, 4, 3, slots, slow_share, slow_factor) for s in range(sims)]
    ratio = [r["async_s"] / r["sync_s"] for r in runs]
    cuts = statistics.quantiles(ratio, n=20, method="inclusive")  # the 5th, 10th, ..., 95th percentiles
    return {
        "slots": slots,
        "sims": sims,
        "sync wall median (s)": statistics.median(r["sync_s"] for r in runs),
        "async wall median (s)": statistics.median(r["async_s"] for r in runs),
        "async / sync wall: median [5th, 95th percentile]": (
            f"{statistics.median(ratio):.2f} [{cuts[0]:.2f}, {cuts[-1]:.2f}]"
        ),
        "async faster in": f"{sum(x < 1 for x in ratio)} of {sims}",
        "async slower in (the slowest)": f"{sum(x > 1 for x in ratio)} of {sims} ({max(ratio):.2f})",
        "jobs async / sync (mean)": (
            f"{statistics.mean(r['jobs_async'] for r in runs):.2f} / "
            f"{statistics.mean(r['jobs_sync'] for r in runs):.2f}"
        ),
        "take-overs a PBT (mean), of which went back": (
            f"{statistics.mean(r['take_overs'] for r in runs):.2f}, {statistics.mean(r['went_back'] for r in runs):.2f}"
        ),
    }


def real(seed: int, synchronous: bool, out: Path) -> dict:
    from bench.studies.pbt_explore import launch_pbt

    name = f"{'sync' if synchronous else 'async'}-{seed}"
    wall, lineage = launch_pbt(
        name, [f"hydra.sweeper.synchronous={str(synchronous).lower()}", f"hydra.sweeper.seed={seed}"], out
    )
    best, test = lineage.best, lineage.test
    return {
        "synchronous": synchronous,
        "seed": seed,
        "best_val": best["score"],
        "test": test["test_accuracy"],
        "jobs": len(lineage.reports),
        "wall_s": round(wall, 1),
    }


def main(argv: list[str] | None = None) -> None:
    args = parser(__doc__)
    args.add_argument("--sims", type=int, default=200)
    args.add_argument("--slow-share", type=float, default=0.25)
    args.add_argument("--slow-factor", type=float, default=5.0)
    args.add_argument("--real-seeds", type=int, default=3, help="0: simulate only, keep the real runs on file")
    ns = args.parse_args(argv)
    result: dict = {"command": command("bench.studies.pbt_async", argv)}
    for slots in (4, 2):
        result[f"simulated, {slots} slots"] = simulated(ns.sims, slots, ns.slow_share, ns.slow_factor)
        print(json.dumps(result[f"simulated, {slots} slots"]))
    result["simulated, no slow node, 4 slots"] = simulated(ns.sims, 4, 0.0, 1.0)
    if not ns.real_seeds:  # the simulation alone: the real runs last recorded are kept
        kept = json.loads(RESULT.read_text()) if RESULT.exists() else {}
        result.update({k: v for k, v in kept.items() if k.startswith("real")})
    else:
        runs = []
        with tempfile.TemporaryDirectory(prefix="pbt-async-") as tmp:
            for seed in range(ns.real_seeds):
                for synchronous in (True, False):
                    runs.append(real(seed, synchronous, Path(tmp)))
                    print(json.dumps(runs[-1]))
        result["real runs"] = runs
        for synchronous in (True, False):
            group = [r for r in runs if r["synchronous"] is synchronous]
            result[f"real, {'sync' if synchronous else 'async'}"] = {
                key: statistics.mean(r[key] for r in group) for key in ("best_val", "test", "jobs", "wall_s")
            }
    result["machine"] = machine("at the end")
    record("pbt_async", result)


if __name__ == "__main__":
    main()
