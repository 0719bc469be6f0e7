"""Hydra only instantiates sweepers that live in the ``hydra_plugins`` namespace; the logic is in grpo_sweep."""

from grpo_sweep.search.seeds.sweeper import SeedsSweeperImpl


class GRPOSeedsSweeper(SeedsSweeperImpl):
    """grpo-sweep's adaptive seeds (``hydra/sweeper=seeds``): seeds only where a comparison is still open."""
