"""What a run is told about how it was launched: computed once, where the task starts (``app.run_task``), and
handed down to the run (``lifecycle.run_one``), training, tracking and the Optuna worker. Nothing below asks Hydra
or compares a ``_target_``.

The launchers and the sweeper say what they are through the job's environment, set with Hydra's own
``hydra.job.env_set`` (or the pool worker's environment): ``GRPO_SWEEP_ROLE=optuna_worker`` for the jobs of
grpo-sweep's Optuna sweeper, ``GRPO_SWEEP_POOL_WORKERS=N`` for runs side by side in a pool.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..rewards.registry import LAUNCH_DIR_ENV

ROLE_ENV = "GRPO_SWEEP_ROLE"
OPTUNA_WORKER = "optuna_worker"
# set in every pool worker: how many workers run side by side (runs then print no progress bar each)
WORKERS_ENV = "GRPO_SWEEP_POOL_WORKERS"


@dataclass(frozen=True)
class RunContext:
    run_dir: Path
    overrides: list[str] = field(default_factory=list)
    # one job of a `-m` sweep; its directory (None for a single run)
    sweep_dir: Path | None = None
    # a worker job of grpo-sweep's Optuna sweeper: it trains trials, each run is a trial
    optuna_worker: bool = False
    # runs side by side share this terminal: one progress bar each would garble it
    shares_terminal: bool = False
    # the option chosen in each config group (``{"reward_mix": "format", "lora": "wide"}``), Hydra's own left out:
    # what a dashboard groups runs by (the config holds only the options' expanded contents)
    choices: dict[str, str] = field(default_factory=dict)
    # this process's place in a run of several processes (distributed=...): rank 0 writes the run's files
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    nodes: int = 1
    # a rank that torchrun's engine started from the run's own process (distributed.launch_here): that process
    # records how the run ended, not the rank (lifecycle.run_one)
    parent_records: bool = False

    @property
    def main(self) -> bool:
        return self.rank == 0

    def for_rank(self, rank: Any, parent_records: bool = False) -> RunContext:
        """The same run, as process ``rank`` (a ``distributed.Rank``) of several trains it."""
        return replace(
            self,
            rank=rank.rank,
            local_rank=rank.local_rank,
            world_size=rank.world_size,
            nodes=rank.nodes,
            parent_records=parent_records,
        )

    @property
    def multirun(self) -> bool:
        return self.sweep_dir is not None

    def for_trial(self, trial_dir: Path, overrides: list[str]) -> RunContext:
        """The context of one trial that this Optuna worker trains: a trial's override of a group (a searched
        ``reward_mix``) is that group's choice for the trial."""
        choices = dict(self.choices)
        for override in overrides:
            key, _, value = override.partition("=")
            if key.lstrip("+~") in choices:
                choices[key.lstrip("+~")] = value
        return replace(self, run_dir=trial_dir, overrides=list(overrides), choices=choices)


def from_hydra() -> RunContext:
    """The context of the Hydra job running now (call once, at the top of the task)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    hydra_cfg = HydraConfig.get()
    multirun = hydra_cfg.mode == RunMode.MULTIRUN
    run_dir = Path(hydra_cfg.runtime.output_dir)
    sweep_dir = None
    if multirun:
        # The job's output dir is <sweep.dir>/<sweep.subdir>: walk up as many parts as the subdir has. Reading the
        # realised path (not re-resolving sweep.dir's ${now:} interpolation) gives every job, in any process, the
        # same answer.
        sweep_dir = run_dir.resolve().parents[len(Path(str(hydra_cfg.sweep.subdir)).parts) - 1]
    return RunContext(
        run_dir=run_dir,
        overrides=list(hydra_cfg.overrides.task),
        sweep_dir=sweep_dir,
        optuna_worker=multirun and os.environ.get(ROLE_ENV) == OPTUNA_WORKER,
        shares_terminal=int(os.environ.get(WORKERS_ENV, "1")) > 1,
        choices=group_choices(hydra_cfg.runtime.choices),
    )


def group_choices(choices) -> dict[str, str]:
    """Hydra's ``runtime.choices`` without its own groups (``hydra/launcher``, ...) and unset ones (``debug: null``)."""
    return {
        str(group): str(option)
        for group, option in dict(choices).items()
        if option is not None and not str(group).split("/", 1)[0] == "hydra"
    }


def launch_import_path() -> list[str]:
    """Where the user's own modules (a reward's ``fn``, a factory) import from in every process of a launch started
    here: the launch directory (the working directory of ``python launch.py``, which ``python -m`` would put on
    sys.path), then PYTHONPATH's entries, made absolute (a job may start elsewhere)."""
    paths = [os.getcwd(), *(os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)]
    return list(dict.fromkeys(paths))


def use_import_path(paths: list[str]) -> None:
    """Make ``paths`` (a ``launch_import_path``: the launch directory first) this process's import path and that of
    every process it starts (pool workers, submitit jobs and a run's ranks inherit its environment): on sys.path
    after the script's own directory, where PYTHONPATH's entries go, and in PYTHONPATH. Called where a launch
    starts, and where a submitit job starts with what the launch carried to it (a SLURM job's environment is the
    scheduler's, which need not be the launch's)."""
    os.environ[LAUNCH_DIR_ENV] = paths[0]
    sys.path[1:1] = [p for p in paths if p not in sys.path]
    given = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([*paths, *given]))
