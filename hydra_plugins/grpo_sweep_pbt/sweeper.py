"""Hydra only instantiates sweepers that live in the ``hydra_plugins`` namespace; the logic is in grpo_sweep."""

from grpo_sweep.search.pbt.sweeper import PBTSweeperImpl


class GRPOPBTSweeper(PBTSweeperImpl):
    """grpo-sweep's population-based training (``hydra/sweeper=grpo_pbt``): reward weights and learning rate."""
