"""Cost of the safety machinery, and what survives injected faults.

    python -m bench.faults        # prints the numbers, writes bench/results/faults.json

- sandbox cost per execution (namespaces vs rlimits), and a batch of 16 completions through the `code` reward;
- hostile programs (infinite loop, fork bomb, memory bomb, disk bomb, network, secrets, escape): score, time
  to contain, and whether anything was left behind;
- math-verify through the helper process vs in-process, and the time to recover from a hung comparison;
- the reward guard's overhead on a cheap reward.
"""

from __future__ import annotations

import os
import platform
import subprocess
import time

from bench._common import machine, median_ms, parser, record
from grpo_sweep.rewards import REWARDS, mathcheck
from grpo_sweep.rewards.guard import guarded
from grpo_sweep.rewards.sandbox import Limits, execute

ADD = ["assert add(1, 2) == 3", "assert add(-1, 1) == 0", "assert add(2, 2) == 4"]
GOOD = "def add(a, b):\n    return a + b"
HOSTILE = {
    "infinite loop": "while True:\n    pass",
    "fork bomb": "import os\nwhile True:\n    os.fork()",
    "memory bomb": "x = bytearray(8 * 1024**3)",
    "disk bomb": "with open('big', 'wb') as f:\n    while True: f.write(b'x' * 2**20)",
    "socket to 1.1.1.1:53": "import socket\nsocket.create_connection(('1.1.1.1', 53), timeout=2)",
    "read WANDB_API_KEY": "import os\nassert os.environ['WANDB_API_KEY']",
    "write outside its dir": "open(os.path.expanduser('~/escaped'), 'w').write('x')",
    "kill the parent": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nos.kill(1, signal.SIGKILL)",
}


def leftovers() -> int:
    out = subprocess.run(["ps", "-u", "65534", "-o", "pid="], capture_output=True, text=True)
    return len(out.stdout.split())


def main() -> None:
    parser(__doc__).parse_args()
    os.environ.setdefault("WANDB_API_KEY", "bench-fake-key-0123456789")
    results: dict = {"machine": machine(), "python": platform.python_version()}

    cost = {}
    for isolation in ("namespaces", "rlimits"):
        execute(GOOD, ADD, Limits(), isolation)  # warm caches
        cost[isolation] = median_ms(lambda: execute(GOOD, ADD, Limits(), isolation), 30)
    batch = ["```python\n" + GOOD + "\n```"] * 16
    for workers in (1, 2, 4):
        cost[f"code reward, 16 completions, workers={workers}"] = median_ms(
            lambda: REWARDS["code"](completions=batch, tests=[ADD] * 16, workers=workers), 3
        )
    results["sandbox_ms_per_execution"] = cost

    faults = {}
    for name, program in HOSTILE.items():
        start = time.perf_counter()
        result = execute(
            program + "\ndef add(a, b): return a + b", ADD, Limits(timeout_s=3, per_test_s=1, memory_mb=256)
        )
        seconds = time.perf_counter() - start
        after = execute(GOOD, ADD).score
        faults[name] = {
            "score": result.score,
            "status": result.status,
            "seconds": round(seconds, 2),
            "next_execution_score": after,
            "processes_left": leftovers(),
        }
    results["fault_injection"] = faults

    # math-verify: helper process vs in-process, uncached latex comparisons
    from math_verify import parse, verify

    pairs = [(str(i), f"\\frac{{{2 * i}}}{{2}}") for i in range(200, 260)]
    mathcheck.HELPER.compare("1", "1")
    start = time.perf_counter()
    for truth, cand in pairs:
        mathcheck.HELPER.compare(truth, cand)
    helper_ms = 1000 * (time.perf_counter() - start) / len(pairs)
    pairs = [(str(i), f"\\frac{{{2 * i}}}{{2}}") for i in range(300, 360)]
    start = time.perf_counter()
    for truth, cand in pairs:
        verify(parse(truth, parsing_timeout=None), parse(cand, parsing_timeout=None), timeout_seconds=None)
    inproc_ms = 1000 * (time.perf_counter() - start) / len(pairs)
    start = time.perf_counter()
    hung = mathcheck.HELPER.compare("3", "(2^{2^{2^{2^{2}}}})!", timeout_s=2.0)
    hang_s = time.perf_counter() - start
    start = time.perf_counter()
    mathcheck.HELPER.compare("12", "\\frac{24}{2}")
    restart_s = time.perf_counter() - start
    results["math_verify"] = {
        "helper_ms_per_comparison": round(helper_ms, 2),
        "in_process_ms_per_comparison": round(inproc_ms, 2),
        "hung_comparison_score": hung,
        "hung_comparison_seconds_with_timeout_2s": round(hang_s, 2),
        "helper_restart_seconds": round(restart_s, 2),
    }

    texts = [f"<think>{i}</think><answer>{i}</answer>" for i in range(1000)]
    raw, wrapped = REWARDS["xmlcount"], guarded(REWARDS["xmlcount"], "xmlcount")
    results["guard_overhead_ms_per_1000"] = {
        "raw": median_ms(lambda: raw(completions=texts), 20),
        "guarded": median_ms(lambda: wrapped(completions=texts), 20),
    }

    record("faults", results)


if __name__ == "__main__":
    main()
