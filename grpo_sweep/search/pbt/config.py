"""hydra/sweeper=grpo_pbt's settings (hparams_search=pbt sets them for a preset population)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...reading.stats import DEFAULT_VERDICTS

PBT_SWEEPER_TARGET = "hydra_plugins.grpo_sweep_pbt.sweeper.GRPOPBTSweeper"


@dataclass
class GRPOPBTSweeperConf:
    _target_: str = PBT_SWEEPER_TARGET
    # the PBT's name: its directory (hparams_search=pbt: outputs/<task>/pbt/<name>), so the same command continues it
    name: str = "pbt"
    population: int = 4
    rounds: int = 3
    # null: trainer.max_steps / rounds; else trainer.max_steps becomes rounds x steps_per_round
    steps_per_round: int | None = None
    # after a round, this fraction at the bottom (rounded up, at most half the population, as Ray Tune's
    # quantile_fraction) takes over from as many at the top; 0: no member takes over another
    exploit_fraction: float = 0.25
    # a member takes over a donor only when the donor's lead on the ranking look is more than noise_z standard errors
    # (paired by question; docs/search.md); false: plain PBT, which copies whichever donor is ahead
    noise_guard: bool = True
    noise_z: float = 1.645
    # how a recipient's values move: perturb (perturb_factors, resample_probability) or pb2 (Parker-Holder et al.,
    # 2020: a time-varying GP bandit over the round-to-round improvement, as Ray Tune's PB2; for small populations)
    explore: str = "perturb"
    # true: a round ends when every member's has (the population ranked together); false: each member decides as
    # its own round ends, against the others' latest looks, and goes on at once (Ray Tune's default), so a slow
    # node holds no one but its own member
    synchronous: bool = True
    # at the end, the best lineage's schedule against the best starting point held fixed, each over this many fresh
    # seeds, with the sweep's verdict (0: not run; the end says how to run it)
    head_to_head_seeds: int = 3
    # how verdicts estimate noise: moderated (seed-paired, borrowing strength across configurations) or strict
    verdicts: str = DEFAULT_VERDICTS
    # explore: each moved value times one of these (clipped to its range) ...
    perturb_factors: list[float] = field(default_factory=lambda: [0.8, 1.25])
    # ... or, with this probability, drawn afresh in its range
    resample_probability: float = 0.25
    direction: str = "maximize"
    # the draws (the first population, who takes over from whom, the moves)
    seed: int = 0
    # the keys PBT moves, each {low, high[, log]}: reward_mix.<term>.weight (on their ratios), optimizer.learning_rate,
    # any other number a round can change (trainer.beta, a reward's params; run/phases.FIXED says which cannot)
    params: dict[str, Any] = field(default_factory=dict)
