"""grpo-sweep's submitit launchers: hydra-submitit-launcher's, plus what a shared cluster needs.

Every launcher here goes through grpo_sweep's gate (``grpo_sweep/launching/gate.py``: ``GatedLauncher``) before any run
of its batch starts: each run composed, validated, its run directory checked, the launcher's resources checked.
hydra/launcher=local is Hydra's BasicLauncher with that gate.

On top of the stock submitit launcher (same config keys, same ``checkpoint()`` requeue contract):
- every run of the batch passes the gate on the submitting node, so a bad value fails before anything is queued;
- the job ids are recorded next to the runs (``<sweep_dir>/jobs.json``) for ``python -m grpo_sweep.sweeps.status``;
- ``detach=true`` returns right after submitting (log out; check later with the status command);
- a job that died without a result (cancelled, out of memory, node failure) is recorded as a failed run and
  the wait goes on for the others, where the stock launcher stops at the first one.

The local one (``hydra/launcher=submitit_local``: a subprocess per run) gets the same checks, and starts at most
``array_parallelism`` runs at a time (default: one per ``cpus_per_task`` cores): the stock one starts every run
at once, and 16 runs on 2 cores each took 64 s just to start (BENCHMARKS.md, scaling).

Hydra only instantiates launchers found under the ``hydra_plugins`` namespace, hence this package.
Imports stay light: Hydra imports every plugin module at start-up, on login nodes too.
"""

from dataclasses import dataclass
from typing import Any, Sequence

from hydra.core.config_store import ConfigStore
from hydra.core.utils import JobReturn
from hydra_plugins.hydra_joblib_launcher.joblib_launcher import JoblibLauncher
from hydra_plugins.hydra_submitit_launcher.config import LocalQueueConf, SlurmQueueConf
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import LocalLauncher, SlurmLauncher

from grpo_sweep.adapters.hydra import BasicLauncher, BasicLauncherConf
from grpo_sweep.adapters.submitit import executor_kind
from grpo_sweep.launching.gate import GatedLauncher


@dataclass
class GrpoSlurmQueueConf(SlurmQueueConf):
    _target_: str = "hydra_plugins.grpo_sweep_launcher.launcher.GrpoSlurmLauncher"
    # submit and return: print the job ids and the sweep dir, then `python -m grpo_sweep.sweeps.status <sweep_dir>`
    detach: bool = False
    # pass the gate, print what each job would run (resources, processes and their GPUs, batch), submit nothing
    dry_run: bool = False
    # runs that share one GPU (docs/launchers.md, "Several runs on one GPU"); 1: a GPU per run
    runs_per_gpu: Any = 1
    # one GPU's memory in GB, for the memory plan of runs_per_gpu; null: nvidia-smi's where the runs train here
    gpu_memory_gb: Any = None


@dataclass
class GrpoBasicLauncherConf(BasicLauncherConf):
    _target_: str = "hydra_plugins.grpo_sweep_launcher.launcher.GrpoBasicLauncher"


class GrpoBasicLauncher(GatedLauncher, BasicLauncher):
    """hydra/launcher=local: Hydra's BasicLauncher (the runs one after another in this process), gated."""

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        self.plan(job_overrides, initial_job_idx)
        return super().launch(job_overrides, initial_job_idx)


class _SubmitLaunch(GatedLauncher):
    """``launch`` is grpo_sweep.launching.submit's; everything else (the job side, the requeue on preemption/timeout) is
    the stock launcher's."""

    process_per_run = True  # a submitit job per run: a subprocess here, a SLURM job on a cluster

    def __call__(
        self, sweep_overrides: list[str], job_dir_key: str, job_num: int, job_id: str, singleton_state: dict
    ) -> JobReturn:
        """The job: the stock launcher's, except that the job's id is its number, as the gate planned its run
        directory (the stock one takes submitit's job id, known only once the job runs)."""
        from hydra.core.singleton import Singleton
        from hydra.core.utils import run_job, setup_globals
        from omegaconf import open_dict

        Singleton.set_state(singleton_state)
        setup_globals()
        sweep_config = self.hydra_context.config_loader.load_sweep_config(self.config, sweep_overrides)
        with open_dict(sweep_config.hydra.job) as job:
            job.id = job_num
            job.num = job_num
        slots = getattr(self, "_gpu_slots", None)  # submitit_local on a machine with GPUs: the pool's placement
        if slots and sweep_config.distributed.strategy == "none":
            from grpo_sweep.launching.placement import claim_gpu

            claim_gpu(*slots, wait_s=600.0)  # before the run initializes CUDA
        return run_job(
            hydra_context=self.hydra_context,
            task_function=self.task_function,
            config=sweep_config,
            job_dir_key=job_dir_key,
            job_subdir_key="hydra.sweep.subdir",
        )

    def check_resources(self) -> None:
        from grpo_sweep.launching import submit

        submit.check_resources(self.params, executor_kind(self))

    def run_world(self, cfg: Any) -> tuple:
        from grpo_sweep.launching import submit

        return submit.run_world(self.params, executor_kind(self), cfg)

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from grpo_sweep.launching import submit

        return submit.launch(self, job_overrides, initial_job_idx)

    def start(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Any:
        from grpo_sweep.launching import submit

        return submit.start(self, job_overrides, initial_job_idx)

    def concurrent_runs(self, wanted: int) -> int:
        from grpo_sweep.launching import submit

        limit = submit.local_parallelism(self)  # SLURM's own queue decides there
        return wanted if limit is None else max(1, min(limit, wanted))


class GrpoSlurmLauncher(_SubmitLaunch, SlurmLauncher):
    trains_here = False  # a compute node trains: its machine checks run there (app.run_task)

    def __init__(
        self,
        detach: bool = False,
        dry_run: bool = False,
        runs_per_gpu: Any = 1,
        gpu_memory_gb: Any = None,
        **params: Any,
    ) -> None:
        super().__init__(**params)
        self.detach, self.dry_run = detach, dry_run
        self.runs_per_gpu, self.gpu_memory_gb = runs_per_gpu, gpu_memory_gb


@dataclass
class GrpoLocalQueueConf(LocalQueueConf):
    _target_: str = "hydra_plugins.grpo_sweep_launcher.launcher.GrpoLocalLauncher"
    # runs at a time; null: the machine's cores // cpus_per_task (at least 1)
    array_parallelism: int | None = None
    # pass the gate, print what each job would run, start nothing
    dry_run: bool = False
    # runs that share one GPU (docs/launchers.md, "Several runs on one GPU"); 1: a GPU per run
    runs_per_gpu: Any = 1
    # one GPU's memory in GB, for the memory plan of runs_per_gpu; null: nvidia-smi's where the runs train here
    gpu_memory_gb: Any = None


class GrpoLocalLauncher(_SubmitLaunch, LocalLauncher):
    def __init__(
        self,
        array_parallelism: int | None = None,
        dry_run: bool = False,
        runs_per_gpu: Any = 1,
        gpu_memory_gb: Any = None,
        **params: Any,
    ) -> None:
        super().__init__(**params)
        self.array_parallelism, self.dry_run = array_parallelism, dry_run
        self.runs_per_gpu, self.gpu_memory_gb = runs_per_gpu, gpu_memory_gb


@dataclass
class GrpoPoolConf:
    _target_: str = "hydra_plugins.grpo_sweep_launcher.launcher.GrpoPoolLauncher"
    # worker processes; -1: one per CPU core, -2: all but one (joblib's convention)
    n_jobs: int = -1
    # pass the gate, print which runs share which GPU with their memory estimates, start nothing
    dry_run: bool = False
    # runs that share one GPU (docs/launchers.md, "Several runs on one GPU"); 1: a GPU per run
    runs_per_gpu: Any = 1
    # one GPU's memory in GB, for the memory plan of runs_per_gpu; null: nvidia-smi's where the runs train here
    gpu_memory_gb: Any = None


class GrpoPoolLauncher(GatedLauncher, JoblibLauncher):
    """hydra/launcher=pool: worker processes that run several runs each; a worker that dies costs one run, not
    the sweep (grpo_sweep/launching/pool.py)."""

    def __init__(
        self, n_jobs: int = -1, dry_run: bool = False, runs_per_gpu: Any = 1, gpu_memory_gb: Any = None
    ) -> None:
        super().__init__(n_jobs=n_jobs)
        self.n_jobs, self.dry_run = n_jobs, dry_run
        self.runs_per_gpu, self.gpu_memory_gb = runs_per_gpu, gpu_memory_gb

    def run_world(self, cfg: Any) -> tuple:
        from grpo_sweep.launching import pool

        if cfg.distributed.strategy != "none" and pool.visible_gpus():
            from grpo_sweep.launching.submit import SubmitError

            raise SubmitError(
                f"distributed={cfg.distributed.strategy} with hydra/launcher=pool: the pool pins each worker to one "
                "GPU, so a run's processes would share it; train multi-GPU runs with hydra/launcher=local (one after "
                "another, each over the machine's GPUs) or hydra/launcher=slurm"
            )
        return cfg.distributed.nproc_per_node, 1, None

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from grpo_sweep.launching import pool

        return pool.launch(self, job_overrides, initial_job_idx)

    def start(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Any:
        from grpo_sweep.launching import pool

        return pool.start(self, job_overrides, initial_job_idx)

    def concurrent_runs(self, wanted: int) -> int:
        from grpo_sweep.launching import pool

        k = self.runs_per_gpu if isinstance(self.runs_per_gpu, int) and self.runs_per_gpu > 0 else 1  # gated later
        return pool.pool_size(self.n_jobs, wanted, pool.visible_gpus(), k)


ConfigStore.instance().store(
    group="hydra/launcher", name="grpo_submitit_slurm", node=GrpoSlurmQueueConf(), provider="grpo_sweep"
)
ConfigStore.instance().store(
    group="hydra/launcher", name="grpo_submitit_local", node=GrpoLocalQueueConf(), provider="grpo_sweep"
)  # also stored as "submitit_local", over the stock entry: grpo_sweep.configstore.register_configs
ConfigStore.instance().store(
    group="hydra/launcher", name="grpo_basic", node=GrpoBasicLauncherConf, provider="grpo_sweep"
)
ConfigStore.instance().store(group="hydra/launcher", name="grpo_pool", node=GrpoPoolConf, provider="grpo_sweep")
