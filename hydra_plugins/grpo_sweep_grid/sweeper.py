"""Hydra only instantiates sweepers that live in the ``hydra_plugins`` namespace; the logic is in grpo_sweep."""

from grpo_sweep.adapters.hydra import BasicSweeper
from grpo_sweep.search.grid.sweeper import GridSweep


class GrpoBasicSweeper(GridSweep, BasicSweeper):
    """grpo-sweep's grid (``hydra/sweeper=grpo_basic``, the default): Hydra's basic sweep, gated."""
