"""Runs that share one GPU (``hydra.launcher.runs_per_gpu=K`` above 1): what a run records of its neighbours.

The launcher that placed the run says where through the run's environment (``SHARE_ENV``: the sweep's ledger
folder, the GPU's key, K and the gate's memory estimates). Each run appends its start and its end to that GPU's
ledger (``<ledger>/<gpu>.jsonl``, one short line each, appended: several processes write it), so that at its end a
run knows which runs trained beside it and for how long. Its device-seconds are split by that: a second in which n
runs held the GPU costs each of them 1/n of it, so a sweep's summed cost counts the GPU once, not K times.

No torch here: the measured peak of a run that ran out of memory is read only where torch is already imported.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# JSON {"ledger": folder, "gpu": key, "runs_per_gpu": K}: set by the launcher in the process that trains the run
SHARE_ENV = "GRPO_SWEEP_GPU_SHARE"
# in the ledger folder: run dir -> the gate's estimate of its GPU memory in GB (launching/memory.py writes it)
ESTIMATES = "estimates.json"


@dataclass(frozen=True)
class Share:
    ledger: Path
    gpu: str
    runs_per_gpu: int

    @property
    def path(self) -> Path:
        return self.ledger / f"{self.gpu.replace('/', '_')}.jsonl"

    def _append(self, entry: dict) -> None:
        self.ledger.mkdir(parents=True, exist_ok=True)
        line = json.dumps(entry) + "\n"
        # one write of a short line with O_APPEND: the lines of runs writing at once do not interleave
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def begin(self, run_dir: Path, now: float | None = None) -> float:
        now = time.time() if now is None else now
        self._append({"run_dir": str(Path(run_dir).resolve()), "start": now, "pid": os.getpid()})
        return now

    def end(self, run_dir: Path, now: float | None = None) -> None:
        self._append({"run_dir": str(Path(run_dir).resolve()), "end": time.time() if now is None else now})

    def intervals(self, until: float) -> list[tuple[str, float, float]]:
        """(run dir, start, end) of every stint on this GPU; a stint without its end is running until ``until``
        when its process lives, and ended at its start when it died unseen (a killed neighbour)."""
        if not self.path.is_file():
            return []
        open_runs: dict[str, tuple[float, int]] = {}
        stints = []
        for line in self.path.read_text().splitlines():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line a killed process left half written
            run = entry.get("run_dir")
            if "start" in entry:
                open_runs[run] = (entry["start"], entry.get("pid", 0))
            elif "end" in entry and run in open_runs:
                start, _ = open_runs.pop(run)
                stints.append((run, start, entry["end"]))
        for run, (start, pid) in open_runs.items():
            stints.append((run, start, until if _alive(pid) else start))
        return stints

    def record(self, run_dir: Path, since: float, until: float | None = None) -> dict:
        """summary.json's ``gpu_sharing``: K, the GPU, the neighbours (the other runs whose time on this GPU
        overlapped this run's) and ``share``: the run's share of the GPU over [since, until] (1.0 alone)."""
        until = time.time() if until is None else until
        me = str(Path(run_dir).resolve())
        stints = self.intervals(until)
        others = [(run, a, b) for run, a, b in stints if run != me and a < until and b > since]
        neighbours = sorted({run for run, _, _ in others})
        return {
            "runs_per_gpu": self.runs_per_gpu,
            "gpu": self.gpu,
            "neighbours": neighbours,
            "share": round(gpu_share(since, until, [(a, b) for _, a, b in others]), 4),
        }

    def estimate_gb(self, run_dir: Path) -> float | None:
        path = self.ledger / ESTIMATES
        try:
            return json.loads(path.read_text()).get(str(Path(run_dir).resolve()))
        except (OSError, ValueError):
            return None


# run dir -> when this process began it on its shared GPU (``began``): the start of what its summary splits
_began: dict[str, float] = {}


def began(share: Share, run_dir: Path, now: float) -> None:
    _began[str(Path(run_dir).resolve())] = share.begin(run_dir, now)


def sharing_record(run_dir: Path) -> dict | None:
    """summary.json's ``gpu_sharing`` for a run on a shared GPU (``Share.record``), None for one that is not."""
    share = from_env()
    since = _began.get(str(Path(run_dir).resolve()))
    return None if share is None or since is None else share.record(run_dir, since)


def gpu_share(since: float, until: float, others: list[tuple[float, float]]) -> float:
    """∫ 1/n(t) dt / (until - since) over the run's time, n(t) the runs on the GPU at t (the run included)."""
    if until <= since:
        return 1.0
    cuts = sorted({since, until, *(t for a, b in others for t in (a, b) if since < t < until)})
    total = 0.0
    for a, b in zip(cuts, cuts[1:]):
        middle = (a + b) / 2
        n = 1 + sum(1 for s, e in others if s <= middle < e)
        total += (b - a) / n
    return total / (until - since)


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def from_env(env: dict | None = None) -> Share | None:
    """The share the launcher set for this process, or None (a GPU, or the CPUs, of its own)."""
    raw = (os.environ if env is None else env).get(SHARE_ENV)
    if not raw:
        return None
    data = json.loads(raw)
    return Share(Path(data["ledger"]), str(data["gpu"]), int(data["runs_per_gpu"]))


def share_env(ledger: Path, gpu: str, runs_per_gpu: int) -> str:
    return json.dumps({"ledger": str(ledger), "gpu": str(gpu), "runs_per_gpu": runs_per_gpu})


def is_out_of_memory(exc: BaseException) -> bool:
    """torch.cuda.OutOfMemoryError (or a RuntimeError that says it), told without importing torch."""
    return type(exc).__name__ == "OutOfMemoryError" or "CUDA out of memory" in str(exc)


def measured_peak_gb() -> float | None:
    """torch.cuda.max_memory_allocated in GB where torch is imported and CUDA is up; else None."""
    torch: Any = sys.modules.get("torch")
    try:
        if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
            return None
        return torch.cuda.max_memory_allocated() / 1024**3
    except Exception:  # a broken CUDA context after the failure: nothing measured
        return None


def out_of_memory_line(share: Share, run_dir: Path, since: float) -> str:
    """The one line a run that ran out of GPU memory beside others fails with."""
    estimate = share.estimate_gb(run_dir)
    peak = measured_peak_gb()
    neighbours = share.record(run_dir, since)["neighbours"]
    return (
        f"out of GPU memory on GPU {share.gpu}, shared by up to {share.runs_per_gpu} runs "
        f"({len(neighbours)} trained beside it): the gate estimated "
        f"{'?' if estimate is None else f'{estimate:.1f}'} GB for it, it measured "
        f"{'?' if peak is None else f'{peak:.1f}'} GB (torch.cuda.max_memory_allocated); its neighbours go on. "
        "Lower hydra.launcher.runs_per_gpu, or the run's batch or vLLM share"
    )
