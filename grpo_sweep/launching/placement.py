"""Where runs train on this machine's NVIDIA GPUs: the GPUs visible here, and the slots (``runs_per_gpu`` a GPU)
that the pool's workers and submitit_local's jobs take, one lock file a slot. No torch: a process takes its slot
before anything initializes CUDA."""

from __future__ import annotations

import os
from pathlib import Path

from ..backends.gpu_stack import visible_gpu_ids
from ..run.sharing import SHARE_ENV, share_env

_held_locks: list = []  # a worker's GPU lock, held while the worker lives


def visible_gpus() -> list[str]:
    """The NVIDIA GPUs this process may use, without importing torch: CUDA_VISIBLE_DEVICES when set (ids or
    UUIDs), else one id per /proc/driver/nvidia/gpus entry."""
    ids = visible_gpu_ids()
    if ids is not None:
        return ids
    nvidia = Path("/proc/driver/nvidia/gpus")
    return [str(i) for i in range(len(list(nvidia.iterdir())))] if nvidia.is_dir() else []


def slots(gpus: list[str], runs_per_gpu: int = 1) -> list[tuple[str, int]]:
    """(GPU, slot) in the order workers take them: every GPU's first slot before any GPU's second, so that fewer
    runs than slots spread over the GPUs."""
    return [(gpu, slot) for slot in range(runs_per_gpu) for gpu in gpus]


def claim_gpu(lock_dir: str, gpus: list[str], runs_per_gpu: int = 1, wait_s: float = 0.0) -> str:
    """Worker initializer (and a submitit_local job's first step): pin this process to a GPU slot no other live
    process holds, before anything initializes CUDA. One lock file per slot (``runs_per_gpu`` a GPU), held while the
    process lives: when it dies the OS releases its lock, and the process that replaces it takes that slot.
    ``wait_s``: how long to wait for a slot to free. With several runs a GPU, the run is told its GPU's ledger
    (run/sharing.py). Returns the GPU."""
    import fcntl
    import time

    deadline = time.monotonic() + wait_s
    while True:
        for gpu, slot in slots(gpus, runs_per_gpu):
            name = f"gpu-{gpu}.lock" if slot == 0 else f"gpu-{gpu}.{slot}.lock"
            handle = open(os.path.join(lock_dir, name), "w")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.close()
                continue
            _held_locks.append(handle)
            os.environ["CUDA_VISIBLE_DEVICES"] = gpu
            if runs_per_gpu > 1:
                os.environ[SHARE_ENV] = share_env(Path(lock_dir), gpu, runs_per_gpu)
            return gpu
        if time.monotonic() >= deadline:
            raise RuntimeError(
                f"process {os.getpid()}: every slot of {gpus} ({runs_per_gpu} a GPU) is held by another process"
            )
        time.sleep(0.5)
