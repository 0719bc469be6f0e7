"""hydra/launcher=pool: the runs of a sweep side by side in worker processes that each run several of them.

A fresh process spends ~6 s starting (interpreter, torch/trl imports) before a short CPU run trains for ~2 s;
a worker pays that once. The workers are loky's (the process pool joblib uses, vendored by joblib), and each run
goes through hydra-joblib-launcher's job code, so a run is the same Hydra job as under any other launcher.

Not joblib.Parallel as the stock joblib launcher does it: when a worker process dies (killed for memory, a
segfault in native code), Parallel abandons the whole sweep. Here at most one run per worker is in flight; the
runs in flight when a worker died are run again one at a time, so the run that kills its process is found and
recorded as failed, and every other run still runs.
"""
from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

log = logging.getLogger(__name__)

POOL_TARGETS = ("GrpoPoolLauncher", "JoblibLauncher")


def is_pool(launcher_cfg: Any) -> bool:
    """Several runs at once in worker processes of this machine (n_jobs other than 1)."""
    return str(launcher_cfg.get("_target_", "")).endswith(POOL_TARGETS) and launcher_cfg.get("n_jobs") != 1


def _drain(submit: Callable[[int], Any], indices: Iterable[int], workers: int) -> tuple[dict, list]:
    """Run ``indices`` with at most ``workers`` in flight; (results by index, [(index, error)] of runs whose worker
    died). Queued runs are kept out of the executor so that a dying worker only takes the runs in flight with it."""
    from concurrent.futures import FIRST_COMPLETED, wait

    from joblib.externals.loky.process_executor import BrokenProcessPool

    queue, in_flight, done, lost = list(indices), {}, {}, []
    while queue or in_flight:
        while queue and len(in_flight) < workers:
            index = queue.pop(0)
            in_flight[submit(index)] = index
        finished, _ = wait(in_flight, return_when=FIRST_COMPLETED)
        for future in finished:
            index = in_flight.pop(future)
            try:
                done[index] = future.result()
            except BrokenProcessPool as exc:  # TerminatedWorkerError included
                lost.append((index, exc))
    return done, lost


def launch(launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list:
    from hydra.core.singleton import Singleton
    from hydra.core.utils import configure_log, filter_overrides, setup_globals
    from hydra_plugins.hydra_joblib_launcher._core import execute_job
    from joblib import effective_n_jobs
    from joblib.externals.loky import get_reusable_executor
    from omegaconf import open_dict

    from .submit import lost_run_return

    setup_globals()
    configure_log(launcher.config.hydra.hydra_logging, launcher.config.hydra.verbose)
    sweep_dir = Path(str(launcher.config.hydra.sweep.dir))
    sweep_dir.mkdir(parents=True, exist_ok=True)
    workers = max(1, min(effective_n_jobs(launcher.n_jobs), len(job_overrides)))
    log.info("Launching %d runs on %d worker processes, sweep output dir: %s", len(job_overrides), workers, sweep_dir)
    for idx, overrides in enumerate(job_overrides, start=initial_job_idx):
        log.info("\t#%d : %s", idx, " ".join(filter_overrides(overrides)))
    state = Singleton.get_state()

    def submitter(max_workers: int) -> Callable[[int], Any]:
        def submit(index: int):
            # the same executor while its workers live; a new one after a worker died (loky's reuse rule)
            executor = get_reusable_executor(max_workers=max_workers)
            return executor.submit(execute_job, initial_job_idx + index, job_overrides[index], launcher.hydra_context,
                                   launcher.config, launcher.task_function, state)
        return submit

    results, lost = _drain(submitter(workers), range(len(job_overrides)), workers)
    if lost:
        log.warning("a worker process died with runs %s in flight; running them again one at a time",
                    ", ".join(str(initial_job_idx + i) for i, _ in lost))
        again, lost = _drain(submitter(1), [i for i, _ in lost], 1)
        results.update(again)
    loader = launcher.hydra_context.config_loader
    for index, exc in lost:
        overrides = list(job_overrides[index])
        cfg = loader.load_sweep_config(launcher.config, overrides)
        with open_dict(cfg.hydra.job):
            cfg.hydra.job.num = initial_job_idx + index
        run_dir = Path(str(cfg.hydra.sweep.dir)) / str(cfg.hydra.sweep.subdir)
        codes = re.search(r"exit codes of the workers are \{(.*?)\}", str(exc))
        error = (f"its worker process died ({codes.group(1) if codes else type(exc).__name__}) while it ran, and "
                 "again when it ran alone: killed for memory? a crash in native code?")
        log.error("run %d (%s): %s", initial_job_idx + index, " ".join(overrides), error)
        results[index] = lost_run_return(overrides, run_dir, error, str(exc))
    return [results[i] for i in range(len(job_overrides))]
