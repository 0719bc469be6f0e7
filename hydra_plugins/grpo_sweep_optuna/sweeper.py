"""Hydra only instantiates sweepers that live in the ``hydra_plugins`` namespace; the logic is in grpo_sweep."""

from grpo_sweep.search.optuna.sweeper import OptunaSweeperImpl


class GRPOOptunaSweeper(OptunaSweeperImpl):
    """grpo-sweep's Optuna sweeper (``hydra/sweeper=grpo_optuna``): asynchronous workers, pruning, resume."""
