"""Submitting a sweep through submitit (the launch side of hydra_plugins/grpo_sweep_launcher).

Runs on the login node: no torch/trl/transformers here, and every run passes the gate (grpo_sweep/launching/gate.py)
before one is queued.
"""

from __future__ import annotations

import json
import logging
import math
import os
import pickle
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from ..adapters.submitit import executor_kind, job_arguments, make_executor, requeue, run_job
from ..run.context import launch_import_path, use_import_path
from ..run.files import write_json_atomic
from ..run.results import record_failure
from ..run.sharing import SHARE_ENV, share_env
from .gate import Refused
from .memory import write_estimates
from .placement import slots, visible_gpus
from .resubmit import JOBS, completed_objective, describe, left_by_earlier_job, skipped_runs

log = logging.getLogger(__name__)


class SubmitError(Refused):
    """What the submitit launchers need and lack, found before submission; one line, without a traceback."""


def check_resources(params: dict, executor: str) -> None:
    """No scheduler, and the GPU-mapping traps of the submitit launcher, caught before submission."""
    if executor == "slurm" and not shutil.which("sbatch"):
        raise SubmitError(
            "hydra/launcher=slurm: SLURM's sbatch is not on PATH here; submit from a login node, or run the "
            "sweep on this machine with hydra/launcher=local or hydra/launcher=submitit_local"
        )
    if executor == "slurm":
        check_partition_fit(params, slurm_nodes(params.get("partition")))


def run_world(params: dict, executor: str, cfg: Any) -> tuple[int | None, int, int | None]:
    """(processes, nodes, GPUs per node) a submitit job gives one run of ``cfg``. On SLURM each process of a run is a
    task (``tasks_per_node`` x ``nodes``); submitit_local's job is one process, which starts the run's ranks itself
    (``distributed.nproc_per_node``)."""
    strategy, nproc = cfg.distributed.strategy, cfg.distributed.nproc_per_node
    tasks, nodes = params.get("tasks_per_node") or 1, params.get("nodes") or 1
    gpus = params.get("gpus_per_node") or 0
    if executor != "slurm":
        if tasks != 1:
            raise SubmitError(
                f"hydra.launcher.tasks_per_node={tasks} on submitit_local: a job is one run, whose "
                "processes it starts itself; set distributed=ddp distributed.nproc_per_node="
                f"{tasks} and keep tasks_per_node=1"
            )
        return nproc, 1, None
    if strategy == "none":
        if tasks * nodes > 1:
            raise SubmitError(
                f"hydra.launcher.tasks_per_node={tasks}, nodes={nodes}: with distributed=none a run is one training "
                f"process, so {tasks * nodes} tasks would train the same run {tasks * nodes} times into one directory; "
                f"add distributed=ddp to train each run over {tasks * nodes} processes, or keep tasks_per_node=1"
            )
        if gpus > 1 and not (cfg.trainer.use_vllm and cfg.trainer.vllm_mode == "server"):
            log.warning(
                "hydra.launcher.gpus_per_node=%d: a run is one process and trains on one GPU; the other %d stay idle. "
                "One run over them: distributed=ddp hydra.launcher.tasks_per_node=%d; one run per GPU: "
                "gpus_per_node=1",
                gpus,
                gpus - 1,
                gpus,
            )
        return 1, 1, gpus
    if nproc is not None and nproc != tasks:
        raise SubmitError(
            f"distributed.nproc_per_node={nproc} but hydra.launcher.tasks_per_node={tasks}: on SLURM "
            "each process of a run is a task; set them equal, or distributed.nproc_per_node=null"
        )
    return tasks * nodes, nodes, gpus


@dataclass(frozen=True)
class Node:
    """What one node of a partition offers, as ``sinfo`` reports it."""

    cpus: int
    mem_mb: int
    gpus: int
    # how many nodes of the partition are like this one (sinfo groups alike nodes on one line)
    count: int = 1


_GRES_GPUS = re.compile(r"gpu(?::[^:,(]+)?:(\d+)")


def parse_sinfo(text: str, partition: str | None) -> list[Node]:
    """Nodes of ``partition`` (the default one, marked ``*``, when None) from ``sinfo -h -o "%P|%c|%m|%G|%D"`` (the
    node count may be left off: one node a line)."""
    nodes = []
    for line in text.splitlines():
        fields = line.strip().split("|")
        if len(fields) not in (4, 5):
            continue
        name, cpus, mem, gres = fields[:4]
        count = fields[4] if len(fields) == 5 else "1"
        if (partition is None and not name.endswith("*")) or (partition is not None and name.rstrip("*") != partition):
            continue
        gpus = sum(int(n) for n in _GRES_GPUS.findall(gres))
        try:
            nodes.append(Node(int(cpus.rstrip("+")), int(mem.rstrip("+")), gpus, int(count)))
        except ValueError:
            continue  # a field sinfo could not fill ("N/A"): nothing to compare against
    return nodes


def slurm_nodes(partition: str | None) -> list[Node]:
    """The partition's nodes, or [] when sinfo cannot say (then nothing is refused on its account)."""
    if not shutil.which("sinfo"):
        return []
    try:
        out = subprocess.run(["sinfo", "-h", "-o", "%P|%c|%m|%G|%D"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return parse_sinfo(out.stdout, partition) if out.returncode == 0 else []


def check_partition_fit(params: dict, nodes: list[Node]) -> None:
    """Refuse, in one line naming the key, a request that no node of the partition can meet: such jobs would pend
    forever (reason PartitionConfig) or be refused by sbatch with a raw gres error."""
    if not nodes:
        return
    where = f"partition {params['partition']!r}" if params.get("partition") else "the default partition"
    offered = ", ".join(sorted({f"{n.cpus} CPUs, {n.mem_mb / 1024:.1f} GB, {n.gpus} GPUs" for n in nodes}))
    most_gpus = max(n.gpus for n in nodes)
    asked = {  # key: (what the job asks, the most a node has, the value that fits)
        "gpus_per_node": (params.get("gpus_per_node") or 0, most_gpus, most_gpus or "null"),
        "cpus_per_task": (
            (params.get("cpus_per_task") or 1) * (params.get("tasks_per_node") or 1),
            max(n.cpus for n in nodes),
            max(n.cpus for n in nodes) // (params.get("tasks_per_node") or 1),
        ),
        "mem_gb": (
            params.get("mem_gb") or 0,
            max(n.mem_mb for n in nodes) // 1024,
            max(n.mem_mb for n in nodes) // 1024,
        ),
    }
    tasks = params.get("tasks_per_node") or 1
    for key, (want, most, fix) in asked.items():
        if want > most:
            shown = (
                f"cpus_per_task x tasks_per_node = {want}" if key == "cpus_per_task" and tasks > 1 else f"{key}={want}"
            )
            raise SubmitError(
                f"hydra.launcher.{shown}: no node of {where} has that many (its nodes: {offered}); set "
                f"hydra.launcher.{key}={fix}, or hydra/launcher=slurm_local on the local SLURM of "
                "scripts/slurm_local.sh"
            )
    wanted_nodes, fitting = (
        params.get("nodes") or 1,
        sum(n.count for n in nodes if n.gpus >= (params.get("gpus_per_node") or 0)),
    )
    if wanted_nodes > fitting:
        raise SubmitError(
            f"hydra.launcher.nodes={wanted_nodes}: {where} has {fitting} node(s) that can take the job "
            f"(its nodes: {offered}); set hydra.launcher.nodes={max(1, fitting)}"
        )


def record_jobs(sweep_dir: Path, entries: list[dict], unless_known: Sequence[dict] = ()) -> None:
    """Append this batch's jobs to <sweep_dir>/jobs.json (a sweeper may launch several batches); ``unless_known``:
    runs not queued again, recorded only where no earlier submission recorded them."""
    path = sweep_dir / JOBS
    known = json.loads(path.read_text())["jobs"] if path.exists() else []
    nums = {e["num"] for e in entries}
    jobs = [e for e in known if e["num"] not in nums] + entries
    recorded = {j["num"] for j in jobs}
    jobs += [e for e in unless_known if e["num"] not in recorded]
    write_json_atomic(path, {"sweep_dir": str(sweep_dir), "jobs": sorted(jobs, key=lambda e: e["num"])})


def lost_run_return(overrides: Sequence[str], run_dir: Path, error: str, detail: str):
    """A run whose process died without a result: record it as a failed run, like a run that raised (a failure
    the run recorded itself is kept), and return what a failed run returns to the sweeper."""
    from hydra.core.utils import JobReturn, JobStatus

    record_failure(run_dir, error, overrides, detail, keep_recorded=True)
    return JobReturn(overrides=list(overrides), status=JobStatus.COMPLETED, _return_value=math.nan)


def record_lost_jobs(sweep_dir: Path) -> None:
    """A detached sweep's runs whose SLURM job ended without a summary, recorded as failed runs (as the attached
    launch records them, ``lost_run_return``): the seeds sweeper's next round must see them failed, not running."""
    from ..reading.results import SweepResults
    from .jobs import slurm_jobs
    from .resubmit import SLURM_LIVE

    path = Path(sweep_dir) / JOBS
    if not path.is_file():
        return
    jobs = [j for j in json.loads(path.read_text())["jobs"] if j.get("job_id")]
    results = SweepResults.read(sweep_dir, also=[Path(j["run_dir"]) for j in jobs])
    runs = {j["job_id"]: results.run_at(Path(j["run_dir"])) for j in jobs}
    waiting = [j for j in jobs if runs[j["job_id"]] is None or runs[j["job_id"]].summary.status == "running"]
    states = slurm_jobs(sorted({j["job_id"] for j in waiting})) if waiting else {}
    for j in waiting:
        state = states.get(j["job_id"], (None, 0))[0]
        if state is not None and state not in SLURM_LIVE:
            record_failure(
                Path(j["run_dir"]),
                f"job {j['job_id']} ended ({state}) without a result",
                j.get("overrides") or [],
                f"its log: {Path(sweep_dir) / '.submitit' / j['job_id']}",
                keep_recorded=True,
            )


def local_parallelism(launcher: Any) -> int | None:
    """How many local runs at a time (submitit_local); None for SLURM, whose own array throttle does this."""
    if executor_kind(launcher) != "local":
        return None
    if launcher.array_parallelism is not None:
        if launcher.array_parallelism < 1:
            raise SubmitError(f"hydra.launcher.array_parallelism={launcher.array_parallelism}: must be 1 or more")
        return launcher.array_parallelism
    return max(1, (os.cpu_count() or 1) // max(1, launcher.params.get("cpus_per_task") or 1))


def _job_entries(jobs: list, run_dirs: list[Path], job_params: list[tuple]) -> list[dict]:
    return [
        {"num": params[2], "job_id": job.job_id, "run_dir": str(run_dir), "overrides": params[0]}
        for job, run_dir, params in zip(jobs, run_dirs, job_params)
    ]


def _packed_entries(jobs: list, packs: list[list[int]], run_dirs: list[Path], job_params: list[tuple]) -> list[dict]:
    """jobs.json's entries of packed jobs: one a run, as for one-run jobs, each with its job's id and the runs its
    GPU holds (``packed_with``: their numbers)."""
    entries = []
    for job, pack in zip(jobs, packs):
        nums = [job_params[i][2] for i in pack]
        for i in pack:
            entries.append(
                {
                    "num": job_params[i][2],
                    "job_id": job.job_id,
                    "run_dir": str(run_dirs[i]),
                    "overrides": job_params[i][0],
                    "packed_with": [n for n in nums if n != job_params[i][2]],
                }
            )
    return entries


def _start_throttled(executor, job_fn, job_params: list[tuple], limit: int, sweep_dir: Path, run_dirs: list[Path]):
    """Start each run when one of the ``limit`` before it has finished: submitit's local executor has no array
    throttle and would start them all at once, each then fighting the others for the cores while importing torch."""
    jobs: list = []
    for params, run_dir in zip(job_params, run_dirs):
        while sum(not job.done() for job in jobs) >= limit:
            time.sleep(0.2)
        jobs.append(executor.submit(job_fn, *params))
        record_jobs(sweep_dir, _job_entries(jobs[-1:], [run_dir], [params]))
    return jobs


class _BatchJob:
    """What each job runs: the launcher's job side, with the launcher and Hydra's state pickled once a batch.

    submitit pickles the callable and its arguments into every job's file: the launcher (its config, the Hydra
    context) and Hydra's singletons are ~85 KB and ~8 ms a job, the same for the whole batch. Pickled once here,
    each job's file carries the bytes; the job unpickles them and runs the stock launcher's __call__.

    It also carries the launch's import path (run/context.launch_import_path), put in place before anything is
    unpickled: the user's modules import in the job as where the sweep was launched, on submitit_local and on SLURM
    alike, whatever environment the scheduler gives the job.
    """

    def __init__(self, blob: bytes, import_path: list[str]) -> None:
        self.blob, self.import_path = blob, import_path

    def _unpickled(self) -> tuple:
        use_import_path(self.import_path)
        return pickle.loads(self.blob)

    def __call__(self, *args: Any) -> Any:
        launcher, state = self._unpickled()
        return run_job(launcher, args, state)

    def checkpoint(self, *args: Any) -> Any:
        """Preempted or timed out: requeue as the launcher does (its own job, with the same arguments)."""
        launcher, state = self._unpickled()
        return requeue(launcher, args, state)


# how long a packed job's process waits, after one of its runs was killed by a signal, before it records that run
# failed: where SLURM ends the whole job, its own SIGKILL comes first
KILLED_GRACE_S = 10.0


class _PackedJob(_BatchJob):
    """A SLURM job that holds one GPU and trains ``runs_per_gpu`` runs on it side by side (``hydra.launcher.
    runs_per_gpu=K``): each run in a process of its own (spawned: a fresh interpreter, whose CUDA and vLLM state is
    its own), each the same Hydra job a one-run job is (its own run directory, resume, and skip when completed).
    One run that dies (out of memory, a crash in native code) is that run's failure; the others go on. A preemption
    or a time limit requeues the whole job, and each of its runs resumes from its own checkpoint."""

    def __init__(self, blob: bytes, import_path: list[str], ledger: str, runs_per_gpu: int) -> None:
        super().__init__(blob, import_path)
        self.ledger, self.runs_per_gpu = ledger, runs_per_gpu
        self._children: list = []

    def __call__(self, pack: list) -> list:  # type: ignore[override]
        """``pack``: (the one-run job's arguments, its run dir) of each run; returns their JobReturns in order."""
        import multiprocessing
        import tempfile

        # the job's GPU is the GPU the runs share: one ledger of neighbours a job (an array task has its own id)
        job = os.environ.get("SLURM_ARRAY_JOB_ID")
        job = f"{job}_{os.environ['SLURM_ARRAY_TASK_ID']}" if job else os.environ.get("SLURM_JOB_ID", str(os.getpid()))
        env = share_env(Path(self.ledger), f"slurm-{job}", self.runs_per_gpu)
        context = multiprocessing.get_context("spawn")
        with tempfile.TemporaryDirectory(prefix="grpo-pack-") as out:
            outs = [Path(out) / f"{n}.pkl" for n in range(len(pack))]
            self._children = [
                context.Process(target=_packed_run, args=(self.blob, self.import_path, tuple(args), str(o), env))
                for (args, _), o in zip(pack, outs)
            ]
            for child in self._children:
                child.start()
            for child in self._children:
                child.join()
            if any(child.exitcode is not None and child.exitcode < 0 for child in self._children):
                # a run killed by a signal: where SLURM ends the job (a requeue, a cancel), this process gets the
                # same SIGKILL at once; a run that is to resume must not be recorded failed first
                time.sleep(KILLED_GRACE_S)
            return [
                _packed_return(args, Path(run_dir), o, child.exitcode)
                for (args, run_dir), o, child in zip(pack, outs, self._children)
            ]

    def checkpoint(self, pack: list) -> Any:  # type: ignore[override]
        """Preempted or timed out: stop the runs (each resumes from its checkpoint) and requeue the same pack."""
        from submitit.helpers import DelayedSubmission

        for child in self._children:
            if child.is_alive():
                child.kill()  # it ignores SIGTERM; each run resumes from its last checkpoint
        return DelayedSubmission(self, pack)


def _packed_run(blob: bytes, import_path: list[str], args: tuple, out: str, share: str) -> None:
    """One run of a packed job, in its own process: the one-run job's code, its JobReturn pickled to ``out``."""
    import signal

    import cloudpickle

    # as a one-run job's process (submitit's handlers): the job's own process takes SLURM's requeue signal (USR2),
    # and a requeue's or cancel's SIGTERM is outlasted until the SIGKILL that ends every process of the job at once,
    # so that the job's own process never outlives a run it would then record as failed
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.environ[SHARE_ENV] = share
    use_import_path(import_path)
    launcher, state = pickle.loads(blob)
    result = run_job(launcher, args, state)
    Path(out).write_bytes(cloudpickle.dumps(result))


def _packed_return(args: tuple, run_dir: Path, out: Path, exitcode: int | None) -> Any:
    """A packed run's JobReturn; a run whose process died without one is recorded failed (as a one-run job's),
    and its neighbours' runs are theirs."""
    if out.is_file():
        return pickle.loads(out.read_bytes())
    from hydra.core.utils import JobReturn, JobStatus

    completed, objective = completed_objective(run_dir)
    if completed:  # it ended, then its process died on the way out
        return JobReturn(overrides=list(args[0]), status=JobStatus.COMPLETED, _return_value=objective)
    how = f"killed by signal {-exitcode}" if exitcode is not None and exitcode < 0 else f"exit status {exitcode}"
    error = (
        f"its process in a packed job died ({how}) without a result; the other runs of its GPU went on "
        "(killed for memory? a crash in native code?)"
    )
    return lost_run_return(list(args[0]), run_dir, error, "")


def launch(launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int):
    return start(launcher, job_overrides, initial_job_idx).results()


def start(launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int):
    """Submit the batch and return; the handle's ``results()`` waits for its jobs (``launch``), and for the jobs of an
    earlier submission of the same runs that SLURM still runs: one run has one job at a time."""
    import cloudpickle
    from hydra.core.singleton import Singleton
    from hydra.core.utils import JobReturn, JobStatus, filter_overrides

    from .gate import Started

    sweep_dir = Path(str(launcher.config.hydra.sweep.dir))
    started = time.perf_counter()
    run_dirs = launcher.plan(job_overrides, initial_job_idx)  # the gate: resources and every run, or nothing is queued
    log.info("validated %d runs in %.2f s", len(run_dirs), time.perf_counter() - started)

    kind = executor_kind(launcher)
    k = getattr(launcher, "runs_per_gpu", 1)
    # submitit_local places its runs on this machine's GPUs as the pool does (K a GPU); SLURM gives each job its GPU
    gpus = visible_gpus() if kind == "local" else []
    if getattr(launcher, "dry_run", False):
        print(describe_plan(launcher, job_overrides, initial_job_idx, run_dirs, gpus), flush=True)
        raise SystemExit(0)
    executor = make_executor(launcher)
    sweep_dir.mkdir(parents=True, exist_ok=True)
    ledger = sweep_dir / ".gpu_locks"
    if gpus or (kind == "slurm" and k > 1):
        ledger.mkdir(exist_ok=True)
        write_estimates(ledger, run_dirs, getattr(launcher, "_memory_plan", None))
    launcher._gpu_slots = (str(ledger), gpus, k) if gpus else None  # claimed by each job as it starts (_SubmitLaunch)
    nums = list(range(initial_job_idx, initial_job_idx + len(job_overrides)))
    skipped = skipped_runs(sweep_dir, nums, run_dirs, slurm=executor_kind(launcher) == "slurm")
    if skipped:
        log.info("%s", describe(skipped))
    queued = [i for i, num in enumerate(nums) if num not in skipped]
    # the stock launcher copies Hydra's singletons and pickles them with itself once a job; once a batch does
    job_fn = _BatchJob(cloudpickle.dumps((launcher, Singleton.get_state())), launch_import_path())
    job_params = []
    for i in queued:
        log.info("\t#%d : %s", nums[i], " ".join(filter_overrides(job_overrides[i])))
        job_params.append(job_arguments(job_overrides[i], nums[i]))
    queued_dirs = [run_dirs[i] for i in queued]
    limit = local_parallelism(launcher)
    if gpus:  # no more runs at once than GPU slots: a job that finds none waits for one
        limit = min(limit or len(gpus) * k, len(gpus) * k)
    packs: list[list[int]] = []  # a SLURM job's runs (indices into job_params), K a job where runs_per_gpu=K
    if not job_params:
        jobs = []
    elif kind == "slurm" and k > 1:
        packs = [list(range(n, min(n + k, len(job_params)))) for n in range(0, len(job_params), k)]
        log.info(
            "%d runs in %d jobs of one GPU each, %d runs a job (hydra.launcher.runs_per_gpu)",
            len(job_params),
            len(packs),
            k,
        )
        packed = _PackedJob(job_fn.blob, job_fn.import_path, str(ledger), k)
        jobs = executor.map_array(packed, [[(job_params[i], str(queued_dirs[i])) for i in pack] for pack in packs])
    elif limit is not None and limit < len(job_params):
        log.info("%d runs, at most %d at a time (hydra.launcher.array_parallelism)", len(job_params), limit)
        jobs = _start_throttled(executor, job_fn, job_params, limit, sweep_dir, queued_dirs)
    else:
        jobs = executor.map_array(job_fn, *zip(*job_params))
    record_jobs(
        sweep_dir,
        _packed_entries(jobs, packs, queued_dirs, job_params) if packs else _job_entries(jobs, queued_dirs, job_params),
        [
            {"num": nums[i], "job_id": None, "run_dir": str(run_dirs[i]), "overrides": list(job_overrides[i])}
            for i, num in enumerate(nums)
            if num in skipped
        ],
    )

    done = {
        num: JobReturn(
            overrides=list(job_overrides[i]), status=JobStatus.COMPLETED, _return_value=skipped[num].objective
        )
        for i, num in enumerate(nums)
        if num in skipped and skipped[num].why == "completed"
    }
    # an earlier submission's job that SLURM still runs: waited for, its run then read from its directory
    earlier = {num: (i, skipped[num].job_id) for i, num in enumerate(nums) if num in skipped and num not in done}
    if getattr(launcher, "detach", False):
        print(
            f"Submitted {len(jobs)} jobs: {job_ids(jobs)}\n"
            + (f"{describe(skipped)}\n" if skipped else "")
            + f"Sweep dir: {sweep_dir}\nCheck on it: python -m grpo_sweep.sweeps.status {sweep_dir}",
            flush=True,
        )
        returns = [
            done.get(num) or JobReturn(overrides=list(o), status=JobStatus.COMPLETED, _return_value=None)
            for num, o in zip(nums, job_overrides)
        ]
        return Started(lambda: True, lambda: returns)
    watched = _EarlierJobs({job_id for _, job_id in earlier.values()})

    def results() -> list:
        for job, pack in zip(jobs, packs):
            try:
                returns = job.results()[0]
            except Exception as exc:  # the whole job ended without a result (cancelled, node failure)
                log.error("job %s (%d packed runs) ended without a result", job.job_id, len(pack))
                error = f"job {job.job_id} ended without a result: {' '.join(str(exc).splitlines()[:2])}"
                returns = [
                    lost_run_return(job_params[i][0], queued_dirs[i], error, str(exc))
                    if not left_by_earlier_job(queued_dirs[i])[0]
                    else _earlier_return(job_params[i][0], queued_dirs[i], job.job_id)
                    for i in pack
                ]
            for i, returned in zip(pack, returns):
                done[nums[queued[i]]] = returned
        for job, run_dir, i in zip([] if packs else jobs, queued_dirs, queued):
            overrides = job_overrides[i]
            try:
                done[nums[i]] = job.results()[0]
            except Exception as exc:  # submitit's UncompletedJobError / FailedJobError: no result was written
                log.error("job %s (%s) ended without a result", job.job_id, " ".join(overrides))
                error = f"job {job.job_id} ended without a result: {' '.join(str(exc).splitlines()[:2])}"
                done[nums[i]] = lost_run_return(overrides, run_dir, error, str(exc))
        if earlier:
            log.info("waiting for %d jobs of an earlier submission: %s", len(earlier), ", ".join(watched.job_ids))
            while not watched.done():
                time.sleep(_EarlierJobs.POLL_S)
        for num, (i, job_id) in earlier.items():
            done[num] = _earlier_return(job_overrides[i], run_dirs[i], job_id)
        return [done[num] for num in nums]

    return Started(lambda: all(job.done() for job in jobs) and watched.done(), results)


class _EarlierJobs:
    """SLURM jobs of an earlier submission, asked after through sacct at most every ``POLL_S`` seconds."""

    POLL_S = 5.0

    def __init__(self, job_ids: set[str]) -> None:
        self.job_ids, self._asked, self._live = sorted(job_ids), 0.0, bool(job_ids)

    def done(self) -> bool:
        from .jobs import slurm_jobs
        from .resubmit import SLURM_LIVE

        if self._live and time.monotonic() - self._asked >= self.POLL_S:
            self._asked = time.monotonic()
            states = slurm_jobs(self.job_ids)
            self._live = any(states.get(j, (None, 0))[0] in SLURM_LIVE for j in self.job_ids)
        return not self._live


def _earlier_return(overrides: Sequence[str], run_dir: Path, job_id: str):
    """What an earlier submission's job left, as the run's JobReturn: its objective, or a failed run."""
    from hydra.core.utils import JobReturn, JobStatus

    from .resubmit import left_by_earlier_job

    ended, objective = left_by_earlier_job(run_dir)
    if not ended:
        return lost_run_return(overrides, run_dir, f"job {job_id} ended without a result", "")
    return JobReturn(overrides=list(overrides), status=JobStatus.COMPLETED, _return_value=objective)


def describe_plan(
    launcher: Any,
    job_overrides: Sequence[Sequence[str]],
    initial_job_idx: int,
    run_dirs: list[Path],
    local_gpus: Sequence[str] = (),
) -> str:
    """What each job of the batch would run, after the gate passed it (``hydra.launcher.dry_run=true``): its
    resources, its processes and where each trains, the vLLM server's GPUs, the generation batch."""
    from ..run.vllm_serving import server_gpus
    from .gate import compose_runs

    params = launcher.params
    asks = " ".join(
        f"{key}={params.get(key)}"
        for key in ("nodes", "tasks_per_node", "gpus_per_node", "cpus_per_task", "mem_gb", "timeout_min", "partition")
        if params.get(key) is not None
    )
    k = getattr(launcher, "runs_per_gpu", 1)
    jobs = f"{len(run_dirs)} job(s)"
    if executor_kind(launcher) == "slurm" and k > 1:
        jobs = f"{len(run_dirs)} run(s) in {-(-len(run_dirs) // k)} job(s) of up to {k} runs"
    lines = [f"dry run ({executor_kind(launcher)}): {jobs}, each {asks}; nothing is submitted"]
    loader = launcher.hydra_context.config_loader
    for num, (overrides, cfg, run_dir) in enumerate(
        zip(job_overrides, compose_runs(loader, launcher.config, job_overrides), run_dirs), start=initial_job_idx
    ):
        processes, nodes, gpus = run_world(params, executor_kind(launcher), cfg)
        processes = processes or 1
        per_node = processes // max(1, nodes)
        trainer = cfg.trainer
        steps = trainer.steps_per_generation or trainer.gradient_accumulation_steps
        batch = processes * trainer.per_device_train_batch_size * steps
        device = f"GPUs 0-{per_node - 1}" if gpus else "the CPUs"
        where = "; ".join(f"node {n}: ranks {n * per_node}-{(n + 1) * per_node - 1} on {device}" for n in range(nodes))
        server = server_gpus(cfg)
        if server:
            where += (
                f"; vLLM server on node 0, GPUs {gpus - server}-{gpus - 1} "
                f"(tensor {trainer.vllm_server.tensor_parallel_size}"
                f" x data {trainer.vllm_server.data_parallel_size})"
            )
        lines.append(
            f"job {num} ({' '.join(overrides) or 'defaults'}): {processes} process(es), distributed="
            f"{cfg.distributed.strategy}; {where}; generation batch {processes} x {trainer.per_device_train_batch_size}"
            f" x {steps} = {batch} = {batch // trainer.num_generations} groups of {trainer.num_generations}; "
            f"{trainer.max_steps} steps; run dir {run_dir}"
        )
    memory_plan = getattr(launcher, "_memory_plan", None)
    if memory_plan is not None:
        lines += placement_lines(memory_plan, len(run_dirs), executor_kind(launcher), list(local_gpus), initial_job_idx)
    return "\n".join(lines)


def placement_lines(memory_plan: Any, runs: int, kind: str, gpus: list[str], first: int) -> list[str]:
    """Which runs share which GPU: a SLURM job's K runs in the batch's order; on submitit_local, the runs that start
    first in the GPU slots (``pool.slots``), each later one in the first slot a finished run frees."""
    k = memory_plan.runs_per_gpu
    if kind == "slurm":
        groups = [
            (f"SLURM job {n} (one GPU)", list(range(i, min(i + k, runs)))) for n, i in enumerate(range(0, runs, k))
        ]
        return memory_plan.placement(groups)
    order = slots(gpus, k)
    head = min(len(order), runs)
    groups = [(f"GPU {gpu}", [i for i in range(head) if order[i][0] == gpu]) for gpu in gpus]
    later = ", ".join(str(first + i) for i in range(head, runs))
    return memory_plan.placement(
        groups or [("the CPUs", list(range(runs)))],
        f"runs {later}: each in the first GPU slot a finished run frees" if gpus and later else "",
    )


def job_ids(jobs: list, shown: int = 10) -> str:
    """The job ids, or for a long array the first few, the last, and the array's own id (its tasks are <id>_<n>)."""
    ids = [job.job_id for job in jobs]
    if len(ids) <= shown:
        return ", ".join(ids) or "none"
    arrays = sorted({i.split("_")[0] for i in ids if "_" in i})
    head = ", ".join(ids[: shown // 2])
    return f"{head}, ... {ids[-1]}" + (f" (SLURM array {', '.join(arrays)})" if arrays else "")
