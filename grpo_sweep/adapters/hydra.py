"""Hydra internals grpo-sweep builds on (hydra-core 1.3): no public API gives these.

- ``apply_overrides``: set plain ``key=value`` overrides on a composed config exactly as Hydra does after merging
  (``ConfigLoaderImpl._apply_overrides_to_config``), so that runs differing only in values are composed once.
- ``overrides_dirname``: Hydra's ``override_dirname`` for a list of overrides.
- ``BasicLauncher``/``BasicSweeper`` (and their configs): the stock launcher and sweeper that the gated ones extend.
- ``joblib_execute_job``: the joblib launcher's per-job function, which the pool runs in its workers.
- ``is_config_group``: whether a name is a config group, asked of the config loader's repository.
- ``sweep_jobs_at_first_batch``: every job of a BasicSweeper's sweep, read from its split batches, when it is about
  to check its first batch.
- ``store_over_plugin``: put a ConfigStore entry over one a plugin module stores under the same name.
"""
from __future__ import annotations

from typing import Any

__all__ = ["apply_overrides", "is_config_group", "joblib_execute_job", "overrides_dirname", "store_over_plugin",
           "sweep_jobs_at_first_batch"]

_CORE_PLUGINS = {
    "BasicLauncher": "hydra._internal.core_plugins.basic_launcher",
    "BasicLauncherConf": "hydra._internal.core_plugins.basic_launcher",
    "BasicSweeper": "hydra._internal.core_plugins.basic_sweeper",
    "BasicSweeperConf": "hydra._internal.core_plugins.basic_sweeper",
}


def __getattr__(name: str) -> Any:
    # Looked up when asked for, not when this module is imported: Hydra's plugin scan re-executes its core plugin
    # modules, and a class taken before the scan is not the one Hydra's own code then checks against (super()
    # fails with "obj must be an instance or subtype of type").
    if name in _CORE_PLUGINS:
        import importlib

        return getattr(importlib.import_module(_CORE_PLUGINS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def apply_overrides(overrides: list, cfg: Any) -> None:
    from hydra._internal.config_loader_impl import ConfigLoaderImpl

    ConfigLoaderImpl._apply_overrides_to_config(overrides, cfg)


def overrides_dirname(overrides: list, exclude_keys: list, item_sep: str, kv_sep: str) -> str:
    from hydra._internal.config_loader_impl import get_overrides_dirname

    return get_overrides_dirname(overrides=overrides, exclude_keys=exclude_keys, item_sep=item_sep, kv_sep=kv_sep)


def joblib_execute_job(*args: Any) -> Any:
    from hydra_plugins.hydra_joblib_launcher._core import execute_job

    return execute_job(*args)


def is_config_group(loader: Any, name: str) -> bool:
    """``loader``: Hydra's ConfigLoaderImpl; its ``repository`` is not part of the ConfigLoader interface."""
    return bool(loader.repository.group_exists(name))


def sweep_jobs_at_first_batch(sweeper: Any) -> list | None:
    """Every job of a BasicSweeper's sweep (``sweeper.overrides``: its batches of jobs) when it is checking its
    first batch (``batch_index`` is 1 then: it counts the batches handed out); None for a later batch."""
    if sweeper.batch_index != 1 or sweeper.overrides is None:
        return None
    return [job for jobs in sweeper.overrides for job in jobs]


def store_over_plugin(group: str, name: str, node: Any, provider: str) -> None:
    """Store ``node`` as ``group/name`` over the entry a plugin module stores under that name. Hydra's plugin scan
    (once per process) re-executes every plugin module, which would store the plugin's entry again over ours:
    scanning first makes this store the last."""
    from hydra.core.config_store import ConfigStore
    from hydra.core.plugins import Plugins

    Plugins.instance()
    ConfigStore.instance().store(group=group, name=name, node=node, provider=provider)
