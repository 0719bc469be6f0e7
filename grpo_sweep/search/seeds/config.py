"""hydra/sweeper=seeds's settings; their defaults are sequential.Settings', the one place they live."""

from __future__ import annotations

from dataclasses import dataclass

from .sequential import Settings as SeedsSettings

SEEDS_SWEEPER_TARGET = "hydra_plugins.grpo_sweep_seeds.sweeper.GRPOSeedsSweeper"


@dataclass
class GRPOSeedsSweeperConf:
    """hydra/sweeper=seeds (grpo_sweep/search/seeds/sequential.py): seeds only where a comparison is still open."""

    _target_: str = SEEDS_SWEEPER_TARGET
    # every configuration runs this many seeds first; no configuration gets more than max_seeds (the defaults are
    # sequential.Settings', which next_seeds takes for a grid)
    min_seeds: int = SeedsSettings.min_seeds
    max_seeds: int = SeedsSettings.max_seeds
    # the sweep's whole budget in runs; null: every configuration may reach max_seeds
    max_runs: int | None = SeedsSettings.max_runs
    # the family-wise error of the verdicts, shared by the looks (sequential.budgets)
    alpha: float = SeedsSettings.alpha
    # how the verdicts' noise is estimated: moderated (seed-paired, borrowing strength across configurations, its
    # error promised for configurations up to 4x noisier than each other) or strict (each configuration alone)
    verdicts: str = SeedsSettings.verdicts
    # the key the sweeper sets (its last dotted part must be `seed`), and the first seed: first_seed, first_seed+1, ...
    seed_key: str = "trainer.seed"
    first_seed: int = 1
