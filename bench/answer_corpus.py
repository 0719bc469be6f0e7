"""Score the answer corpus (tests/answer_corpus.py) with `correct` and `boxed`: misses by form, and the time taken.

    python -m bench.answer_corpus                      # this checkout's rewards
    python -m bench.answer_corpus --code /tmp/base     # another checkout's
                                                       # (e.g. `git archive <commit> | tar -x -C /tmp/base`)

`correct` gets each answer inside <answer> (alone and after a <think> block); `boxed` gets each box-bearing row as
written and each one-span row with its span boxed, after a line of reasoning (as tests/test_answer_corpus.py does).
A false negative is a row that should pay 1 and scored 0; a false positive, one that should pay 0 and scored 1.
"""

from __future__ import annotations

import collections
import importlib.util
import os
import sys
import time
from pathlib import Path

from bench._common import ROOT, parser


def load(path: Path, name: str):
    """The corpus, read as the data file it is (the tests' own; this scores it, it imports no test code)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    cli = parser(__doc__)
    cli.add_argument("--code", default=str(ROOT), help="checkout whose grpo_sweep scores the corpus")
    args = cli.parse_args()
    code = str(Path(args.code).resolve())
    if code != str(ROOT):  # another checkout's grpo_sweep ahead of this one's: the one benchmark that measures another
        sys.path.insert(0, code)
    os.chdir(
        code
    )  # the math helper process (python -m grpo_sweep.rewards.mathcheck) imports from the working directory
    from grpo_sweep.rewards import REWARDS, answer

    corpus = load(ROOT / "tests" / "answer_corpus.py", "answer_corpus")
    rows, variant = corpus.ROWS, corpus.boxed_variant

    correct_texts = [f"<answer>{a}</answer>" for _, a, *_ in rows] + [
        f"<think>\nreasoning\n</think>\n<answer>{a}</answer>" for _, a, *_ in rows
    ]
    correct_truths = [r[2] for r in rows] * 2
    correct_want = [r[3] for r in rows] * 2
    correct_forms = [r[0] for r in rows] * 2
    boxed_cases = [(r[0], r[1], r[2], r[4]) for r in rows if r[4] is not None]
    boxed_cases += [(r[0], v, r[2], r[3]) for r in rows if (v := variant(r[1])) is not None]

    REWARDS["correct"](completions=["<answer>1</answer>"], ground_truth=["\\frac{1}{1}"])  # start the math helper
    answer._compare.cache_clear()
    start = time.perf_counter()
    got_correct = REWARDS["correct"](completions=correct_texts, ground_truth=correct_truths)
    got_boxed = REWARDS["boxed"](
        completions=[f"Let me compute step by step.\n{text}" for _, text, _, _ in boxed_cases],
        ground_truth=[c[2] for c in boxed_cases],
    )
    elapsed = time.perf_counter() - start

    right = sum(r[3] for r in rows)
    print(f"code: {code}")
    print(
        f"corpus: {len(rows)} rows, {right} right, {len(rows) - right} wrong; boxed cases {len(boxed_cases)} "
        f"({sum(c[3] for c in boxed_cases)} right)"
    )
    forms = collections.Counter((r[0], r[3]) for r in rows)
    print(
        "by form (right/wrong): " + ", ".join(f"{f} {forms[f, 1]}/{forms[f, 0]}" for f in sorted({r[0] for r in rows}))
    )
    for name, got, want, forms_, labels in (
        ("correct", got_correct, correct_want, correct_forms, correct_texts),
        ("boxed", got_boxed, [c[3] for c in boxed_cases], [c[0] for c in boxed_cases], [c[1] for c in boxed_cases]),
    ):
        fn = [(f, t) for g, w, f, t in zip(got, want, forms_, labels) if w == 1 and g != 1]
        fp = [(f, t) for g, w, f, t in zip(got, want, forms_, labels) if w == 0 and g != 0]
        print(f"{name}: {len(got)} scored, false negatives {len(fn)}, false positives {len(fp)}")
        for kind, found in (("FN", fn), ("FP", fp)):
            by_form = collections.Counter(f for f, _ in found)
            if found:
                print(f"  {kind} by form: " + ", ".join(f"{f} {n}" for f, n in by_form.most_common()))
                for f, t in found:
                    print(f"    {kind} [{f}] {t!r}")
    print(
        f"scoring time (helper warm, comparison cache cleared): {elapsed:.2f} s for "
        f"{len(got_correct) + len(got_boxed)} completions"
    )
    from grpo_sweep.rewards.mathcheck import one_answer

    answers = [r[1] for r in rows]
    start = time.perf_counter()
    for _ in range(50):
        for text in answers:
            one_answer(text)
    print(
        f"mathcheck.one_answer: {(time.perf_counter() - start) / (50 * len(answers)) * 1e6:.1f} us per answer "
        f"(50 x {len(answers)})"
    )
    crafted = {  # 500 characters each (the longest answer read): nesting, unpaired markers, many tokens
        "$1 ": 166,
        "**": 250,
        "(": 250,
        "$": 500,
        "**1** ": 83,
        "*a ": 166,
        "_": 500,
        "(ab ": 125,
        "**a": 166,
        "a:": 250,
        "x ": 250,
        "1 ": 250,
        "**$1$** (a) ": 40,
        "`": 500,
    }
    slowest = 0.0
    for piece, n in crafted.items():
        start = time.perf_counter()
        one_answer((piece * n)[:500])
        slowest = max(slowest, time.perf_counter() - start)
    print(f"mathcheck.one_answer on {len(crafted)} crafted 500-character inputs: slowest {slowest * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
