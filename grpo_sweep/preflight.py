"""A Hydra callback that checks every job of a run or sweep before anything runs or Hydra writes into a run dir.

On the machine that launches: each job's config is valid (grpo-sweep's submitit launchers check their jobs
themselves, ``submit.plan_runs``; both compose a batch with ``submit.compose_runs``, once per set of config
groups, and the grpo_basic sweeper then skips Hydra's own trial compose of every run), and no job would write into a directory that holds another run
(``resume.check_same_run``; Hydra rewrites ``.hydra/`` before the task starts, so the task's own check comes
too late to keep that). Machine checks (GPU, packages, sandbox) happen on the machine that trains
(``app.run_task``). No torch is imported here.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from .resume import ResumeError, check_same_run
from .validate import ConfigError, validate

# launchers that validate every job themselves before submitting
SELF_VALIDATING = ("grpo_sweep_launcher",)


def _job_config(config: DictConfig) -> DictConfig:
    job = OmegaConf.masked_copy(config, [k for k in config if k != "hydra"])
    return job


def _check_job(config: DictConfig, run_dir: Path) -> None:
    job = _job_config(config)
    validate(job)
    try:
        check_same_run(run_dir, job)
    except ResumeError as exc:
        raise ConfigError(str(exc)) from None


def _sweep_jobs(config: DictConfig) -> list[list[str]] | None:
    """Each job's overrides, as the BasicSweeper will launch them; None for other sweepers."""
    if not str(config.hydra.sweeper.get("_target_", "")).endswith("BasicSweeper"):
        return None
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    params = [f"{k}={v}" for k, v in (config.hydra.sweeper.get("params") or {}).items()]
    parsed = OverridesParser.create().parse_overrides(params + list(config.hydra.overrides.task))
    return BasicSweeper.split_arguments(parsed, None)[0]


class Preflight(Callback):
    # Hydra turns a callback's Exception into a warning and carries on; SystemExit stops the launch.
    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            _check_job(config, Path(config.hydra.run.dir))
        except ConfigError as exc:
            raise SystemExit(f"grpo-sweep: {exc}") from None

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            self._check_sweep(config)
        except ConfigError as exc:
            raise SystemExit(f"grpo-sweep: {exc}") from None

    def _check_sweep(self, config: DictConfig) -> None:
        launcher = str(config.hydra.launcher.get("_target_", ""))
        if any(name in launcher for name in SELF_VALIDATING):
            return  # it composes every job once and checks values and run dirs itself (submit.plan_runs)
        jobs = _sweep_jobs(config)
        if jobs is None:
            validate(_job_config(config))  # the search space is the sweeper's; check the base config
            return
        from hydra.core.global_hydra import GlobalHydra

        from .submit import compose_runs, numbered_run_dir

        loader = GlobalHydra.instance().config_loader()
        for num, (overrides, job) in enumerate(zip(jobs, compose_runs(loader, config, jobs))):
            try:
                _check_job(job, numbered_run_dir(job, num))
            except ConfigError as exc:
                raise ConfigError(f"job {num} ({' '.join(overrides)}): {exc}") from None
