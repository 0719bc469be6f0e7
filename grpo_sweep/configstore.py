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
    store_launchers()


# whether this process runs grpo-sweep's app (register_configs was called): only then is submitit_local grpo-sweep's;
# another Hydra app in the same environment keeps the stock one
_REGISTERED: list[bool] = []


def store_launchers() -> None:
    """hydra/launcher=submitit_local keeps its name and keys and becomes grpo-sweep's (every run validated first, at
    most array_parallelism runs at a time). Hydra's plugin scan stores the stock entry again whenever Hydra's global
    state is restored (``Singleton.set_state``: its test fixtures, a job process); the scan then calls
    hydra_plugins/grpo_sweep_launcher's search-path plugin, which calls this again."""
    from hydra_plugins.grpo_sweep_launcher.launcher import GrpoLocalQueueConf

    from .adapters.hydra import store_over_plugin

    _REGISTERED[:] = [True]
    store_over_plugin("hydra/launcher", "submitit_local", GrpoLocalQueueConf(), provider="grpo_sweep")


def restore_launchers() -> None:
    """``store_launchers`` again where this process registered grpo-sweep's configs (a plugin scan undid it)."""
    if _REGISTERED:
        store_launchers()
