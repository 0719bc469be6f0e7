"""hydra/launcher=pool: the runs of a sweep side by side in worker processes that each run several of them.

A fresh process spends ~6 s starting (interpreter, torch/trl imports) before a short CPU run trains for ~2 s;
a worker pays that once. The workers are loky's (the process pool joblib uses, vendored by joblib), and each run
is a Hydra job as hydra-joblib-launcher's job code makes it (``execute_job``), so a run is the same Hydra job as
under any other launcher.

Not joblib.Parallel as the stock joblib launcher does it: when a worker process dies (killed for memory, a
segfault in native code), Parallel abandons the whole sweep. Here at most one run per worker is in flight; the
runs in flight when a worker died are run again one at a time, so the run that kills its process is found and
recorded as failed, and every other run still runs.

Before any worker starts, every run of the batch passes the gate (grpo_sweep/launching/gate.py): one bad run, and
none runs.

On a machine with NVIDIA GPUs there is one worker per GPU (at most), each pinned to its own GPU through
CUDA_VISIBLE_DEVICES before it imports torch; the CPU cores otherwise.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from ..run.context import WORKERS_ENV
from .placement import claim_gpu, slots, visible_gpus

log = logging.getLogger(__name__)

__all__ = ["claim_gpu", "launch", "pool_size", "slots", "start", "visible_gpus"]


def pool_size(n_jobs: int, runs: int, gpus: list[str], runs_per_gpu: int = 1) -> int:
    """Workers: n_jobs as joblib counts it (-1 all cores, -2 all but one), ``runs_per_gpu`` per GPU at most where
    there are GPUs (n_jobs=-1 there: that many per GPU), never more than the runs."""
    from joblib import effective_n_jobs

    capacity = len(gpus) * runs_per_gpu
    wanted = capacity if gpus and n_jobs < 0 else effective_n_jobs(n_jobs)
    if gpus and wanted > capacity:
        log.warning(
            "hydra.launcher.n_jobs=%d: %d GPUs x runs_per_gpu=%d, so %d workers",
            n_jobs,
            len(gpus),
            runs_per_gpu,
            capacity,
        )
        wanted = capacity
    return max(1, min(wanted, runs))


class _Drain:
    """Runs ``indices`` with at most ``workers`` in flight: results by index, and [(index, error)] of runs whose
    worker died. Queued runs are kept out of the executor so that a dying worker only takes the runs in flight with
    it. ``done()`` moves it on without waiting (a batch started and left running), ``wait()`` to its end."""

    def __init__(self, submit: Callable[[int], Any], indices: Iterable[int], workers: int) -> None:
        self.submit, self.queue, self.workers = submit, list(indices), workers
        self.in_flight: dict = {}
        self.results: dict = {}
        self.lost: list = []

    def _step(self, block: bool) -> None:
        from concurrent.futures import FIRST_COMPLETED, wait

        from ..adapters.loky import BrokenProcessPool

        while self.queue and len(self.in_flight) < self.workers:
            index = self.queue.pop(0)
            self.in_flight[self.submit(index)] = index
        if not self.in_flight:
            return
        finished, _ = wait(self.in_flight, timeout=None if block else 0, return_when=FIRST_COMPLETED)
        for future in finished:
            index = self.in_flight.pop(future)
            try:
                self.results[index] = future.result()
            except BrokenProcessPool as exc:  # TerminatedWorkerError included
                self.lost.append((index, exc))

    def done(self) -> bool:
        self._step(block=False)
        return not self.queue and not self.in_flight

    def wait(self) -> tuple[dict, list]:
        while self.queue or self.in_flight:
            self._step(block=True)
        return self.results, self.lost


def execute_job(
    idx: int, overrides: Sequence[str], hydra_context: Any, config: Any, task_function: Any, singleton_state: Any
) -> Any:
    """One run in a worker: hydra-joblib-launcher's job code, except that the job's id is its number, as the gate
    planned its run directory (joblib's is ``<job name>_<number>``: hydra.sweep.subdir=j${hydra.job.id} would land
    elsewhere than planned)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.core.singleton import Singleton
    from hydra.core.utils import run_job, setup_globals
    from omegaconf import open_dict

    setup_globals()
    Singleton.set_state(singleton_state)
    sweep_config = hydra_context.config_loader.load_sweep_config(config, list(overrides))
    with open_dict(sweep_config):
        sweep_config.hydra.job.id = idx
        sweep_config.hydra.job.num = idx
    HydraConfig.instance().set_config(sweep_config)
    return run_job(
        hydra_context=hydra_context,
        config=sweep_config,
        task_function=task_function,
        job_dir_key="hydra.sweep.dir",
        job_subdir_key="hydra.sweep.subdir",
    )


def launch(launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list:
    return start(launcher, job_overrides, initial_job_idx).results()


def start(launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int):
    """Start the batch on the pool's workers and return; the handle's ``results()`` waits for it (``launch``)."""
    from hydra.core.singleton import Singleton
    from hydra.core.utils import configure_log, filter_overrides, setup_globals

    from ..adapters.loky import get_reusable_executor, worker_exit_codes
    from .gate import Started
    from .memory import write_estimates
    from .submit import lost_run_return

    run_dirs = launcher.plan(job_overrides, initial_job_idx)  # the gate: every run passes, or none starts
    k = getattr(launcher, "runs_per_gpu", 1)
    memory_plan = getattr(launcher, "_memory_plan", None)
    if getattr(launcher, "dry_run", False):
        print(describe_pool(launcher, job_overrides, run_dirs, visible_gpus()), flush=True)
        raise SystemExit(0)
    setup_globals()
    configure_log(launcher.config.hydra.hydra_logging, launcher.config.hydra.verbose)
    sweep_dir = Path(str(launcher.config.hydra.sweep.dir))
    sweep_dir.mkdir(parents=True, exist_ok=True)
    gpus = visible_gpus()
    # batches kept in flight side by side (runs_at_once) share one executor of that size: a batch of one sized to
    # itself would shrink the others' to one worker
    workers = pool_size(launcher.n_jobs, max(len(job_overrides), launcher.runs_at_once or 0), gpus, k)
    if not gpus:
        where = "on the CPUs"
    elif k == 1:
        where = f"each on its own GPU of {', '.join(gpus)}"
    else:
        where = f"{k} a GPU on GPUs {', '.join(gpus)}"
    log.info(
        "Launching %d runs on %d worker processes %s, sweep output dir: %s",
        len(job_overrides),
        workers,
        where,
        sweep_dir,
    )
    for idx, overrides in enumerate(job_overrides, start=initial_job_idx):
        log.info("\t#%d : %s", idx, " ".join(filter_overrides(overrides)))
    state = Singleton.get_state()
    lock_dir = sweep_dir / ".gpu_locks"  # the sweep's own: nothing left behind elsewhere
    if gpus:
        lock_dir.mkdir(exist_ok=True)
        write_estimates(lock_dir, run_dirs, memory_plan)
    pinning = {"initializer": claim_gpu, "initargs": (str(lock_dir), gpus, k)} if gpus else {}

    def submitter(max_workers: int) -> Callable[[int], Any]:
        def submit(index: int):
            # the same executor while its workers live; a new one after a worker died (loky's reuse rule). Idle
            # workers stay 5 minutes (loky's default is 10 s), so a later batch finds them with torch imported.
            executor = get_reusable_executor(
                max_workers=max_workers, timeout=300, env={WORKERS_ENV: str(workers)}, **pinning
            )
            return executor.submit(
                execute_job,
                initial_job_idx + index,
                job_overrides[index],
                launcher.hydra_context,
                launcher.config,
                launcher.task_function,
                state,
            )

        return submit

    batch = _Drain(submitter(workers), range(len(job_overrides)), workers)

    def results() -> list:
        done, lost = batch.wait()
        if lost:
            log.warning(
                "a worker process died with runs %s in flight; running them again one at a time",
                ", ".join(str(initial_job_idx + i) for i, _ in lost),
            )
            # alone, to find the run that kills its worker; batches in flight beside this one keep their executor's
            # size (each of their runs is alone in its batch already)
            alone = workers if launcher.runs_at_once else 1
            again, lost = _Drain(submitter(alone), [i for i, _ in lost], 1).wait()
            done.update(again)
        for index, exc in lost:
            overrides = list(job_overrides[index])
            codes = worker_exit_codes(exc)
            error = (
                f"its worker process died ({codes or type(exc).__name__}) while it ran, and "
                "again when it ran alone: killed for memory? a crash in native code?"
            )
            log.error("run %d (%s): %s", initial_job_idx + index, " ".join(overrides), error)
            done[index] = lost_run_return(overrides, run_dirs[index], error, str(exc))
        return [done[i] for i in range(len(job_overrides))]

    return Started(batch.done, results)


def describe_pool(launcher: Any, job_overrides: Sequence[Sequence[str]], run_dirs: list[Path], gpus: list[str]) -> str:
    """hydra.launcher.dry_run=true on the pool: its workers, where each would train, and the memory plan."""
    from ..reading.results import varying_overrides

    k = getattr(launcher, "runs_per_gpu", 1)
    workers = pool_size(launcher.n_jobs, len(job_overrides), gpus, k)
    order = slots(gpus, k) if gpus else []
    lines = [
        f"dry run (pool): {len(run_dirs)} run(s) on {workers} worker(s)"
        + (f", {k} a GPU on GPUs {', '.join(gpus)}" if gpus else " on the CPUs")
        + "; nothing is started"
    ]
    shown = varying_overrides([list(o) for o in job_overrides])
    for i, (swept, run_dir) in enumerate(zip(shown, run_dirs)):
        where = f"GPU {order[i][0]} (slot {order[i][1]})" if i < min(workers, len(order)) else "the first slot freed"
        lines.append(f"run {i} ({' '.join(swept) or 'defaults'}): {where if gpus else 'the CPUs'}; run dir {run_dir}")
    memory_plan = getattr(launcher, "_memory_plan", None)
    if memory_plan is not None:
        first = min(workers, len(order), len(run_dirs))
        groups = [(f"GPU {gpu}", [i for i in range(first) if order[i][0] == gpu]) for gpu in gpus] or [
            ("the CPUs", list(range(len(run_dirs))))
        ]
        later = "runs " + ", ".join(str(i) for i in range(first, len(run_dirs))) if first < len(run_dirs) else ""
        lines += memory_plan.placement(
            groups, f"{later}: each in the first GPU slot a finished run frees" if later else ""
        )
    return "\n".join(lines)
