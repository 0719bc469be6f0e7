"""hydra/sweeper=grpo_pbt's settings (hparams_search=pbt sets them for a preset population)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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
    # after a round, this fraction at the bottom takes over from as many at the top
    exploit_fraction: float = 0.25
    # explore: each moved value times one of these (clipped to its range) ...
    perturb_factors: list[float] = field(default_factory=lambda: [0.8, 1.25])
    # ... or, with this probability, drawn afresh in its range
    resample_probability: float = 0.25
    direction: str = "maximize"
    # the draws (the first population, who takes over from whom, the moves)
    seed: int = 0
    # the keys PBT moves: reward_mix.<term>.weight and optimizer.learning_rate, each {low, high[, log]}
    params: dict[str, Any] = field(default_factory=dict)
