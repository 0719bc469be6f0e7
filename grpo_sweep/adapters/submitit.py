"""hydra-submitit-launcher internals (1.2) that grpo-sweep's batched submission relies on.

- ``executor_kind``: which submitit executor a launcher class drives (``_EXECUTOR``: ``"local"`` or ``"slurm"``).
- ``process_per_job``: whether a launcher is one of its launchers (a process per job), read off ``_EXECUTOR``.
- ``make_executor``: the submitit executor a launcher's ``params`` describe, set up as the stock launcher's
  ``launch`` does it (its folder and max_num_timeout to the constructor, keys of ``BaseQueueConf`` as they are,
  the others prefixed with the executor kind); the stock launcher builds it inside ``launch`` only.
- ``job_arguments`` / ``run_job`` / ``requeue``: the stock launcher's job side is its ``__call__(sweep_overrides,
  job_dir_key, job_num, job_id, singleton_state)`` and ``checkpoint`` with the same positional arguments.
"""

from __future__ import annotations

from typing import Any

JOB_ARGUMENTS = ("sweep_overrides", "job_dir_key", "job_num", "job_id", "singleton_state")


def executor_kind(launcher: Any) -> str:
    return launcher._EXECUTOR


def job_arguments(overrides: list[str], job_num: int) -> tuple:
    """The per-job arguments before Hydra's state, as the stock launcher submits them."""
    return (list(overrides), "hydra.sweep.dir", job_num, f"job_id_for_{job_num}")


def run_job(launcher: Any, arguments: tuple, state: Any) -> Any:
    return launcher(*arguments, state)


def requeue(launcher: Any, arguments: tuple, state: Any) -> Any:
    return launcher.checkpoint(*arguments, state)


def process_per_job(launcher: Any) -> bool:
    """Whether ``launcher`` is one of hydra-submitit-launcher's, which start every job in a process of its own
    (a submitit job: a subprocess locally, a SLURM job on a cluster)."""
    return getattr(launcher, "_EXECUTOR", None) in ("local", "slurm")


def make_executor(launcher: Any):
    import submitit
    from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
    from omegaconf import OmegaConf

    kind = executor_kind(launcher)
    params = dict(launcher.params)
    init = {"folder": params.pop("submitit_folder")}
    if "max_num_timeout" in params:
        init[f"{kind}_max_num_timeout"] = params.pop("max_num_timeout")
    executor = submitit.AutoExecutor(cluster=kind, **init)
    base = set(OmegaConf.structured(BaseQueueConf).keys())
    executor.update_parameters(**{k if k in base else f"{kind}_{k}": v for k, v in params.items()})
    return executor
