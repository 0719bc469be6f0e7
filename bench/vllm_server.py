"""The generation server's lifecycle cost on this machine, with the loopback stand-in for `trl vllm-serve`.

    python -m bench.vllm_server        # ~15 s; prints the numbers, writes bench/results/vllm_server.json

start-to-healthy: `serving()` entered to the block running (ports claimed, process started, /health answered);
stop: the block left to the process group gone and the ports released (SIGTERM honoured; SIGTERM ignored, so
SIGKILL after a 1 s grace); failure detection: a server that exits at once, until ServerError.
The stand-in is a Python http.server: these numbers are the orchestration's overhead, not vLLM's start-up (a 7B
model's load and CUDA graph capture take minutes; only a GPU check measures those).
"""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._common import ROOT, median_ms, parser, record
from grpo_sweep.backends.vllm_server import ServerError, ServerSpec, serving

STANDIN = ROOT / "tests" / "vllm_standin.py"  # the tests' stand-in server, run as a program (nothing imported)
REPEATS = 10


def standin(mode):
    return lambda spec, port: [sys.executable, str(STANDIN), mode, "--host", spec.host, "--port", str(port)]


def lifecycle(mode: str, grace: float, tmp: Path) -> tuple[float, float]:
    spec = ServerSpec(model="standin", startup_timeout_s=30, stop_grace_s=grace)
    entered = time.perf_counter()
    with serving(spec, tmp, command=standin(mode), lock_dir=tmp / "locks"):
        up = time.perf_counter()
    return up - entered, time.perf_counter() - up


def main() -> None:
    parser(__doc__).parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        ok = [lifecycle("ok", 30, tmp) for _ in range(REPEATS)]
        stubborn = [lifecycle("stubborn", 1.0, tmp) for _ in range(3)]
        failures = []
        for _ in range(REPEATS):
            started = time.perf_counter()
            try:
                with serving(
                    ServerSpec(model="standin", startup_timeout_s=30),
                    tmp,
                    command=standin("exit"),
                    lock_dir=tmp / "locks",
                ):
                    pass
            except ServerError:
                failures.append(time.perf_counter() - started)

    def ms(xs):
        return round(1000 * statistics.median(xs), 1)

    record(
        "vllm_server",
        {
            "host": f"{platform.machine()}, {len(os.sched_getaffinity(0))} CPUs visible",
            "repeats": REPEATS,
            "python_startup_ms (median, bare `python -c 'import http.server'`)": median_ms(
                lambda: subprocess.run([sys.executable, "-c", "import http.server"], check=True), 5
            ),
            "start_to_healthy_ms (median)": ms([u for u, _ in ok]),
            "start_to_healthy_ms (max)": round(1000 * max(u for u, _ in ok), 1),
            "stop_sigterm_ms (median)": ms([s for _, s in ok]),
            "stop_sigterm_ignored_grace_1s_ms (median of 3)": ms([s for _, s in stubborn]),
            "exit_at_once_detected_ms (median)": ms(failures),
        },
    )


if __name__ == "__main__":
    main()
