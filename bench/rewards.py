"""Time each built-in reward per 1,000 completions (realistic mixed completions, both formats).

python -m bench.rewards            # prints a table, writes bench/results/rewards.json
"""

from __future__ import annotations

import random
import statistics

from bench._common import machine, parser, seconds_each, write
from grpo_sweep.rewards import REWARDS


def completions(n: int, seed: int = 0) -> tuple[list, list[str], list[list[int]]]:
    rng = random.Random(seed)
    texts, truths = [], []
    for _ in range(n):
        a, b = rng.randint(1, 99), rng.randint(1, 99)
        answer = rng.choice([str(a + b), str(a + b + 1), f"\\frac{{{2 * (a + b)}}}{{2}}", "unsure"])
        body = f"<think>\n{a} + {b} means adding {a} and {b}.\n</think>\n<answer>\n{answer}\n</answer>\n"
        texts.append(rng.choice([body, body + " extra", f"\\boxed{{{answer}}}", body.replace("\n", " ")]))
        truths.append(str(a + b))
    chats = [[{"role": "assistant", "content": t}] for t in texts]
    ids = [[0] * (len(t) // 4) for t in texts]
    return chats, truths, ids


def main() -> None:
    parser(__doc__).parse_args()
    n, repeats = 1000, 5
    results = {}
    for name, fn in REWARDS.items():
        if name == "code":  # runs programs in a sandbox: timed by bench/faults.py
            continue
        times = []
        for r in range(repeats):
            # fresh completions each repeat, so math-verify's parse cache does not flatter `correct`
            chats, truths, ids = completions(n, seed=r)
            times += seconds_each(
                lambda: fn(completions=chats, ground_truth=truths, completion_ids=ids, max_completion_length=256), 1
            )
        results[name] = {
            "median_ms_per_1000": round(1000 * statistics.median(times), 2),
            # the least disturbed repeat: on a shared machine the median also measures the neighbours
            "min_ms_per_1000": round(1000 * min(times), 2),
            "repeats": repeats,
        }
    print(f"{'reward':<15} ms per 1,000 completions, median and min of {repeats}")
    for name, r in results.items():
        print(f"{name:<15} {r['median_ms_per_1000']:>10.2f} {r['min_ms_per_1000']:>10.2f}")
    write("rewards.json", {"machine": machine(), "results": results})


if __name__ == "__main__":
    main()
