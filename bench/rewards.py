"""Time each built-in reward per 1,000 completions (realistic mixed completions, both formats).

    python bench/rewards.py            # prints a table, writes bench/results/rewards.json
"""
from __future__ import annotations

import json
import platform
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grpo_sweep.rewards import REWARDS  # noqa: E402


def completions(n: int, seed: int = 0) -> tuple[list, list[str], list[list[int]]]:
    rng = random.Random(seed)
    texts, truths = [], []
    for i in range(n):
        a, b = rng.randint(1, 99), rng.randint(1, 99)
        answer = rng.choice([str(a + b), str(a + b + 1), f"\\frac{{{2 * (a + b)}}}{{2}}", "unsure"])
        body = f"<think>\n{a} + {b} means adding {a} and {b}.\n</think>\n<answer>\n{answer}\n</answer>\n"
        texts.append(rng.choice([body, body + " extra", f"\\boxed{{{answer}}}", body.replace("\n", " ")]))
        truths.append(str(a + b))
    chats = [[{"role": "assistant", "content": t}] for t in texts]
    ids = [[0] * (len(t) // 4) for t in texts]
    return chats, truths, ids


def main() -> None:
    n, repeats = 1000, 5
    results = {}
    for name, fn in REWARDS.items():
        if name == "code":  # runs programs in a sandbox: timed by bench/faults.py
            continue
        times = []
        for r in range(repeats):
            # fresh completions each repeat, so math-verify's parse cache does not flatter `correct`
            chats, truths, ids = completions(n, seed=r)
            start = time.perf_counter()
            fn(completions=chats, ground_truth=truths, completion_ids=ids, max_completion_length=256)
            times.append(time.perf_counter() - start)
        results[name] = {
            "median_ms_per_1000": round(1000 * statistics.median(times), 2),
            # the least disturbed repeat: on a shared machine the median also measures the neighbours
            "min_ms_per_1000": round(1000 * min(times), 2),
            "repeats": repeats,
        }
    print(f"{'reward':<15} ms per 1,000 completions, median and min of {repeats}")
    for name, r in results.items():
        print(f"{name:<15} {r['median_ms_per_1000']:>10.2f} {r['min_ms_per_1000']:>10.2f}")
    out = Path(__file__).parent / "results" / "rewards.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"machine": platform.processor() or platform.machine(), "results": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
