"""A Hydra callback: a single run passes the gate (grpo_sweep/launching/gate.py) before Hydra writes into its run dir.

A single run has no launcher, so this callback is its gate: its config, this machine (which trains it), and that
its directory holds no run started with another config (Hydra rewrites ``.hydra/`` before the task starts, so
the task's own check would come too late to keep that). A sweep is gated by its sweeper and its launcher
(``gate.py`` says which calls it where); only a sweeper that does not gate its sweep itself gets its base
config checked here. No torch is imported here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ..run.redact import redact
from ..run.validate import ConfigError
from .gate import check_choices, check_config, check_run, stop, telling_interrupts_apart, unexpected


def _job_config(config: DictConfig) -> DictConfig:
    return OmegaConf.masked_copy(config, [k for k in config if k != "hydra"])


def _gates_its_sweep(config: DictConfig) -> bool:
    """Whether the sweeper class this sweep instantiates plans every run itself (``gates_sweep``)."""
    from hydra.utils import get_class

    try:
        return bool(getattr(get_class(str(config.hydra.sweeper._target_)), "gates_sweep", False))
    except Exception:  # a sweeper Hydra cannot import fails on its own, with Hydra's message
        return False


class Preflight(Callback):
    # Hydra turns a callback's Exception into a warning and carries on; SystemExit stops the launch.
    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        given = OmegaConf.select(config, "hydra.overrides.hydra", default=None)
        # as typed: an override's value may hold an interpolation (hydra.run.dir=${...}), the gate's to check
        given = OmegaConf.to_container(given, resolve=False) if given is not None else []
        asked = [o for o in given if str(o).split("=", 1)[0].lstrip("+~") == "hydra/launcher"]
        launcher = str(asked[-1]).split("=", 1)[1] if asked else None
        if launcher and launcher not in ("local", "grpo_basic", "basic"):
            # Hydra starts a launcher only for -m: without it this run would train here, not where the command says
            # (a launcher chosen in a config file is a sweep's default, and a single run trains here as usual)
            raise SystemExit(
                f"grpo-sweep: hydra/launcher={launcher} starts the runs of a sweep (-m); add -m to run "
                f"this one there (python launch.py -m hydra/launcher={launcher} ...), or drop "
                "hydra/launcher to train it here"
            )
        job = _job_config(config)
        _gate(lambda: check_choices(config), job)
        _gate(lambda: check_run(job, Path(config.hydra.run.dir), trains_here=True), job)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        if _gates_its_sweep(config):
            return
        # another sweeper: its runs are its own to make up (each batch still passes the gate in grpo-sweep's
        # launchers); the base config they start from must be valid
        job = _job_config(config)
        _gate(lambda: check_config(job, trains_here=False), job)


def _gate(check: Any, job: DictConfig) -> None:
    """``check()``, its refusal (or anything else it raised but the user's Ctrl-C, ``gate.unexpected``) leaving as
    one line."""
    with telling_interrupts_apart() as pressed:
        try:
            check()
        except (ConfigError, OmegaConfBaseException) as exc:  # a value of the config: an interpolation that fails
            stop(exc)
        except BaseException as exc:
            failure = unexpected(exc, "", job, pressed)
            if failure is exc:
                raise
            raise SystemExit(redact(failure)) from None
