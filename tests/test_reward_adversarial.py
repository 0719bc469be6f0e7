"""Completions written to earn a built-in reward without deserving it: each must earn exactly 0.0.

Ground truth is 12 unless a case says otherwise. Every case runs as a plain string and, where it is a string,
also as TRL's conversational form, which must score the same.
"""

from __future__ import annotations

import pytest

from grpo_sweep.rewards import REWARDS
from grpo_sweep.rewards.answer import MAX_ANSWER_CHARS

TRUTH = "12"
THINK = "<think>\n3 * 4 = 12\n</think>\n"


def chat(*contents: str, roles: tuple[str, ...] | None = None) -> list[dict]:
    roles = roles or ("assistant",) * len(contents)
    return [{"role": role, "content": content} for role, content in zip(roles, contents)]


# (reward, completion, ground truth, id)
CASES = [
    # --- correct: a leading number / part of a symbolic answer
    ("correct", THINK + "<answer>3</answer>", "3\\sqrt{2}", "correct-leading-number-of-sqrt"),
    ("correct", THINK + "<answer>2</answer>", "2\\pi", "correct-coefficient-of-pi"),
    ("correct", THINK + "<answer>3</answer>", "x + 3", "correct-constant-of-expression"),
    ("correct", THINK + "<answer>1</answer>", "y = 2x + 1", "correct-last-number-of-equation"),
    ("correct", THINK + "<answer>Evenly</answer>", "Evelyn", "correct-anagram-as-product-of-letters"),
    ("correct", THINK + "<answer>42</answer>", "forty two", "correct-digits-for-word-truth"),
    ("correct", THINK + "<answer>x + 3 = 12</answer>", TRUTH, "correct-equation-instead-of-value"),
    ("correct", THINK + "<answer>13 = 12</answer>", TRUTH, "correct-false-equation"),
    ("correct", THINK + "<answer>x = 11 = 12</answer>", TRUTH, "correct-equation-chain"),
    # --- correct / boxed: the question restated as the answer (math-verify evaluates it to the truth)
    ("correct", THINK + "<answer>(1 + 2) * 4</answer>", TRUTH, "correct-question-copied"),
    ("correct", THINK + "<answer>3 \\cdot 4</answer>", TRUTH, "correct-product-left-to-do"),
    ("correct", THINK + "<answer>2^{2} \\times 3</answer>", TRUTH, "correct-power-times-left-to-do"),
    ("correct", THINK + "<answer>x = 3 * 4</answer>", TRUTH, "correct-equation-with-no-value-side"),
    ("boxed", "so \\boxed{20 - 8}", TRUTH, "boxed-difference-left-to-do"),
    # --- correct: several answers in one tag
    ("correct", THINK + "<answer>12, 13, 14</answer>", TRUTH, "correct-list"),
    ("correct", THINK + "<answer>10, 11, 12</answer>", TRUTH, "correct-list-ending-right"),
    ("correct", THINK + "<answer>11 \\text{ or } 12</answer>", TRUTH, "correct-text-or"),
    ("correct", THINK + "<answer>12 or thirteen</answer>", TRUTH, "correct-number-or-words"),
    ("correct", THINK + "<answer>11 \\\\ 12</answer>", TRUTH, "correct-latex-line-break"),
    ("correct", THINK + "<answer>11\n\n12</answer>", TRUTH, "correct-blank-line"),
    ("correct", THINK + "<answer>11 \\to 12</answer>", TRUTH, "correct-arrow"),
    ("correct", THINK + "<answer>x = 11 \\Rightarrow x = 12</answer>", TRUTH, "correct-implication"),
    ("correct", THINK + "<answer>11 \\lor 12</answer>", TRUTH, "correct-logical-or"),
    ("correct", THINK + "<answer>\\tag{11} 12</answer>", TRUTH, "correct-second-number-in-tag"),
    ("correct", THINK + "<answer>11 \\hspace{1em} 12</answer>", TRUTH, "correct-spaced-pair"),
    ("correct", THINK + "<answer>\\phantom{11}12</answer>", "23", "correct-phantom-shows-12-reads-23"),
    ("correct", THINK + "<answer>12 \\text{ (or 11)}</answer>", TRUTH, "correct-alternative-in-text"),
    ("correct", THINK + "<answer>11 &= 12</answer>", TRUTH, "correct-aligned"),
    ("correct", THINK + "<answer>\\approx 12</answer>", TRUTH, "correct-approximately"),
    ("correct", THINK + "<answer>$11$ and $12$</answer>", TRUTH, "correct-two-math-spans"),
    ("correct", THINK + "<answer>\\boxed{11}\\boxed{12}</answer>", TRUTH, "correct-two-boxes-in-tag"),
    ("correct", THINK + "<answer>12 thousand</answer>", TRUTH, "correct-number-word-is-not-a-unit"),
    ("correct", THINK + "<answer>\\{11, 12\\}</answer>", TRUTH, "correct-set"),
    ("correct", THINK + "<answer>[11, 13]</answer>", TRUTH, "correct-interval-around-truth"),
    ("correct", THINK + "<answer>12 \\pm 1</answer>", TRUTH, "correct-plus-minus"),
    ("correct", THINK + "<answer>11 \\quad 12</answer>", TRUTH, "correct-quad-pair"),
    ("correct", THINK + "<answer>11 \\text{ and } 12</answer>", TRUTH, "correct-text-and-pair"),
    ("correct", THINK + "<answer>\\boxed{11}, \\boxed{12}</answer>", TRUTH, "correct-two-boxes-listed"),
    ("correct", THINK + "<answer>12 13</answer>", "25", "correct-spaced-numbers-read-as-their-sum"),
    ("correct", THINK + "<answer>1 000</answer>", "1000", "correct-space-as-thousands-separator"),
    # --- correct: one value read out of a sentence or markdown, but never a second one, a hedge or a range
    ("correct", THINK + "<answer>12 x</answer>", TRUTH, "correct-prose-variable-beside-number"),
    ("correct", THINK + "<answer>**12** **13**</answer>", TRUTH, "correct-prose-two-bold-values"),
    ("correct", THINK + "<answer>12 apples (13 oranges)</answer>", TRUTH, "correct-prose-second-value-in-remark"),
    ("correct", THINK + "<answer>The answer is 12, not 13.</answer>", TRUTH, "correct-prose-negated-alternative"),
    ("correct", THINK + "<answer>maybe **12**</answer>", TRUTH, "correct-prose-hedge"),
    ("correct", THINK + "<answer>12 (or 13)</answer>", TRUTH, "correct-prose-alternative-in-remark"),
    ("correct", THINK + "<answer>between 11 and 13</answer>", TRUTH, "correct-prose-range-in-words"),
    ("correct", THINK + "<answer>11–13</answer>", TRUTH, "correct-prose-range-dash"),
    ("correct", THINK + "<answer>$12 or $13</answer>", TRUTH, "correct-prose-two-prices"),
    (
        "correct",
        THINK + "<answer>The answer is $\\boxed{12}$ or $\\boxed{13}$.</answer>",
        TRUTH,
        "correct-prose-two-boxes-in-sentence",
    ),
    ("correct", THINK + "<answer>12 12 12 12</answer>", TRUTH, "correct-prose-repeated-value"),
    ("correct", THINK + "<answer>at least 12</answer>", TRUTH, "correct-prose-bound"),
    ("correct", THINK + "<answer>12 (rounded)</answer>", TRUTH, "correct-prose-rounded"),
    ("correct", THINK + "<answer>$1$2</answer>", TRUTH, "correct-prose-split-digits"),
    ("correct", THINK + "<answer>**1**2</answer>", TRUTH, "correct-prose-bold-split-digits"),
    ("correct", THINK + "<answer>12 in three days</answer>", TRUTH, "correct-prose-number-word"),
    ("correct", THINK + "<answer>3 \\cdot 4, so the answer is 12</answer>", TRUTH, "correct-prose-working-beside"),
    ("correct", THINK + "<answer>2pi</answer>", "2", "correct-prose-pi-as-unit-word"),
    # --- correct: a truth of several parts needs exactly its parts
    ("correct", THINK + "<answer>(5, 8), (8, 5), (1, 1)</answer>", "(5, 8), (8, 5)", "correct-parts-extra-part"),
    (
        "correct",
        THINK + "<answer>(5, 8) \\quad \\text{and} \\quad (8, 5) \\quad \\text{and} \\quad (1, 1)</answer>",
        "(5, 8), (8, 5)",
        "correct-parts-extra-part-in-words",
    ),
    ("correct", THINK + "<answer>\\{(5, 8), (8, 5), (1, 1)\\}</answer>", "(5, 8), (8, 5)", "correct-parts-superset"),
    ("correct", THINK + "<answer>(5, 8)</answer>", "(5, 8), (8, 5)", "correct-parts-one-missing"),
    ("correct", THINK + "<answer>(5, 8), (5, 8)</answer>", "(5, 8), (8, 5)", "correct-parts-one-given-twice"),
    ("correct", THINK + "<answer>k = 45, n = 3</answer>", "k = 45, n = 2", "correct-parts-one-wrong"),
    ("correct", THINK + "<answer>k = 45, m = 2</answer>", "k = 45, n = 2", "correct-parts-wrong-variable"),
    ("correct", THINK + "<answer>(5, 8) \\text{ but not } (8, 5)</answer>", "(5, 8), (8, 5)", "correct-parts-negated"),
    (
        "correct",
        THINK + "<answer>(5, 8) \\text{ and (1, 1) } (8, 5)</answer>",
        "(5, 8), (8, 5)",
        "correct-parts-number-hidden-in-text",
    ),
    ("correct", THINK + "<answer>(5, 8) \\to (8, 5)</answer>", "(5, 8), (8, 5)", "correct-parts-arrow"),
    ("correct", THINK + "<answer>(5, 8) \\text{ and maybe } (8, 5)</answer>", "(5, 8), (8, 5)", "correct-parts-hedged"),
    (
        "correct",
        THINK + "<answer>" + ",".join(f"({a},{b})" for a in range(1, 9) for b in range(1, 9)) + "</answer>",
        "(5, 8), (8, 5)",
        "correct-parts-all-pairs",
    ),
    (
        "correct",
        THINK + "<answer>(5, 8), (8, 5) \\approx (8.1, 5)</answer>",
        "(5, 8), (8, 5)",
        "correct-parts-approximation",
    ),
    (
        "correct",
        THINK + "<answer>\\boxed{(5, 8)}</answer><answer>\\boxed{(8, 5)}</answer>",
        "(5, 8), (8, 5)",
        "correct-parts-in-two-blocks",
    ),
    # --- correct: structure
    ("correct", THINK + "<answer><answer>12</answer></answer>", TRUTH, "correct-nested-answer"),
    ("correct", THINK + "<answer>11</answer><answer>12</answer>", TRUTH, "correct-two-blocks"),
    ("correct", THINK + "<answer>12</answer><answer>12</answer>", TRUTH, "correct-same-block-twice"),
    ("correct", "<think><answer>12</answer></think>", TRUTH, "correct-answer-inside-think"),
    ("correct", "<think>x</think><think><answer>12</answer></think>", TRUTH, "correct-answer-in-second-think"),
    ("correct", "<answer>12</answer></think>", TRUTH, "correct-answer-before-closing-think"),
    ("correct", "<think>x</think><answer>12", TRUTH, "correct-unclosed-answer"),
    ("correct", "<think>x<answer>12</answer>", TRUTH, "correct-unclosed-think"),
    ("correct", "<think>x</think>12</answer><answer>12</answer>", TRUTH, "correct-stray-closing-tag"),
    ("correct", "<think>x</think><answer><think>12</think></answer>", TRUTH, "correct-think-inside-answer"),
    ("correct", "<think>x</think><answer></answer> 12", TRUTH, "correct-empty-tag-answer-outside"),
    ("correct", "<think>x</think><answer> \n </answer>", TRUTH, "correct-blank-tag"),
    ("correct", "The answer is 12.", TRUTH, "correct-no-tag"),
    ("correct", "<think>x</think><ANSWER>12</ANSWER>", TRUTH, "correct-wrong-case-tag"),
    ("correct", "<think>x</think>\uff1canswer\uff1e12\uff1c/answer\uff1e", TRUTH, "correct-fullwidth-tag"),
    # --- correct: unicode, whitespace, size
    ("correct", THINK + "<answer>1\u200b3</answer>", TRUTH, "correct-zero-width-in-wrong-number"),
    ("correct", THINK + "<answer>\u0415velyn</answer>", "Evelyn", "correct-cyrillic-homoglyph"),
    ("correct", THINK + "<answer>12" + " 12" * (MAX_ANSWER_CHARS // 3) + "</answer>", TRUTH, "correct-huge-answer"),
    (
        "correct",
        THINK + "<answer>" + "1" * (MAX_ANSWER_CHARS + 1) + "</answer>",
        "1" * (MAX_ANSWER_CHARS + 1),
        "correct-over-max-chars",
    ),
    # --- boxed
    ("boxed", "so the answer is \\boxed{3}", "3\\sqrt{2}", "boxed-leading-number-of-sqrt"),
    ("boxed", "\\boxed{Evenly}", "Evelyn", "boxed-anagram"),
    ("boxed", "\\boxed{12}\\boxed{13}", TRUTH, "boxed-two-answers"),
    ("boxed", "\\boxed{11} no wait \\boxed{12}", TRUTH, "boxed-last-one-rule-shotgun"),
    ("boxed", "<think>\\boxed{12}</think>", TRUTH, "boxed-inside-think"),
    ("boxed", "<think>\\boxed{12}</think> so \\boxed{11}", TRUTH, "boxed-right-one-inside-think"),
    ("boxed", "<think>\\boxed{12}", TRUTH, "boxed-in-unclosed-think"),
    ("boxed", "\\boxed{12, 13}", TRUTH, "boxed-list"),
    ("boxed", "\\boxed{11} and \\boxed{12}", TRUTH, "boxed-two-answers-in-words"),
    ("boxed", "\\boxed{(5, 8)} \\boxed{(8, 5)} \\boxed{(1, 1)}", "(5, 8), (8, 5)", "boxed-parts-extra-box"),
    ("boxed", "first \\boxed{3}, so \\boxed{(5, 8), (8, 5)}", "(5, 8), (8, 5)", "boxed-parts-intermediate-box"),
    ("boxed", "<think>\\boxed{(5, 8)}</think> so \\boxed{(8, 5)}", "(5, 8), (8, 5)", "boxed-parts-one-inside-think"),
    ("boxed", "\\boxed{(5, 8)} and \\boxed{(5, 8)}", "(5, 8), (8, 5)", "boxed-parts-one-boxed-twice"),
    ("boxed", "\\boxed{\\boxed{11}\\boxed{12}}", TRUTH, "boxed-nested-boxes"),
    ("boxed", "\\boxed{}", TRUTH, "boxed-empty"),
    ("boxed", "\\boxed{12", TRUTH, "boxed-unbalanced"),
    ("boxed", "\\boxed 12", TRUTH, "boxed-no-braces"),
    ("boxed", "The answer is 12.", TRUTH, "boxed-none"),
    ("boxed", "\\boxed{" + "12+" * MAX_ANSWER_CHARS + "0}", TRUTH, "boxed-huge"),
    # --- int
    ("int", THINK + "<answer>12, 13</answer>", TRUTH, "int-list"),
    ("int", THINK + "<answer>11</answer><answer>12</answer>", TRUTH, "int-two-blocks"),
    ("int", "<think><answer>12</answer></think>", TRUTH, "int-inside-think"),
    ("int", THINK + "<answer><answer>12</answer></answer>", TRUTH, "int-nested"),
    ("int", THINK + "<answer>\uff11\uff12</answer>", TRUTH, "int-fullwidth-digits"),
    ("int", THINK + "<answer>\u0661\u0662</answer>", TRUTH, "int-arabic-indic-digits"),
    ("int", THINK + "<answer>1 2</answer>", TRUTH, "int-spaced-digits"),
    ("int", THINK + "<answer>12.0</answer>", TRUTH, "int-decimal"),
    ("int", THINK + "<answer>" + "9" * (MAX_ANSWER_CHARS + 1) + "</answer>", TRUTH, "int-huge"),
    ("int", THINK + "<answer></answer>", TRUTH, "int-empty"),
    # --- format
    ("format", "<think>a</think>\njunk\n<think>b</think>\n<answer>1</answer>", TRUTH, "format-junk-and-second-think"),
    ("format", "<think>a</think>\n<think>b</think>\n<answer>1</answer>", TRUTH, "format-two-thinks"),
    ("format", "<think>a</think>\n<answer>1</answer>\n<answer>2</answer>", TRUTH, "format-two-answers"),
    ("format", "<think>a <answer>1</answer></think>\n<answer>1</answer>", TRUTH, "format-answer-tag-in-think"),
    ("format", "<think>a</think>\n<answer><think>b</think>1</answer>", TRUTH, "format-think-in-answer"),
    ("format", "<think><think>a</think></think>\n<answer>1</answer>", TRUTH, "format-nested-think"),
    ("format", "<think>a</think>\n<answer>\n \n</answer>", TRUTH, "format-blank-answer"),
    ("format", "<think></think><answer></answer>", TRUTH, "format-skeleton"),
    ("format", "<think>a</think> so <answer>1</answer>", TRUTH, "format-text-between"),
    ("format", "<think>a</think><answer>1</answer></answer>", TRUTH, "format-stray-closer"),
    ("format", "<think>a</think>\u2003x<answer>1</answer>", TRUTH, "format-text-after-unicode-space"),
    ("format", "<think>a</think><answer>1</answer>" + "\u200b", TRUTH, "format-zero-width-after"),
    # --- strict_format
    (
        "strict_format",
        "<think>\na\n</think>\njunk\n<think>\nb\n</think>\n<answer>\n1\n</answer>\n",
        TRUTH,
        "strict-junk-and-second-think",
    ),
    ("strict_format", "<think>\na\n</think>\n<answer>\n\n</answer>\n", TRUTH, "strict-blank-answer"),
    (
        "strict_format",
        "<think>\n<answer>\n1\n</answer>\n</think>\n<answer>\n1\n</answer>\n",
        TRUTH,
        "strict-answer-in-think",
    ),
    (
        "strict_format",
        "<think>\na\n</think>\n<answer>\n1\n</answer>\n<answer>\n2\n</answer>\n",
        TRUTH,
        "strict-two-answers",
    ),
    ("strict_format", "<think>\na\n</think>\n<answer>\n1\n</answer>\n\n", TRUTH, "strict-two-trailing-newlines"),
    ("strict_format", "<think>a</think>\n<answer>1</answer>", TRUTH, "strict-no-inner-newlines"),
    # --- soft_format
    ("soft_format", "<think>a</think>", TRUTH, "soft-no-answer"),
    ("soft_format", "<answer>1</answer><think>a</think>", TRUTH, "soft-wrong-order"),
    ("soft_format", "<think>a <answer>1</answer></think>", TRUTH, "soft-answer-inside-think"),
    ("soft_format", "<think>a</think><answer></answer>", TRUTH, "soft-empty-answer"),
    ("soft_format", "<think></think><answer> \n </answer>", TRUTH, "soft-skeleton"),
    ("soft_format", "<think>a</think><answer><think>b</think></answer>", TRUTH, "soft-think-inside-answer"),
    ("soft_format", "<answer><think>a</think> x </answer><answer></answer>", TRUTH, "soft-think-nested-in-answer"),
    ("soft_format", "<think>a<think>b</think></think><answer>1</answer>", TRUTH, "soft-nested-think-only"),
    # --- xmlcount (partial credit per tag by design: these earn none of it)
    ("xmlcount", "<think><think></think></think><answer><answer></answer></answer>", TRUTH, "xmlcount-every-tag-twice"),
    ("xmlcount", "<Think>a</Think><ANSWER>1</ANSWER>", TRUTH, "xmlcount-wrong-case"),
    ("xmlcount", "<think >a</think ><answer >1</answer >", TRUTH, "xmlcount-spaced-tags"),
    ("xmlcount", "\uff1cthink\uff1ea\uff1c/think\uff1e", TRUTH, "xmlcount-fullwidth-tags"),
    ("xmlcount", "<answer></answer>" + "x" * 1000, TRUTH, "xmlcount-trailing-text-eats-credit"),
    ("xmlcount", "", TRUTH, "xmlcount-empty"),
]

# Several assistant messages: the model's turn is the last one; an earlier right answer earns nothing.
CHAT_CASES = [
    (
        "correct",
        chat(THINK + "<answer>12</answer>", "on second thought I am not sure"),
        TRUTH,
        "chat-correct-earlier-message",
    ),
    ("correct", chat("<answer>", "12</answer>"), TRUTH, "chat-correct-tag-split-over-messages"),
    ("boxed", chat("\\boxed{12}", "no idea"), TRUTH, "chat-boxed-earlier-message"),
    ("int", chat("<answer>12</answer>", "<answer>twelve</answer>"), TRUTH, "chat-int-earlier-message"),
    ("format", chat("<think>a</think>", "<answer>1</answer>"), TRUTH, "chat-format-split-over-messages"),
    (
        "strict_format",
        chat("<think>\na\n</think>\n<answer>\n1\n</answer>\n", "more"),
        TRUTH,
        "chat-strict-earlier-message",
    ),
    ("soft_format", chat("<think>a</think><answer>1</answer>", "bye"), TRUTH, "chat-soft-earlier-message"),
    (
        "correct",
        chat(THINK + "<answer>12</answer>", "wait", roles=("assistant", "user")) + chat("<answer>13</answer>"),
        TRUTH,
        "chat-correct-user-turn-between",
    ),
]


@pytest.mark.parametrize("name, completion, truth", [c[:3] for c in CASES], ids=[c[3] for c in CASES])
def test_adversarial_completion_earns_nothing(name, completion, truth):
    as_string = REWARDS[name](completions=[completion], ground_truth=[truth])
    as_chat = REWARDS[name](completions=[chat(completion)], ground_truth=[truth])
    assert as_string == as_chat == [0.0]


@pytest.mark.parametrize("name, completion, truth", [c[:3] for c in CHAT_CASES], ids=[c[3] for c in CHAT_CASES])
def test_adversarial_conversation_earns_nothing(name, completion, truth):
    assert REWARDS[name](completions=[completion], ground_truth=[truth]) == [0.0]


def test_the_adversarial_set_covers_every_reward_it_claims():
    names = {c[0] for c in CASES + CHAT_CASES}
    assert names == {"correct", "boxed", "int", "format", "strict_format", "soft_format", "xmlcount"}
    assert len(CASES) + len(CHAT_CASES) >= 60


@pytest.mark.parametrize(
    "name, completion, truth",
    [
        ("correct", THINK + "<answer>12</answer>", TRUTH),
        ("correct", THINK + "<answer>3 * 4 = 12</answer>", TRUTH),
        ("correct", THINK + "<answer>\\frac{24}{2}</answer>", TRUTH),
        ("correct", THINK + "<answer>-12</answer>", "-12"),
        ("correct", THINK + "<answer>3 \\cdot \\sqrt{2}</answer>", "3\\sqrt{2}"),
        ("correct", THINK + "<answer>\\sqrt{18}</answer>", "3\\sqrt{2}"),
        ("correct", THINK + "<answer>Evelyn</answer>", "Evelyn"),
        ("correct", THINK + "<answer>The answer is **12**.</answer>", TRUTH),
        ("correct", THINK + "<answer>Therefore $\\boxed{12}$.</answer>", TRUTH),
        ("boxed", "so \\boxed{12}", TRUTH),
        ("correct", THINK + "<answer>(8, 5) \\quad \\text{and} \\quad (5, 8)</answer>", "(5, 8), (8, 5)"),
        ("boxed", "so \\boxed{(5, 8)} and \\boxed{(8, 5)}", "(5, 8), (8, 5)"),
        ("int", THINK + "<answer>-12</answer>", TRUTH),
        ("format", THINK + "<answer>\n12\n</answer>\n", TRUTH),
        ("strict_format", THINK + "<answer>\n12\n</answer>\n", TRUTH),
        ("soft_format", "hi " + THINK + "<answer>12</answer> bye", TRUTH),
        ("xmlcount", THINK + "<answer>\n12\n</answer>\n", TRUTH),
    ],
)
def test_the_honest_version_of_each_case_still_pays(name, completion, truth):
    # Guards against rules that are "always 0".
    assert REWARDS[name](completions=[completion], ground_truth=[truth]) == [1.0]


def test_length_pays_for_length_by_design():
    # `length` claims nothing about content: padding earns it. Mix it with a correctness reward, never alone.
    padded = "<think>" + "um " * 400 + "</think><answer>wrong</answer>"
    assert REWARDS["length"](completions=[padded], max_completion_length=256) == [1.0]
    assert REWARDS["length"](completions=[padded], max_completion_length=256, prefer="short") == [0.0]


@pytest.mark.parametrize(
    "text",
    [
        "<think>"
        + "</think><answer>" * 20_000,  # every </think> is followed by an <answer>: a lazy regex tries each pair
        "<think>x</think><answer>" + "</answer> " * 20_000,
        "<think>" * 20_000 + "</think>" * 20_000,
        "<answer>" + "\\boxed{" * 20_000 + "}" * 19_999 + "</answer>",
        "\\boxed{1}" * 20_000,
        "</think>" + "<answer></answer>" * 20_000,
    ],
    ids=["think-answer-pairs", "many-closers", "deep-think", "deep-boxed", "many-boxed", "many-blocks"],
)
def test_pathological_layouts_earn_nothing(text):
    """How long they take is measured in bench/pathological_inputs.py (linear in the input)."""
    for name in ("correct", "boxed", "int", "format", "strict_format", "soft_format", "xmlcount"):
        (value,) = REWARDS[name](completions=[text], ground_truth=[TRUTH])
        assert value == 0.0 or name == "xmlcount", name  # xmlcount credits a tag that appears once, by design
