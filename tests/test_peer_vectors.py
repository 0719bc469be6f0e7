"""Peer projects' reward test vectors (Math-Verify, open-r1, TRL, verl), run through grpo-sweep's rewards.

The vectors live in tests/peer_vectors/, one module per source, with their provenance; README.md there gives the
translation rules, the counts and every deliberate difference. Expected values are the peer's, changed only
where a grpo-sweep rule deliberately differs (DIFFERENCES below, each with its reason).
"""

from __future__ import annotations

import pytest

from grpo_sweep.rewards import REWARDS
from tests.peer_vectors import math_verify, open_r1, trl, verl

THINK = "<think>x</think>\n"
_DELIMITERS = (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))


def bare(text: str) -> str | None:
    """`text` without one enclosing math delimiter pair; None when it is not one math span."""
    t = text.strip()
    for left, right in _DELIMITERS:
        if t.startswith(left) and t.endswith(right) and len(t) > len(left) + len(right):
            inner = t[len(left) : -len(right)]
            if "$" not in inner.replace("\\$", ""):
                return inner.strip()
    return None if "$" in t.replace("\\$", "") else t


def answer_completion(answer: str) -> list[dict]:
    return [{"role": "assistant", "content": f"{THINK}<answer>{answer}</answer>"}]


def boxed_completion(pred: str) -> list[dict] | None:
    """The prediction as a `boxed` completion: verbatim when it has a \\boxed{}, else its one math span boxed."""
    if "\\boxed{" in pred:
        return [{"role": "assistant", "content": pred}]
    inner = bare(pred)
    return None if inner is None else [{"role": "assistant", "content": f"{THINK}\\boxed{{{inner}}}"}]


def first_box_to_answer(text: str) -> str:
    """TRL's `\\boxed{X}` answers as grpo-sweep's `<answer>X</answer>` (balanced braces)."""
    out, start = "", 0
    while (i := text.find("\\boxed{", start)) != -1:
        depth = 0
        for j in range(i + len("\\boxed"), len(text)):
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            if depth == 0:
                break
        out += text[start:i] + "<answer>" + text[i + len("\\boxed{") : j] + "</answer>"
        start = j + 1
    return out + text[start:]


def unbox(gold: str) -> str:
    return gold[len("\\boxed{") : -1] if gold.startswith("\\boxed{") and gold.endswith("}") else gold


# (vector id, reward) -> (grpo-sweep's expected value, why it differs from the peer). Listed in README.md too.
APPROX = (
    "an approximation is not an answer: `\\approx` is rejected by the one-answer rule (math-verify reads the value "
    "before it and ignores the rest)"
)
DIFFERENCES: dict[tuple[str, str], tuple[float | None, str]] = {
    ("math_verify-test_string_extraction-9", "correct"): (
        0.0,
        "1 - 1/e is not 1 + 1/e; Math-Verify's expectation records a quirk of its \\mathrm{e} parsing",
    ),
    ("math_verify-test_string_extraction-9", "boxed"): (
        0.0,
        "1 - 1/e is not 1 + 1/e; Math-Verify's expectation records a quirk of its \\mathrm{e} parsing",
    ),
    ("math_verify-test_math_extraction_additional_cases-17", "boxed"): (
        0.0,
        "two distinct boxes (the intermediate 200 and 255) are an answer of two parts, and the truth 10455 has "
        "one; Math-Verify prefers the later 'Final Answer: ... $10,455$'",
    ),
    ("trl-test_accuracy_reward_unparsable_gold-0", "boxed"): (
        0.0,
        "a word ground truth is compared as a normalised string, so it is judgeable; no \\boxed{} scores 0 (TRL: "
        "None, skip)",
    ),
    ("trl-test_accuracy_reward_unparsable_gold-1", "boxed"): (
        0.0,
        "a word ground truth is compared as a normalised string, so it is judgeable; 43 is not it (TRL: None, skip)",
    ),
    ("trl-test_accuracy_reward_unparsable_gold-1", "correct"): (
        0.0,
        "a word ground truth is compared as a normalised string, so it is judgeable; 43 is not it (TRL: None, skip)",
    ),
    ("trl-test_unparsable_gold_solution_yields_none_reward-0", "boxed"): (
        0.0,
        "a word ground truth is compared as a normalised string; the digits 42 are not the words 'forty two' "
        "(TRL: None, skip)",
    ),
    ("trl-test_unparsable_gold_solution_yields_none_reward-0", "correct"): (
        0.0,
        "a word ground truth is compared as a normalised string; the digits 42 are not the words 'forty two' "
        "(TRL: None, skip)",
    ),
    **{
        (f"math_verify-test_relations_math-{index}", reward): (0.0, APPROX)
        for index in (13, 15, 16)
        for reward in ("correct", "boxed")
    },
    ("math_verify-test_number_extraction-2", "correct"): (
        0.0,
        "a space is not read as a thousands separator: `1 000` is as likely the two answers 1 and 000 (`12 130`), "
        "and math-verify adds spaced numbers (`12 13` is 25)",
    ),
    ("math_verify-test_number_extraction-2", "boxed"): (
        0.0,
        "a space is not read as a thousands separator: `1 000` is as likely the two answers 1 and 000 (`12 130`), "
        "and math-verify adds spaced numbers (`12 13` is 25)",
    ),
    ("math_verify-test_number_extraction-12", "correct"): (
        0.0,
        "a stray `$` after the number is malformed math (an unclosed span or a misplaced currency sign); the "
        "one-answer rule does not guess which",
    ),
    ("math_verify-test_latex_notation_math-6", "correct"): (
        0.0,
        "a chained equation must have every side equal the answer; `f(-2)+f(-1)+f(0)` is an unknown function, not "
        "14/3 (and a \\boxed{} inside an answer is a second answer)",
    ),
}

# Differences grpo-sweep keeps but cannot honour yet because math-verify itself gets them wrong: strict xfails, so
# an upstream fix shows up as XPASS.
UPSTREAM = {
    (
        "math_verify-test_string_extraction-9",
        "correct",
    ): "math-verify 0.9.0 parses 1 - \\frac{1}{\\mathrm{e}} (and 1 + ...) as just 1",
    (
        "math_verify-test_string_extraction-9",
        "boxed",
    ): "math-verify 0.9.0 parses 1 - \\frac{1}{\\mathrm{e}} (and 1 + ...) as just 1",
}


def _case(reward: str, vid: str, completion, truth, peer_expected):
    expected, _why = DIFFERENCES.get((vid, reward), (peer_expected, ""))
    marks = [pytest.mark.xfail(strict=True, reason=UPSTREAM[(vid, reward)])] if (vid, reward) in UPSTREAM else []
    return pytest.param(reward, completion, truth, expected, id=f"{reward}-{vid}", marks=marks)


def math_cases() -> list:
    cases = []
    for ref, index, _gold, truth, pred, expected, rewards in math_verify.VECTORS:
        vid = f"math_verify-{ref.split('::')[1]}-{index}"
        if "correct" in rewards:
            cases.append(_case("correct", vid, answer_completion(pred), truth, float(expected)))
        if "boxed" in rewards and (completion := boxed_completion(pred)) is not None:
            cases.append(_case("boxed", vid, completion, truth, float(expected)))
    for source, rows in (("open_r1", open_r1.ACCURACY), ("trl", trl.ACCURACY), ("trl", trl.REASONING_ACCURACY)):
        for test, index, content, solution, expected in rows:
            vid = f"{source}-{test}-{index}"
            truth = unbox(solution)
            cases.append(_case("boxed", vid, [{"role": "assistant", "content": content}], truth, expected))
            if rows is trl.REASONING_ACCURACY:
                answer = first_box_to_answer(content)  # its tags already say where reasoning ends
                cases.append(_case("correct", vid, [{"role": "assistant", "content": answer}], truth, expected))
            elif "\\boxed{" in content:  # free text without a box has no answer to put in <answer>
                cases.append(_case("correct", vid, answer_completion(content), truth, expected))
    for test, index, gt, pred, expected in verl.IS_EQUIV:
        vid = f"verl-{test}-{index}"
        cases.append(_case("correct", vid, answer_completion(pred), unbox(gt), expected))
        cases.append(
            _case("boxed", vid, [{"role": "assistant", "content": f"{THINK}\\boxed{{{pred}}}"}], unbox(gt), expected)
        )
    return cases


MATH_CASES = math_cases()


@pytest.mark.parametrize("reward, completion, truth, expected", MATH_CASES)
def test_answer_rewards_match_peer_vectors(reward, completion, truth, expected):
    assert REWARDS[reward](completions=[completion], ground_truth=[truth]) == [expected]


def format_cases() -> list:
    cases = []
    for test, index, content, expected in open_r1.FORMAT:
        # open-r1's layout (tags on their own lines) is the walkthrough's: strict_format must agree as well
        for reward in ("format", "strict_format"):
            cases.append(_case(reward, f"open_r1-{test}-{index}", content, None, expected))
    for test, index, content, expected in trl.THINK_FORMAT:
        # think_format accepts anything after </think>; with that text as the <answer> it is format's question
        content = content.replace("This is my answer.", "<answer>This is my answer.</answer>")
        cases.append(_case("format", f"trl-{test}-{index}", content, None, expected))
    for test, index, content, expected in open_r1.TAG_COUNT:
        cases.append(_case("xmlcount", f"open_r1-{test}-{index}", content, None, expected))
    return cases


@pytest.mark.parametrize("reward, completion, truth, expected", format_cases())
def test_format_rewards_match_peer_vectors(reward, completion, truth, expected):
    for completions in ([completion], [[{"role": "assistant", "content": completion}]]):
        assert REWARDS[reward](completions=completions) == [expected]


def length_cases() -> list:
    return [
        pytest.param(tokens, max_len, peer, id=f"length-{source}-{test}-{index}")
        for source, rows in (("open_r1", open_r1.LENGTH), ("trl", trl.LENGTH))
        for test, index, tokens, max_len, peer in rows
    ]


@pytest.mark.parametrize("tokens, max_len, peer", length_cases())
def test_length_on_peer_token_counts(tokens, max_len, peer):
    # Peers shape length into a penalty (overlong) or scale correctness by it (cosine); grpo-sweep's `length` is
    # the plain fraction of the budget. Expected values are grpo-sweep's contract on the peers' token counts; the
    # ordering check below is where the semantics meet.
    long = REWARDS["length"](completions=["x"], completion_ids=[[1] * tokens], max_completion_length=max_len)
    short = REWARDS["length"](
        completions=["x"], completion_ids=[[1] * tokens], max_completion_length=max_len, prefer="short"
    )
    assert long == [min(1.0, tokens / max_len)]
    assert short == [pytest.approx(1.0 - min(1.0, tokens / max_len))]


LENGTH_FAMILIES = {
    "open_r1-soft_overlong": [r for r in open_r1.LENGTH if "overlong" in r[0]],
    "trl-soft_overlong": [r for r in trl.LENGTH if "overlong" in r[0]],
    "trl-cosine_correct": [r for r in trl.LENGTH if "overlong" not in r[0]],
}


@pytest.mark.parametrize("rows", list(LENGTH_FAMILIES.values()), ids=list(LENGTH_FAMILIES))
def test_length_prefer_short_orders_like_the_peers(rows):
    # Each peer length term (one reward function per family) never rewards a longer completion more; nor does
    # prefer=short, which also strictly prefers the shorter one while both are under the budget.
    ranked = sorted(rows, key=lambda row: row[2])
    for (_, _, n_a, max_a, peer_a), (_, _, n_b, max_b, peer_b) in zip(ranked, ranked[1:]):
        a, b = (
            REWARDS["length"](completions=["x"], completion_ids=[[1] * n], max_completion_length=m, prefer="short")[0]
            for n, m in ((n_a, max_a), (n_b, max_b))
        )
        assert peer_a >= peer_b and a >= b
        if min(n_b, max_b) > n_a:
            assert a > b


# The counts in tests/peer_vectors/README.md: a vector silently dropped by a translation rule fails here.
COUNTS = {"correct": 153, "boxed": 198, "format": 25, "strict_format": 7, "xmlcount": 6, "length": 12}


def test_vector_counts_match_the_readme():
    counts = {"length": len(length_cases())}
    for case in MATH_CASES + format_cases():
        counts[case.values[0]] = counts.get(case.values[0], 0) + 1
    assert counts == COUNTS
    assert sum(counts.values()) >= 300
    differences = {}
    for _vid, reward in DIFFERENCES:
        differences[reward] = differences.get(reward, 0) + 1
    assert differences == {"correct": 9, "boxed": 9}  # README.md's "Differences" counts
    ids = {case.id for case in MATH_CASES}
    assert all(f"{reward}-{vid}" in ids for vid, reward in DIFFERENCES)  # none left over from a renamed vector
