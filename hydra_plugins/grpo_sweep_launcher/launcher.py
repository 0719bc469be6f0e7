"""grpo-sweep's SLURM launcher: hydra-submitit-launcher's, plus what a shared cluster needs.

On top of the stock launcher (same config keys, same ``checkpoint()`` requeue contract):
- every run of the batch is validated on the submitting node, so a bad value fails before anything is queued;
- the job ids are recorded next to the runs (``<sweep_dir>/jobs.json``) for ``python -m grpo_sweep.status``;
- ``detach=true`` returns right after submitting (log out; check later with the status command);
- a job that died without a result (cancelled, out of memory, node failure) is recorded as a failed run and
  the wait goes on for the others, where the stock launcher stops at the first one.

Hydra only instantiates launchers found under the ``hydra_plugins`` namespace, hence this package.
Imports stay light: Hydra imports every plugin module at start-up, on login nodes too.
"""

from dataclasses import dataclass
from typing import Any, Sequence

from hydra.core.config_store import ConfigStore
from hydra.core.utils import JobReturn
from hydra_plugins.hydra_submitit_launcher.config import SlurmQueueConf
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher


@dataclass
class GrpoSlurmQueueConf(SlurmQueueConf):
    _target_: str = "hydra_plugins.grpo_sweep_launcher.launcher.GrpoSlurmLauncher"
    # submit and return: print the job ids and the sweep dir, then `python -m grpo_sweep.status <sweep_dir>`
    detach: bool = False


class GrpoSlurmLauncher(SlurmLauncher):
    """Everything but ``launch`` (the job side, the requeue on preemption/timeout) is the stock launcher's."""

    def __init__(self, detach: bool = False, **params: Any) -> None:
        super().__init__(**params)
        self.detach = detach

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from grpo_sweep import submit

        return submit.launch(self, job_overrides, initial_job_idx)


ConfigStore.instance().store(
    group="hydra/launcher", name="grpo_submitit_slurm", node=GrpoSlurmQueueConf(), provider="grpo_sweep"
)
