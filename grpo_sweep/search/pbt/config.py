"""hydra/sweeper=grpo_pbt's settings; their defaults are settings.Settings', the one place they live
(hparams_search=pbt sets only the keys its preset population moves)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .settings import Settings

PBT_SWEEPER_TARGET = "hydra_plugins.grpo_sweep_pbt.sweeper.GRPOPBTSweeper"


@dataclass
class GRPOPBTSweeperConf:
    """hydra/sweeper=grpo_pbt (grpo_sweep/search/pbt/): each key's meaning is said at settings.Settings."""

    _target_: str = PBT_SWEEPER_TARGET
    name: str = Settings.name
    population: int = Settings.population
    rounds: int = Settings.rounds
    steps_per_round: int | None = Settings.steps_per_round
    exploit_fraction: float = Settings.exploit_fraction
    noise_guard: bool = Settings.noise_guard
    noise_z: float = Settings.noise_z
    explore: str = Settings.explore
    synchronous: bool = Settings.synchronous
    head_to_head_seeds: int = Settings.head_to_head_seeds
    verdicts: str = Settings.verdicts
    perturb_factors: list[float] = field(default_factory=lambda: list(Settings.perturb_factors))
    resample_probability: float = Settings.resample_probability
    direction: str = Settings.direction
    seed: int = Settings.seed
    # the keys PBT moves, each {low, high[, log]}: reward_mix.<term>.weight (on their ratios), optimizer.learning_rate,
    # any other number a round can change (trainer.beta, a reward's params; run/phases.FIXED says which cannot)
    params: dict[str, Any] = field(default_factory=dict)
