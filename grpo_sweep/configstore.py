"""What Hydra is told before it composes: the schema (config/schema.py), each search strategy's sweepers and its
submitit_local launcher, put into Hydra's ConfigStore. Called by launch.py (and tests, benchmarks) before
composing; it sits at the top so that config/ imports nothing above it."""

from __future__ import annotations


def register_configs() -> None:
    """Put the schema, the sweeper's and the launchers' configs into Hydra's ConfigStore (idempotent)."""
    from hydra.core.config_store import ConfigStore

    from .config.schema import Config
    from .search import strategies

    cs = ConfigStore.instance()
    cs.store(name="grpo_sweep_schema", node=Config)
    for strategy in strategies():  # hydra/sweeper=grpo_basic (the grid), seeds, grpo_optuna, grpo_pbt
        for name, node in strategy.sweeper_configs():
            cs.store(group="hydra/sweeper", name=name, node=node, provider="grpo_sweep")
    # hydra/launcher=submitit_local keeps its name and keys and becomes grpo-sweep's (every run validated first, at
    # most array_parallelism runs at a time)
    from hydra_plugins.grpo_sweep_launcher.launcher import GrpoLocalQueueConf

    from .adapters.hydra import store_over_plugin

    store_over_plugin("hydra/launcher", "submitit_local", GrpoLocalQueueConf(), provider="grpo_sweep")
