"""One run over several processes (``distributed=ddp|zero2``).

The processes are started by a launcher library, never by hand: on SLURM by SLURM itself (one task a process,
``hydra.launcher.tasks_per_node`` x ``nodes``; submitit's ``TorchDistributedEnvironment`` tells each task its rank),
elsewhere by torchrun's own engine (``torch.distributed.launcher.api.elastic_launch``) from the task. Each process
then trains through the Trainer, whose accelerate state joins them (gloo on CPU, NCCL on GPUs) and which applies
DDP, or DeepSpeed from GRPOConfig's ``deepspeed`` field.

Every rank holds the whole model (DDP, ZeRO-2), so rank 0 alone writes the run's files, opens its tracker,
evaluates and saves, while the others wait at the next step's collectives; every rank checkpoints and resumes from
the same checkpoint. Strategies that shard the weights themselves (ZeRO-3, FSDP) would need every rank in each
evaluation and save, and are not offered. No torch at import.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import re
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..config.checks import DEEPSPEED
from .vllm_serving import server_gpus

STRATEGIES = ("none", "ddp", "zero2")
# each rank's stdout and stderr when torchrun's engine starts the ranks (SLURM keeps its own per-task logs)
RANK_LOGS = "ranks"


@dataclass(frozen=True)
class Rank:
    """Where this process stands in its run: ``rank`` of ``world_size``, ``local_rank`` on its node."""

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    nodes: int = 1


def from_env() -> Rank:
    """This process's rank, as torchrun's engine or ``join_slurm_job`` put it in the environment (one process: 0
    of 1)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", str(world)))
    return Rank(
        int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0")), world, _nodes(world, local_world)
    )


def _nodes(world_size: int, local_world_size: int) -> int:
    return max(1, world_size // max(1, local_world_size))


def in_slurm_job_of_many_tasks() -> bool:
    return int(os.environ.get("SLURM_NTASKS", "1")) > 1 and "SLURM_PROCID" in os.environ


def join_slurm_job() -> Rank:
    """In a SLURM job of several tasks (one per process of the run), export the rank, world size and rendezvous
    address torch.distributed reads (submitit's helper: the first node's host, a port drawn from the job id).
    Every GPU of the node stays visible: a rank trains on GPU ``local_rank``, a vLLM server takes the last ones."""
    from submitit.helpers import TorchDistributedEnvironment

    env = TorchDistributedEnvironment().export(set_cuda_visible_devices=False, overwrite=True)
    return Rank(env.rank, env.local_rank, env.world_size, _nodes(env.world_size, env.local_world_size))


def spawns_here(cfg: Any) -> bool:
    """Whether the task must start the run's processes itself: a distributed strategy, and no launcher that already
    started one process per rank (torchrun, SLURM's tasks)."""
    return cfg.distributed.strategy != "none" and "WORLD_SIZE" not in os.environ and not in_slurm_job_of_many_tasks()


class RankFailed(RuntimeError):
    """A rank of a multi-process run failed; the message is its error in one line."""


# how often torchrun's engine looks at the ranks, and how long a rank that lost a peer waits to be the second
# exit it sees (``_run_rank``)
_MONITOR_S = 0.5
_PEER_GRACE_S = 4 * _MONITOR_S


def launch_here(cfg: Any, context: Any, processes: int, run_rank: Callable[..., Any], **kwargs: Any) -> Any:
    """Run the run as ``processes`` ranks on this machine with torchrun's engine; return rank 0's record. Each rank
    calls ``run_rank(cfg, its context, **kwargs)`` (``lifecycle.run_one``, with what it passes on: ``open_tracker``,
    a module-level function each rank's process imports by name, and for an Optuna trial ``monitor(rank)``, each
    rank's pruning monitor).

    Each rank's output goes to ``<run_dir>/ranks/``, rank 0's also to this terminal. When one rank fails the engine
    stops the others; the first failure is raised as ``RankFailed``."""
    from omegaconf import OmegaConf
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, Std
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    logs = Path(context.run_dir) / RANK_LOGS
    logs.mkdir(parents=True, exist_ok=True)
    config = LaunchConfig(
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=processes,
        run_id=f"grpo-sweep-{os.getpid()}",
        # torchrun --standalone: a rendezvous on this machine, on a free port
        rdzv_backend="c10d",
        rdzv_endpoint=f"{_loopback()}:0",
        max_restarts=0,
        start_method="spawn",
        # every rank's output to its files; rank 0's (the progress bar, the run's own lines) also to this terminal
        logs_specs=DefaultLogsSpecs(log_dir=str(logs), tee=Std.ALL, local_ranks_filter={0}),
        role="rank",
        monitor_interval=_MONITOR_S,  # its lines on the terminal start "[rank0]:"
    )
    container = OmegaConf.to_container(cfg, resolve=True)
    method = multiprocessing.get_start_method(allow_none=True)
    # a pool worker: loky made its own start method the process's default, and a spawned rank, which is told the
    # parent's default, cannot find it
    foreign_method = method not in (None, "spawn", "fork", "forkserver")
    _start_resource_tracker_quiet_about_leaks()
    quiet = [logging.getLogger(name) for name in _ENGINE_LOGGERS]
    levels = [logger.level for logger in quiet]
    # the engine installs its own handlers (a Ctrl-C becomes its SignalException, which stops the ranks) and leaves
    # them: the process's next run (a sweep's, in this process) would get no KeyboardInterrupt from the user's Ctrl-C
    main_thread = threading.current_thread() is threading.main_thread()  # where handlers can be set at all
    handlers = {sig: signal.getsignal(sig) for sig in _ENGINE_SIGNALS} if main_thread else {}
    try:
        if foreign_method:
            multiprocessing.set_start_method("spawn", force=True)
        for logger in quiet:
            logger.setLevel(logging.CRITICAL)
        results = elastic_launch(config, _rank_main)(run_rank, container, context, kwargs)
    except ChildFailedError as exc:
        raise rank_failed(exc, processes, logs) from None
    finally:
        for sig, handler in handlers.items():
            if handler is not None:  # None: set outside Python, nothing to put back
                signal.signal(sig, handler)
        for logger, level in zip(quiet, levels):
            logger.setLevel(level)
        if foreign_method:
            multiprocessing.set_start_method(method, force=True)
    return results.get(0)


# what torchrun's engine handles while it runs (torch.distributed.elastic.multiprocessing.api.start_processes)
_ENGINE_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT") if hasattr(signal, name)
)

# torchrun's engine reports a rank that died in its own lines (a traceback of its poll loop, the SIGTERM to the
# others) on the terminal; RankFailed says the same in one line, and the rank's own output is in its log
_ENGINE_LOGGERS = ("torch.distributed.elastic.multiprocessing.api", "torch.multiprocessing.spawn")


def rank_failed(exc: Any, processes: int, logs: Path) -> RankFailed:
    """The failed rank of torchrun's ChildFailedError ``exc`` in one line: its own error, or the signal that killed
    it. The engine names one rank, the first whose exit it saw; when that rank only reports a peer that vanished
    under it, the run's cause is the peer's own error (``_cause``)."""
    rank, failure = _cause(*min(exc.failures.items()), processes)
    if os.path.isfile(failure.error_file):  # the rank's own exception, which record() wrote there
        lines = _message(failure).strip().splitlines()
        return RankFailed(
            f"rank {rank} of {processes} failed: {lines[-1] if lines else f'exit code {failure.exitcode}'}"
            f" (its log: {logs})"
        )
    if failure.exitcode < 0:  # a signal: the OOM killer, a kill -9, a crash in native code (SIGSEGV)
        return RankFailed(
            f"rank {rank} of {processes} was killed ({failure.signal_name()}, exit code {failure.exitcode};"
            f" its log: {logs})"
        )
    # it ended before or without raising (an import that failed, os._exit)
    return RankFailed(f"rank {rank} of {processes} failed: exit code {failure.exitcode} (its log: {logs})")


# what a rank raises when another rank died under it: gloo's socket closed mid-collective, NCCL's communicator
# aborted or its watchdog's timeout. When rank 1 raises, rank 0 fails too within a moment, and the engine may see
# rank 0's exit first
_LOST_A_PEER = re.compile(
    r"(closed|reset) by peer|broken pipe|remote worker|DistBackendError|"
    r"DistNetworkError|communicator was aborted|Watchdog caught collective operation timeout",
    re.IGNORECASE,
)


def _lost_a_peer(error: str) -> bool:
    """Whether a rank's error is its report of another rank that died (``_LOST_A_PEER``)."""
    return bool(_LOST_A_PEER.search(error))


def _message(failure: Any) -> str:
    return failure.message if isinstance(failure.message, str) else failure.message.get("message", "")


def _cause(rank: int, failure: Any, processes: int) -> tuple[int, Any]:
    """The rank whose failure caused ``failure`` of ``rank``: itself, unless it reports a lost peer and another rank
    of the attempt left an error of its own (record() writes each rank's beside the others'). Among several, the
    one written first: a rank's error is written before its process exits and so before a peer can miss it."""
    from torch.distributed.elastic.multiprocessing.errors import ProcessFailure

    if not (os.path.isfile(failure.error_file) and _lost_a_peer(_message(failure))):
        return rank, failure
    attempt = Path(failure.error_file).parent.parent  # <logs>/<run>/attempt_<n>/<local rank>/error.json
    peers = [
        (os.stat(path).st_mtime_ns, other, ProcessFailure(other, 0, 1, str(path)))
        for other in range(processes)
        if other != rank
        for path in [attempt / str(other) / Path(failure.error_file).name]
        if path.is_file()
    ]
    own = [(at, other, peer) for at, other, peer in peers if not _lost_a_peer(_message(peer))]
    return min(own)[1:] if own else (rank, failure)


def _start_resource_tracker_quiet_about_leaks() -> None:
    """Start this process's multiprocessing resource tracker, which the ranks share, ignoring its warning about
    leaked semaphores: a rank that was killed could not release its own, the tracker releases them at exit, and
    RankFailed has said what happened (the warning would be two more lines after it). A tracker already running
    stays as it is."""
    from multiprocessing import resource_tracker

    quiet = "ignore:resource_tracker:UserWarning"
    sys.warnoptions.append(quiet)  # the tracker's interpreter is started with this process's -W options
    try:
        resource_tracker.ensure_running()
    finally:
        sys.warnoptions.remove(quiet)


def _attempt() -> str:
    # this attempt of the run's job: a requeued job's ranks must not read the errors of the attempt before
    return f"{os.environ.get('SLURM_JOB_ID', 'local')}.{os.environ.get('SLURM_RESTART_COUNT', '0')}"


def record_rank_failure(run_dir: Path, rank: int, error: str) -> None:
    """A rank other than 0 failed: leave its one-line error where rank 0 looks (``peer_failure``) before this
    process ends; rank 0 sees the rank vanish at its next collective and writes the run's record."""
    where = Path(run_dir) / RANK_LOGS
    where.mkdir(parents=True, exist_ok=True)
    (where / f"rank{rank}.{_attempt()}.error").write_text(error.strip().splitlines()[0] if error.strip() else error)


def peer_failure(run_dir: Path, world_size: int) -> str | None:
    """The first error another rank of this attempt recorded, as the run's error (``rank 1 of 2 failed: ...``); one
    of its own before one that reports a lost peer (``_lost_a_peer``)."""
    errors = [
        (rank, path.read_text())
        for rank in range(1, world_size)
        for path in [Path(run_dir) / RANK_LOGS / f"rank{rank}.{_attempt()}.error"]
        if path.is_file()
    ]
    for rank, error in [e for e in errors if not _lost_a_peer(e[1])] or errors:
        return f"rank {rank} of {world_size} failed: {error}"
    return None


def _loopback() -> str:
    # the rendezvous store binds here; a machine whose hostname does not resolve still has its loopback
    return socket.gethostbyname("localhost")


def _rank_main(run_rank: Callable[..., Any], container: dict, context: Any, kwargs: dict) -> Any:
    """One rank, in a process torchrun's engine started: run the run as this rank."""
    from torch.distributed.elastic.multiprocessing.errors import record

    return record(_run_rank)(run_rank, container, context, kwargs)


def _run_rank(run_rank: Callable[..., Any], container: dict, context: Any, kwargs: dict) -> Any:
    from omegaconf import OmegaConf

    # the file is the rank's own (ranks/<run>/attempt_<n>/<rank>/), the terminal's copy is prefixed with the rank
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s][%(name)s][%(levelname)s] - %(message)s")
    try:
        return run_rank(OmegaConf.create(container), context.for_rank(from_env(), parent_records=True), **kwargs)
    except Exception as exc:
        if _lost_a_peer(f"{type(exc).__name__}: {exc}"):
            # the engine names the first exit it sees, and of ranks gone by its next look the lowest: a rank that
            # lost its peer leaves after that look, so a peer SIGKILLed (which leaves no error to find) is named
            time.sleep(_PEER_GRACE_S)
        raise


def check_world(cfg: Any, processes: int | None, nodes: int = 1, gpus_per_node: int | None = None) -> None:
    """The arithmetic of a run over ``processes`` processes on ``nodes`` nodes, before anything starts; raises a
    one-line ValueError naming the value that does not fit. ``processes`` None: not known yet (the launcher or the
    machine says; checked again there). ``gpus_per_node``: what each node has for the run (None: not known here)."""
    strategy, trainer = cfg.distributed.strategy, cfg.trainer
    if strategy not in STRATEGIES:
        raise ValueError(f"distributed.strategy={strategy!r}; use one of: {', '.join(STRATEGIES)}")
    if strategy == "none" and cfg.distributed.nproc_per_node != 1:
        raise ValueError(
            f"distributed.nproc_per_node={cfg.distributed.nproc_per_node} with distributed=none (one "
            "process a run): choose distributed=ddp (or zero2) to train one run over several"
        )
    if strategy != "none" and cfg.backend.name == "unsloth":
        raise ValueError(f"distributed={strategy} with backend=unsloth: Unsloth trains on one GPU; use backend=trl")
    if trainer.use_vllm and trainer.vllm_mode == "server":
        server_cfg = trainer.vllm_server
        for name in ("gpus", "tensor_parallel_size", "data_parallel_size"):
            if server_cfg[name] < 1:
                raise ValueError(
                    f"trainer.vllm_server.{name}={server_cfg[name]}: must be >= 1 (trainer.vllm_mode=server "
                    "starts a vLLM server on GPUs of its own)"
                )
        if server_cfg.tensor_parallel_size * server_cfg.data_parallel_size != server_cfg.gpus:
            raise ValueError(
                f"trainer.vllm_server.gpus={server_cfg.gpus} but tensor_parallel_size x data_parallel_size = "
                f"{server_cfg.tensor_parallel_size} x {server_cfg.data_parallel_size}: the server uses exactly its GPUs"
            )
        if gpus_per_node == 0:
            raise ValueError(
                "trainer.vllm_mode=server starts a vLLM server, which needs GPUs, and the run has none "
                "(hydra.launcher.gpus_per_node=null, or a machine without GPUs)"
            )
    if processes is None:
        return
    if processes < 1:
        raise ValueError(f"{processes} processes for the run: set distributed.nproc_per_node to 1 or more")
    if strategy == "none" and processes > 1:
        raise ValueError(
            f"{processes} processes but distributed=none (one process a run): choose distributed=ddp "
            "(or zero2) to train one run over them"
        )
    if strategy in DEEPSPEED and gpus_per_node == 0:
        raise ValueError(f"distributed={strategy} is DeepSpeed, which needs NVIDIA GPUs: use distributed=ddp on CPU")
    per_step = trainer.per_device_train_batch_size * processes
    steps_per_generation = trainer.steps_per_generation or trainer.gradient_accumulation_steps
    generation_batch = per_step * steps_per_generation
    if generation_batch % trainer.num_generations:
        names, values = (
            "per_device_train_batch_size x steps_per_generation",
            f"{trainer.per_device_train_batch_size} x {steps_per_generation}",
        )
        if processes > 1:
            names, values = f"processes x {names}", f"{processes} x {values}"
        raise ValueError(
            f"trainer.num_generations={trainer.num_generations} must divide the generation batch "
            f"{names} = {values} = {generation_batch}"
        )
    server = server_gpus(cfg)
    per_node = processes // max(1, nodes)
    if gpus_per_node and per_node + server > gpus_per_node:
        what = f"{per_node} training processes" + (f" + {server} vLLM server GPUs" if server else "")
        raise ValueError(
            f"{what} per node but {gpus_per_node} GPUs per node: each training process needs a GPU of its "
            "own" + (", and the server its own" if server else "")
        )
