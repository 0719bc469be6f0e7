"""The gate: every run of a sweep is planned here (composed, validated, its run directory checked, its resources
checked) before any run starts, whichever launcher starts them.

Who calls it: every grpo-sweep launcher (``GatedLauncher``: hydra/launcher=local, pool, submitit_local, slurm)
before it starts or submits its batch, so a bad run in the batch stops all of it; the ``grpo_basic`` sweeper for
the whole sweep before its first batch (a sweep in several batches must not run batch 1 when batch 2 is bad), and
hands that plan to the launcher so that no run is composed twice; the Optuna sweeper for its base config and
every config-group choice of its space (``check_config``), and the Optuna workers for every trial
(``check_run``); the Preflight callback for a single run, and the training process itself (``app.run_task``) for
what only the machine that trains can answer.

A refusal is one line naming the run and the bad value: ``plan_runs`` raises ``Refused``, and where Hydra would
print it (launchers, sweepers) it leaves as SystemExit with that line: Hydra adds a line of its own to an
exception, even a CompactHydraException. No torch is imported here.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, NoReturn, Sequence

from hydra.errors import CompactHydraException

from .resume import ResumeError, check_same_run
from .validate import ConfigError, check_machine, validate


class Refused(ConfigError, CompactHydraException):
    """A run that cannot work, found before any run started; Hydra prints it as one line, without a traceback."""


def check_config(cfg: Any, trains_here: bool) -> None:
    """The config's own values; with ``trains_here``, also what this machine must have to train it (GPU,
    packages, the code reward's sandbox)."""
    validate(cfg)
    if trains_here:
        check_machine(cfg)


def check_run(cfg: Any, run_dir: Path | None, trains_here: bool) -> None:
    """``check_config``, and that ``run_dir`` holds no run started with another config. Raises ConfigError."""
    check_config(cfg, trains_here)
    if run_dir is not None:
        try:
            check_same_run(run_dir, cfg)  # a sweep dir re-used for another sweep
        except ResumeError as exc:
            raise ConfigError(str(exc)) from None


def stop(exc: ConfigError) -> NoReturn:
    """Leave the launch with the refusal's one line (exit status 1)."""
    text = str(exc)
    raise SystemExit(text if text.startswith("grpo-sweep: ") else f"grpo-sweep: {text}") from None


class GatedLauncher:
    """A launcher whose batch goes through the gate before any of its runs starts (mixed into each of
    grpo-sweep's launchers)."""

    # whether the runs train on this machine (then this machine's own checks are part of the plan)
    trains_here: bool = True

    def check_resources(self) -> None:
        """What the launcher itself needs (a scheduler, sane per-job resources); raise Refused if it is missing."""

    def plan(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list[Path]:
        """Each run's directory, after the gate passed the whole batch; exits with the refusal before anything starts."""
        try:
            return plan_runs(self, job_overrides, initial_job_idx)
        except Refused as exc:
            stop(exc)


def _key(num: int, overrides: Sequence[str]) -> tuple:
    return num, tuple(overrides)


def plan_runs(launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int,
              config: Any = None, loader: Any = None) -> list[Path]:
    """Compose every run as its job will, check it (``check_run``) and the launcher's resources; return each
    run's directory. The first bad run raises Refused naming it and its value: nothing has started then.

    ``launcher`` is the one that will start the runs: a ``GatedLauncher`` brings its resource check and where
    its runs train, and keeps the plan, so that its own call for a batch the sweeper planned costs nothing. Any
    other launcher (Hydra's stock ones) gets the config checks only (``config``/``loader`` then say what to
    compose with).
    """
    from .submit import compose_runs, numbered_run_dir
    from .sweep import varying_overrides

    gated = isinstance(launcher, GatedLauncher)
    planned: dict = getattr(launcher, "_gate_planned", {}) if gated else {}
    keys = [_key(num, o) for num, o in enumerate(job_overrides, start=initial_job_idx)]
    if keys and all(k in planned for k in keys):
        return [planned[k] for k in keys]
    config = launcher.config if config is None else config
    loader = launcher.hydra_context.config_loader if loader is None else loader
    if gated:
        launcher.check_resources()
    trains_here = gated and launcher.trains_here
    shown = varying_overrides([{"overrides": list(o)} for o in job_overrides])
    run_dirs: list[Path] = []
    sweep_dirs: dict = {}
    for key, cfg, swept in zip(keys, compose_runs(loader, config, job_overrides), shown):
        num = key[0]
        run_dir = numbered_run_dir(cfg, num, sweep_dirs)
        try:
            check_run(cfg, run_dir, trains_here)
        except ConfigError as exc:
            raise Refused(f"grpo-sweep: job {num} ({' '.join(swept) or 'defaults'}): {exc}; no run was started") from None
        run_dirs.append(run_dir)
    if gated:
        launcher._gate_planned = {**planned, **dict(zip(keys, run_dirs))}
    return run_dirs
