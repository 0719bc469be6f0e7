"""Search strategies: which runs a sweep makes, one package each, and what the rest of grpo-sweep asks of them.

- ``grid/``: Hydra's basic sweep (the default): every combination, at the seeds given.
- ``seeds/``: a grid whose seeds go where a comparison is still open (``hydra/sweeper=seeds``).
- ``optuna/``: an Optuna study over reward weights, num_generations, learning rate, any config value
  (``hparams_search=...``: ``hydra/sweeper=grpo_optuna`` with a search space).
- ``pbt/``: population-based training over reward weights, the learning rate and any number a round can change
  (``hparams_search=pbt``).

Each package holds everything of its strategy: its sweeper, its state on disk, its part of the end-of-sweep table
and report, its plot, and ``STRATEGY`` (a ``base.Strategy``). ``base.py`` is what they share; ``simulate.py`` makes up
sweeps with a known truth and judges them as the grid and the seeds strategy do. Adding a strategy is
one new package and its name in ``STRATEGIES``; its sweeper class goes in ``hydra_plugins/`` (Hydra instantiates
sweepers from that namespace only). Launching runs is ``launching/``'s trade, reading them back ``reading/``'s.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .base import Strategy

# the registration: each name is a package here with a STRATEGY; the first is what a sweep of no known sweeper is
STRATEGIES = ("grid", "seeds", "optuna", "pbt")


def strategies() -> list[Strategy]:
    """Every registered strategy (imported when asked: a strategy's package imports nothing heavy at the top)."""
    return [importlib.import_module(f"{__name__}.{name}").STRATEGY for name in STRATEGIES]


def for_sweeper(target: str | None) -> Strategy:
    """The strategy whose sweeper ``target`` (hydra.sweeper._target_) names; a sweeper that is none of ours (Hydra's
    own basic one, another plugin) sweeps like a grid."""
    name = str(target or "").rsplit(".", 1)[-1]
    found = strategies()
    return next((s for s in found if name in s.sweepers), found[0])


def for_config(config: Any) -> Strategy:
    """The strategy of the sweep ``config`` (a multirun's config, its hydra node included) runs."""
    return for_sweeper(config.hydra.sweeper.get("_target_"))


def of_sweep(sweep_dir: Path) -> Strategy:
    """The strategy that ran the sweep in ``sweep_dir``, as its multirun.yaml (the sweep's config, which every
    sweeper writes before its first run) names it; a directory without one is read as a grid."""
    path = Path(sweep_dir) / "multirun.yaml"
    if not path.is_file():
        return strategies()[0]
    from omegaconf import OmegaConf

    try:
        target = OmegaConf.select(OmegaConf.load(path), "hydra.sweeper._target_")
    except Exception:  # a half-written multirun.yaml: a grid, as without one; the sweep's reader names the file
        return strategies()[0]
    return for_sweeper(target)
