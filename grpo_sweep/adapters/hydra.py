"""Hydra internals grpo-sweep builds on (hydra-core 1.3): no public API gives these.

- ``apply_overrides``: set plain ``key=value`` overrides on a composed config exactly as Hydra does after merging
  (``ConfigLoaderImpl._apply_overrides_to_config``), so that runs differing only in values are composed once.
- ``overrides_dirname``: Hydra's ``override_dirname`` for a list of overrides.
- ``BasicLauncher``/``BasicSweeper`` (and their configs): the stock launcher and sweeper that the gated ones extend.
- ``joblib_execute_job``: the joblib launcher's per-job function, which the pool runs in its workers.
"""
from __future__ import annotations

from typing import Any

from hydra._internal.config_loader_impl import ConfigLoaderImpl, get_overrides_dirname
from hydra._internal.core_plugins.basic_launcher import BasicLauncher, BasicLauncherConf
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper, BasicSweeperConf

__all__ = ["BasicLauncher", "BasicLauncherConf", "BasicSweeper", "BasicSweeperConf", "apply_overrides",
           "joblib_execute_job", "overrides_dirname"]


def apply_overrides(overrides: list, cfg: Any) -> None:
    ConfigLoaderImpl._apply_overrides_to_config(overrides, cfg)


def overrides_dirname(overrides: list, exclude_keys: list, item_sep: str, kv_sep: str) -> str:
    return get_overrides_dirname(overrides=overrides, exclude_keys=exclude_keys, item_sep=item_sep, kv_sep=kv_sep)


def joblib_execute_job(*args: Any) -> Any:
    from hydra_plugins.hydra_joblib_launcher._core import execute_job

    return execute_job(*args)
