"""What a run is told about how it was launched: computed once, where the task starts (``app.run_task``), and
handed down to training, tracking and the Optuna worker. Nothing below asks Hydra or compares a ``_target_``.

The launchers and the sweeper say what they are through the job's environment, set with Hydra's own
``hydra.job.env_set`` (or the pool worker's environment): ``GRPO_SWEEP_ROLE=optuna_worker`` for the jobs of
grpo-sweep's Optuna sweeper, ``GRPO_SWEEP_POOL_WORKERS=N`` for runs side by side in a pool.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

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

    @property
    def multirun(self) -> bool:
        return self.sweep_dir is not None

    def for_trial(self, trial_dir: Path, overrides: list[str]) -> "RunContext":
        """The context of one trial that this Optuna worker trains."""
        return RunContext(trial_dir, list(overrides), self.sweep_dir, self.optuna_worker, self.shares_terminal)


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
    )
