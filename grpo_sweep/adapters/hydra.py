"""Hydra internals grpo-sweep builds on (hydra-core 1.3): no public API gives these.

- ``apply_overrides``: set plain ``key=value`` overrides on a composed config exactly as Hydra does after merging
  (``ConfigLoaderImpl._apply_overrides_to_config``), so that runs differing only in values are composed once.
- ``overrides_dirname``: Hydra's ``override_dirname`` for a list of overrides.
- ``BasicLauncher``/``BasicSweeper`` (and their configs): the stock launcher and sweeper that the gated ones extend.
- ``is_config_group``: whether a name is a config group, asked of the config loader's repository.
- ``sweep_jobs``: every job of a BasicSweeper's sweep, as its ``sweep()`` will split the sweep into batches (it
  writes the sweep's ``multirun.yaml`` before it checks a batch); ``grid_jobs``: the grid its ``split_arguments``
  expands, for a sweeper that runs it another way.
- ``store_over_plugin``: put a ConfigStore entry over one a plugin module stores under the same name.
- ``one_line_errors``: Hydra's report of a composition error (``run_and_report``: the message, OmegaConf's detail
  lines, the options, the search path, a hint about ``HYDRA_FULL_ERROR``) as one line.
"""

from __future__ import annotations

import contextlib
import errno
import os
from typing import Any, Iterator

__all__ = [
    "apply_overrides",
    "compose_error_line",
    "grid_jobs",
    "is_config_group",
    "one_line_errors",
    "overrides_dirname",
    "store_over_plugin",
    "sweep_jobs",
]

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


def is_config_group(loader: Any, name: str) -> bool:
    """``loader``: Hydra's ConfigLoaderImpl; its ``repository`` is not part of the ConfigLoader interface."""
    return bool(loader.repository.group_exists(name))


def sweep_jobs(sweeper: Any, arguments: list[str]) -> list[list[str]]:
    """Every job of the sweep a BasicSweeper (set up: ``params``, ``max_batch_size``, ``hydra_context``) runs for
    the command line's ``arguments``, in order, each as its overrides; its batches split them as this joins them."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create(config_loader=sweeper.hydra_context.config_loader)
    overrides = parser.parse_overrides([*sweeper._parse_config(), *arguments])
    return [job for batch in sweeper.split_arguments(overrides, sweeper.max_batch_size) for job in batch]


def grid_jobs(loader: Any, arguments: list[str]) -> list[list[str]]:
    """The command line's grid as Hydra's BasicSweeper expands it (every combination of the swept values, in its
    order), each as its overrides: what another sweeper runs its own way (hydra/sweeper=seeds)."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    overrides = OverridesParser.create(config_loader=loader).parse_overrides(list(arguments))
    return [list(job) for job in BasicSweeper.split_arguments(overrides, None)[0]]


def store_over_plugin(group: str, name: str, node: Any, provider: str) -> None:
    """Store ``node`` as ``group/name`` over the entry a plugin module stores under that name. Hydra's plugin scan
    (once per process) re-executes every plugin module, which would store the plugin's entry again over ours:
    scanning first makes this store the last."""
    from hydra.core.config_store import ConfigStore
    from hydra.core.plugins import Plugins

    Plugins.instance()
    ConfigStore.instance().store(group=group, name=name, node=node, provider=provider)


def compose_error_line(exc: BaseException) -> str:
    """One line of Hydra's words for a composition error (a HydraException): its message, the first line
    of OmegaConf's cause (the rest is the node's key and types), the options of a group where it lists them (not
    the config search path), and the override a parse error is about (its message does not name it)."""
    from hydra.errors import MissingConfigException, OverrideParseException
    from omegaconf.errors import OmegaConfBaseException

    text = str(exc)
    options = getattr(exc, "options", None) if isinstance(exc, MissingConfigException) else None
    if isinstance(exc, MissingConfigException):
        text = text.split("\n\n", 1)[0]  # then the options and the search path, one a line
    lines = [line.strip() for line in text.splitlines() if line.strip()] or [type(exc).__name__]
    head = lines[0].rstrip(".")
    if isinstance(exc, OverrideParseException) and exc.override:
        head = f"{exc.override}: {head}"
    if isinstance(exc.__cause__, OmegaConfBaseException) and str(exc.__cause__).strip():
        head = f"{head}: {str(exc.__cause__).strip().splitlines()[0]}"
    rest = [line.rstrip(".") for line in lines[1:]]
    if options:
        rest.append(f"options: {', '.join(options)}")
    return "; ".join([head, *rest])


def name_too_long(path: Any) -> str:
    """The line for a path the file system refused as too long: the value that made it named, cut short."""
    parent, name = os.path.split(str(path))
    cut = name if len(name) <= 40 else f"{name[:40]}... ({len(name)} characters)"
    return (
        f"{os.path.basename(parent)}/{cut}: a value makes a file name longer than the file system allows "
        "(255 bytes); give a shorter one"
    )


@contextlib.contextmanager
def one_line_errors(prefix: str) -> Iterator[None]:
    """While it lasts, a composition error (any HydraException) that Hydra's ``run_and_report`` would print in 5
    to 17 lines, or as a traceback, ends the process with ``prefix`` and ``compose_error_line`` (exit status 1).
    With HYDRA_FULL_ERROR=1 Hydra reports it as it does (the whole trace); any other exception is Hydra's to
    report."""
    from hydra._internal import utils
    from hydra.errors import HydraException

    report = utils.run_and_report

    def run_and_report(func: Any) -> Any:
        def compact() -> Any:
            try:
                return func()
            except HydraException as exc:  # Hydra's word for what it was given (a sweep type its sweeper lacks...)
                if os.environ.get("HYDRA_FULL_ERROR") == "1":
                    raise
                line = compose_error_line(exc)
                raise SystemExit(line if line.startswith(prefix) else prefix + line) from None
            except OSError as exc:  # a value that names a file (a config group's choice) too long for the file system
                if exc.errno != errno.ENAMETOOLONG or os.environ.get("HYDRA_FULL_ERROR") == "1":
                    raise
                raise SystemExit(prefix + name_too_long(exc.filename)) from None

        return report(compact)

    utils.run_and_report = run_and_report
    try:
        yield
    finally:
        utils.run_and_report = report
