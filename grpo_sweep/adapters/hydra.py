"""Hydra internals grpo-sweep builds on (hydra-core 1.3): no public API gives these.

- ``apply_overrides``: set plain ``key=value`` overrides on a composed config exactly as Hydra does after merging
  (``ConfigLoaderImpl._apply_overrides_to_config``), so that runs differing only in values are composed once.
- ``overrides_dirname``: Hydra's ``override_dirname`` for a list of overrides.
- ``BasicLauncher``/``BasicSweeper`` (and their configs): the stock launcher and sweeper that the gated ones extend.
- ``joblib_execute_job``: the joblib launcher's per-job function, which the pool runs in its workers.
"""
from __future__ import annotations

from typing import Any

__all__ = ["apply_overrides",
           "joblib_execute_job", "overrides_dirname"]

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
