"""The answer corpus (tests/answer_corpus.py): `correct` and `boxed` score every row as expected, no false positive,
no false negative.

`correct` gets each row's answer inside ``<answer>…</answer>``: alone, after a ``<think>`` block, and as a chat
message. `boxed` gets, with a line of reasoning (or a ``<think>`` block) before it, (a) each row whose answer holds a
``\\boxed{}``, as written, expecting the row's `boxed` score, and (b) each row whose answer holds one ``$…$`` span and
no digit outside it, with that span boxed (``The answer is $\\boxed{72}$.``, how a boxed-answer model writes the same
sentence), expecting the row's `correct` score. Rows without a box must earn no `boxed` reward.
"""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grpo_sweep.rewards import REWARDS
from grpo_sweep.rewards.answer import equivalent
from tests.answer_corpus import ROWS, boxed_variant

ISSUE_TABLE = [
    ("**72**", "72"),
    ("The answer is $72$.", "72"),
    ("Answer $ 9 $", "9"),
    ("is $32,\\!349$", "32349"),
    ("Therefore $\\boxed{\\frac94\\pi}$.", "\\frac{9}{4}\\pi"),
    ("The answer is $\\boxed{\\sqrt 2+\\sqrt 5}$", "\\sqrt{2}+\\sqrt{5}"),
    ("$\\boxed{28}$ pct", "28\\%"),
]
LAYOUTS = {
    "bare": "<answer>{}</answer>",
    "after-think": "<think>\nLet me compute step by step. 8 * 9 = 72.\n</think>\n<answer>{}</answer>",
    "spaced": "<think>\nreasoning\n</think>\n\n<answer>\n{}\n</answer>\n",
}
BOXED_LAYOUTS = {
    "after-reasoning": "Let me compute step by step. First, 8 * 9 = 72.\n{}",
    "after-think": "<think>\nreasoning, maybe \\boxed{{1}}\n</think>\n{}",
}


def misses(name: str, texts: list, truths: list[str], expected: list[int], labels: list[str]) -> list[str]:
    got = REWARDS[name](completions=texts, ground_truth=truths)
    return [f"{label}: want {want}, got {score}" for label, want, score in zip(labels, expected, got) if score != want]


def label(index: int) -> str:
    form, answer, truth, *_ = ROWS[index]
    return f"row {index} [{form}] {answer!r} vs {truth!r}"


def test_the_corpus_is_big_balanced_and_labelled():
    assert len(ROWS) >= 100
    right = sum(row[3] for row in ROWS)
    assert 0.4 <= right / len(ROWS) <= 0.6, f"{right} right of {len(ROWS)}"
    for form, answer, truth, want, boxed, source in ROWS:
        assert form and source and want in (0, 1) and truth.strip()
        assert (boxed is not None) == ("\\boxed" in answer), answer  # a boxed score exactly for the box-bearing rows
    assert {(answer, truth) for _, answer, truth, want, *_ in ROWS if want == 1} >= set(ISSUE_TABLE)
    assert len({(row[1], row[2]) for row in ROWS}) == len(ROWS), "a row is listed twice"


@pytest.mark.parametrize("layout", LAYOUTS)
def test_correct_scores_every_row_as_expected(layout):
    texts = [LAYOUTS[layout].format(answer) for _, answer, *_ in ROWS]
    found = misses(
        "correct", texts, [row[2] for row in ROWS], [row[3] for row in ROWS], [label(i) for i in range(len(ROWS))]
    )
    assert not found, "\n".join(found)


def test_correct_scores_chat_messages_as_strings():
    texts = [[{"role": "assistant", "content": LAYOUTS["after-think"].format(answer)}] for _, answer, *_ in ROWS]
    found = misses(
        "correct", texts, [row[2] for row in ROWS], [row[3] for row in ROWS], [label(i) for i in range(len(ROWS))]
    )
    assert not found, "\n".join(found)


@pytest.mark.parametrize("layout", BOXED_LAYOUTS)
def test_boxed_scores_every_box_as_expected(layout):
    cases = [(i, ROWS[i][1], ROWS[i][4]) for i in range(len(ROWS)) if ROWS[i][4] is not None]
    cases += [(i, variant, ROWS[i][3]) for i in range(len(ROWS)) if (variant := boxed_variant(ROWS[i][1])) is not None]
    assert len(cases) >= 50
    texts = [BOXED_LAYOUTS[layout].format(text) for _, text, _ in cases]
    labels = [f"{label(i)} as {text!r}" for i, text, _ in cases]
    found = misses("boxed", texts, [ROWS[i][2] for i, _, _ in cases], [want for *_, want in cases], labels)
    assert not found, "\n".join(found)
    assert {want for *_, want in cases} == {0, 1}


def test_boxed_pays_nothing_without_a_box():
    rows = [i for i in range(len(ROWS)) if ROWS[i][4] is None]
    texts = [BOXED_LAYOUTS["after-reasoning"].format(ROWS[i][1]) for i in rows]
    found = misses("boxed", texts, [ROWS[i][2] for i in rows], [0] * len(rows), [label(i) for i in rows])
    assert not found, "\n".join(found)


# The cases where "one answer, stated once" could be read either way, and the reading chosen (docs/rewards.md).
AMBIGUOUS = [
    # a computation or check beside the answer is a second statement: the reward does not evaluate working
    ("72 (8 × 9)", 0),
    ("72 (since 8 × 9 = 72)", 0),
    ("$8 \\times 9 = 72$, so the answer is $72$.", 0),
    # a negated value is still a value given
    ("is 72 not 27", 0),
    ("The answer is 72, not 73", 0),
    # the same value written again in other words is one answer; side by side with nothing between it is not
    ("The answer is 72. Final answer: **72**", 1),
    ("**72** ($72$)", 0),
    ("72 72 72", 0),
    # a remark of words in parentheses is not part of the answer; a rounding remark is a hedge
    ("72 (the number of apples)", 1),
    ("72 (rounded)", 0),
    # a name given a value: the letter is a name, not a second value
    ("the value of $x$ is $72$", 1),
    # a number in words is the value it names: restating the answer in words is the answer once more, in either order;
    # words naming another number are a second value
    ("72 (seventy-two)", 1),
    ("seventy-two (72)", 1),
    ("72 (seventy-three)", 0),
    ("72 in three days", 0),
    # a remark then a run of punctuation is still the answer
    ("Therefore The answer is 72 (the total)..", 1),
]


@pytest.mark.parametrize("answer, want", AMBIGUOUS, ids=[a for a, _ in AMBIGUOUS])
def test_the_ambiguous_cases_are_decided_as_documented(answer, want):
    assert REWARDS["correct"](completions=[f"<answer>{answer}</answer>"], ground_truth=["72"]) == [want]


# --- The reading does not depend on the wrapping: any stack of wrappers around one value pays, a second value does not.
WRAPPERS = [
    "**{}**",
    "__{}__",
    "`{}`",
    "${}$",
    "\\({}\\)",
    "$\\boxed{{{}}}$",
    "The answer is {}.",
    "Final answer: {}",
    "Answer: {}",
    "So, {}",
    "Therefore {}.",
    "{} (the total)",
    "### Answer\n{}",
    "{} apples",
]
VALUES = st.sampled_from(["72", "-5", "0.75", "1,250", "\\frac{3}{4}"])


# derandomize: the same 120 stacks on every run, so that CI is decided by the code, not by a draw (the draws found
# one miss so far, `72 (the total)..`, now paid: see AMBIGUOUS)
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(
    VALUES,
    st.lists(st.sampled_from(WRAPPERS), min_size=1, max_size=3, unique=True),
    st.sampled_from(["13", "$13$", "**13**", "thirteen"]),
    st.sampled_from([" or {}", ", not {}", " ({})", " and {}", " maybe"]),
)
def test_any_wrapping_of_one_value_pays_and_a_second_value_never_does(value, wrappers, other, second):
    truth = value.replace(",", "")
    text = value
    for wrapper in wrappers:
        if wrapper.startswith("#") and wrapper != wrappers[-1]:
            continue  # a heading starts the block
        if "$" in wrapper and ("$" in text or "\\(" in text or "**" in text or "`" in text or " " in text):
            continue  # math spans hold math, not markdown or sentences
        text = wrapper.format(text)
    assert equivalent(text, truth) == 1.0, text
    assert equivalent(text + second.format(other), truth) == 0.0, text + second.format(other)


# --- issue 32's two classes, every form against every sentence: the right amount pays, any other amount does not.
AMOUNTS = {
    "$18": "18",
    "$18.50": "18.5",
    "$1,234": "1234",
    "€18": "18",
    "£7.25": "7.25",
    "\\$18": "18",
    "US$18": "18",
    "$0.50": "0.5",
    "18 dollars": "18",
    "-$5": "-5",
}
SENTENCES = [
    "The total is {}.",
    "So she pays {}.",
    "{}.",
    "The answer is {}.",
    "It costs {}!",
    "Total: {}.",
    "**{}.**",
    "Therefore, the answer is {}. ",
]


@pytest.mark.parametrize("sentence", SENTENCES)
def test_a_currency_amount_ending_a_sentence_is_the_amount(sentence):
    texts = [f"<answer>{sentence.format(amount)}</answer>" for amount in AMOUNTS]
    assert REWARDS["correct"](completions=texts, ground_truth=list(AMOUNTS.values())) == [1.0] * len(AMOUNTS)
    others = [str(Fraction(value) * 10) for value in AMOUNTS.values()]  # the decimal point taken for the period
    assert REWARDS["correct"](completions=texts, ground_truth=others) == [0.0] * len(AMOUNTS)


# Numbers and their names as a reader writes them (not derived from the code under test).
SPELLED = {
    "0": "zero",
    "3": "three",
    "18": "eighteen",
    "40": "forty",
    "72": "seventy-two",
    "99": "ninety nine",
    "105": "one hundred and five",
    "1250": "one thousand two hundred fifty",
    "1000000": "one million",
    "-5": "minus five",
}
RESTATED = [
    "{n} ({w})",
    "{n} ({w}).",
    "The answer is {n} ({w}).",
    "{w} ({n})",
    "**{n}** ({w})",
    "$\\boxed{{{n}}}$ ({w})",
    "That is {n} ({w}) in all.",
]


@pytest.mark.parametrize("form", RESTATED)
def test_a_number_restated_in_words_pays_only_when_the_words_name_it(form):
    numbers = list(SPELLED)
    same = [f"<answer>{form.format(n=n, w=SPELLED[n])}</answer>" for n in numbers]
    assert REWARDS["correct"](completions=same, ground_truth=numbers) == [1.0] * len(numbers)
    # each number with the next one's name: two values, whichever of them is the truth
    crossed = [f"<answer>{form.format(n=n, w=SPELLED[m])}</answer>" for n, m in zip(numbers, numbers[1:] + numbers[:1])]
    assert REWARDS["correct"](completions=crossed, ground_truth=numbers) == [0.0] * len(numbers)
    assert REWARDS["correct"](completions=crossed, ground_truth=numbers[1:] + numbers[:1]) == [0.0] * len(numbers)
