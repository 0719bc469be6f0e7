"""Time the answer rewards and the lenient extractor on pathological layouts, at two sizes, to show the cost grows
linearly (the tests check what they return; how long they take is measured here).

    python -m bench.pathological_inputs            # prints a table;
                                                   # --json writes bench/results/pathological_inputs.json

A ratio near 2 when the input doubles is linear; near 4 quadratic.
"""

from __future__ import annotations

from bench._common import parser, seconds_each, write
from grpo_sweep.rewards import REWARDS
from grpo_sweep.rewards.answer import extract_lenient

LAYOUTS = {
    "think-answer-pairs": lambda n: "<think>" + "</think><answer>" * n,
    "many-closers": lambda n: "<think>x</think><answer>" + "</answer> " * n,
    "deep-think": lambda n: "<think>" * n + "</think>" * n,
    "deep-boxed": lambda n: "<answer>" + "\\boxed{" * n + "}" * (n - 1) + "</answer>",
    "many-boxed": lambda n: "\\boxed{1}" * n,
    "many-blocks": lambda n: "</think>" + "<answer></answer>" * n,
}
LENIENT = {
    "dots": lambda n: "a" + " ." * n,
    "commands": lambda n: " \\a" * n + "!",
    "dollars": lambda n: "$" * (2 * n),
    "commas": lambda n: "1," * n,
    "parens": lambda n: "\\(" * n,
}
REWARD_NAMES = ("correct", "boxed", "int", "format", "strict_format", "soft_format", "xmlcount")


def seconds(fn, repeat: int = 3) -> float:
    return min(seconds_each(fn, repeat))


def main() -> None:
    cli = parser(__doc__)
    cli.add_argument("--n", type=int, default=20_000, help="repeats of the pattern (the second size is twice it)")
    cli.add_argument("--json", action="store_true")
    args = cli.parse_args()
    REWARDS["correct"](completions=["<answer>1</answer>"], ground_truth=["1"])  # the math helper started
    rows = []
    for name, make in LAYOUTS.items():
        for reward in REWARD_NAMES:
            fn = REWARDS[reward]
            small = seconds(lambda: fn(completions=[make(args.n)], ground_truth=["12"]))
            large = seconds(lambda: fn(completions=[make(2 * args.n)], ground_truth=["12"]))
            rows.append(
                {
                    "input": name,
                    "function": reward,
                    "n": args.n,
                    "s": round(small, 4),
                    "s_2n": round(large, 4),
                    "ratio": round(large / small, 2) if small > 0 else None,
                }
            )
    for name, make in LENIENT.items():
        small = seconds(lambda: extract_lenient(make(args.n)))
        large = seconds(lambda: extract_lenient(make(2 * args.n)))
        rows.append(
            {
                "input": name,
                "function": "extract_lenient",
                "n": args.n,
                "s": round(small, 4),
                "s_2n": round(large, 4),
                "ratio": round(large / small, 2) if small > 0 else None,
            }
        )
    width = max(len(r["input"]) for r in rows)
    print(f"{'input':<{width}}  {'function':<16} {'n':>7} {'s':>8} {'s at 2n':>8} {'ratio':>6}")
    for r in rows:
        print(
            f"{r['input']:<{width}}  {r['function']:<16} {r['n']:>7} {r['s']:>8.4f} {r['s_2n']:>8.4f} {r['ratio']!s:>6}"
        )
    worst = max(rows, key=lambda r: r["s_2n"])
    print(f"slowest: {worst['function']} on {worst['input']}: {worst['s_2n']:.3f} s at n={2 * args.n}")
    if args.json:
        write("pathological_inputs.json", rows)


if __name__ == "__main__":
    main()
