"""Each built-in reward, in both completion formats, including the walkthrough's bugs that must not return."""

from __future__ import annotations

import math

import pytest

from grpo_sweep.rewards import REWARDS, RewardError, build_reward, extract_answer, extract_boxed, resolve_reward
from grpo_sweep.rewards.answer import equivalent, extract_lenient

GOOD = "<think>\nfirst 1 + 2 = 3\nthen 3 * 4 = 12\n</think>\n<answer>\n12\n</answer>\n"


def both_formats(texts: list[str]) -> list[list]:
    """The same completions as plain strings and as TRL's conversational messages."""
    return [texts, [[{"role": "assistant", "content": t}] for t in texts]]


def score(name: str, texts: list[str], **kwargs) -> list:
    results = [REWARDS[name](completions=c, **kwargs) for c in both_formats(texts)]
    assert results[0] == results[1], f"{name} scores strings and messages differently"
    return results[0]


def test_registry_names_are_the_logged_names():
    assert set(REWARDS) >= {"format", "strict_format", "soft_format", "xmlcount", "correct", "boxed", "int", "length"}
    for name, fn in REWARDS.items():
        assert fn.__name__ == name


def test_format_accepts_multiline_reasoning():
    # The walkthrough's ^<think>.*?</think><answer>.*?</answer>$ without DOTALL fails on any newline.
    assert score("format", [GOOD, "  <think>a\nb</think> <answer>1</answer>  "]) == [1.0, 1.0]


def test_format_rejects_wrong_layouts():
    texts = [
        "<answer>1</answer><think>x</think>",  # wrong order
        "<think>x</think><answer>1</answer> trailing words",
        "preamble <think>x</think><answer>1</answer>",
        "<think>x</think>",
        "",
    ]
    assert score("format", texts) == [0.0] * len(texts)


def test_strict_format_is_the_walkthrough_layout():
    reasoning = GOOD.replace("think>", "reasoning>")
    assert REWARDS["strict_format"](completions=[reasoning], think_tag="reasoning") == [1.0]
    assert score("strict_format", [GOOD, GOOD.rstrip("\n"), "<think>x</think><answer>1</answer>"]) == [1.0, 1.0, 0.0]


def test_soft_format_needs_both_pairs_in_order_anywhere():
    assert score(
        "soft_format", ["blah <think>x</think> mid <answer>1</answer> end", "<answer>1</answer><think>x</think>"]
    ) == [1.0, 0.0]


def test_xmlcount_gives_partial_credit_and_penalises_trailing_text():
    full, half, trailing = score("xmlcount", [GOOD, "<think>only reasoning</think>", GOOD.strip() + " extra words"])
    assert full == 1.0
    assert half == 0.5
    assert 0.9 < trailing < 1.0
    assert score("xmlcount", ["<think><think></think>"]) == [0.25]  # a repeated tag earns nothing


@pytest.mark.parametrize("answer", ["12", "12.0", "\\frac{24}{2}", "$12$", " 12 "])
def test_correct_is_mathematical_equality(answer):
    assert score("correct", [f"<think>x</think><answer>{answer}</answer>"], ground_truth=["12"]) == [1.0]


def test_correct_with_integer_ground_truth():
    # The walkthrough compares the extracted string with an int ground truth, so it never rewards.
    assert score("correct", ["<answer>12</answer>", "<answer>13</answer>"], ground_truth=[12, 12]) == [1.0, 0.0]


def test_correct_needs_exactly_one_answer_block():
    # The last-answer rule let a model hedge: two blocks are no answer, whichever is right.
    texts = [
        "<answer>5</answer> no wait <answer>12</answer>",
        "12 without tags",
        "<answer></answer>",
        "<answer>12</answer>",
    ]
    assert score("correct", texts, ground_truth=["12"] * 4) == [0.0, 0.0, 0.0, 1.0]


def test_correct_skips_unusable_ground_truth():
    assert score("correct", ["<answer>1</answer>", "<answer>1</answer>"], ground_truth=[None, ""]) == [None, None]


def test_correct_custom_tag():
    assert REWARDS["correct"](completions=["<final>7</final>"], ground_truth=["7"], answer_tag="final") == [1.0]


def test_boxed_balances_braces():
    # The walkthrough's \\boxed\{(.*?)\} stops at the first "}" and reads "\frac{1".
    assert extract_boxed("so \\boxed{\\frac{1}{2}} done") == "\\frac{1}{2}"
    texts = [
        "so \\boxed{\\frac{1}{2}}",
        "\\boxed{1} then \\boxed{0.5}",
        "\\boxed{\\frac{1}{2}",
        "\\boxed{0.5} so \\boxed{0.5}",
    ]
    # two different boxed answers are none; the same one boxed twice is one
    assert score("boxed", texts, ground_truth=["0.5"] * 4) == [1.0, 0.0, 0.0, 1.0]


def test_int_accepts_negative_integers_only():
    texts = ["<answer>12</answer>", "<answer>-3</answer>", "<answer>1.5</answer>", "<answer>twelve</answer>", "12"]
    assert score("int", texts) == [1.0, 1.0, 0.0, 0.0, 0.0]


def test_length_uses_token_ids_and_scales_by_budget():
    ids = [[1] * 8, [1] * 32, [1] * 64]
    assert score("length", ["a", "b", "c"], completion_ids=ids, max_completion_length=32) == [0.25, 1.0, 1.0]
    assert score("length", ["a"], completion_ids=[[1] * 8], max_completion_length=32, prefer="short") == [0.75]


def test_rewards_stay_in_unit_interval_on_odd_text():
    odd = ["", "\x00", "<think>" * 50, "</answer>" * 3, "🙂 <answer>∞</answer>", "\\boxed{" * 10]
    for name, fn in REWARDS.items():
        for value in fn(
            completions=odd,
            ground_truth=["1"] * len(odd),
            completion_ids=[[1]] * len(odd),
            tests=[["assert True"]] * len(odd),
        ):
            assert value is None or (0.0 <= value <= 1.0 and math.isfinite(value)), (name, value)


# Issue 12: ground truth, <answer>/\\boxed{} content, score. A truth without $…$ was parsed as a plain expression,
# whose extractor keeps one number of it (3\\sqrt{2} -> 3), and letters parsed as a product of symbols.
EQUALITY_TABLE = [
    ("3\\sqrt{2}", "3", 0.0),
    ("2\\pi", "2", 0.0),
    ("x + 3", "3", 0.0),
    ("y = 2x + 1", "1", 0.0),
    ("Evelyn", "Evenly", 0.0),  # words are not products of letters
    ("3\\sqrt{2}", "\\sqrt{18}", 1.0),
    ("(x + 2)^2 + (y - 3)^2", "x^2 + y^2 + 4x - 6y + 13", 1.0),
    ("forty two", "\\boxed{42}", 0.0),  # a word truth compares as words: 42 is not "forty two"
    ("forty two", "42", 0.0),
    ("Forty  two", "forty two", 1.0),
    ("Evelyn", "\\text{evelyn.}", 1.0),
    ("\\text{no solution}", "No solution", 1.0),
    ("y = 2x + 1", "2x + 1", 1.0),  # an assignment matches its value (math-verify's rule), both ways
    ("2x + 1", "y = 2x + 1", 1.0),
    ("x = 3", "y = 3", 0.0),
    ("x > 3", "3", 0.0),
    ("x > 3", "(3, \\infty)", 1.0),
    ("12", "x = 12", 1.0),
    ("12", "x = \\frac{24}{2} = 12", 1.0),
    ("12", "13 = 12", 0.0),  # every side that is not a bare variable must equal the truth
    ("12", "x = 11 = 12", 0.0),
    ("12", "2x + 5 = 12", 0.0),
    ("12", "12, 13, 14", 0.0),  # several answers in one
    ("14", "12, 13, 14", 0.0),
    ("\\{1, 2\\}", "2, 1", 1.0),  # a set truth takes a set
    ("12", "12, 12", 1.0),  # one distinct value
    ("12", "12 apples", 1.0),
    ("12", "\\$12", 1.0),
    ("12", "12 thousand", 0.0),
    ("1000", "1,000", 1.0),
    ("10000", "10,\\!000", 1.0),  # the MATH dataset's thousands separator
    ("16386.20", "\\$16,\\!386.20", 1.0),
    ("28\\%", "$28$ \\%", 1.0),  # a percent sign after the math span
    ("28\\%", "28 percent", 1.0),
    ("1000", "1 000", 0.0),  # a space is no thousands separator: `12 130` is as likely two answers
    ("25", "12 13", 0.0),  # math-verify adds spaced numbers
    ("0.5", "\\frac{1}{2}", 1.0),
    ("\\frac{1}{2}", "0.5", 1.0),
]


@pytest.mark.parametrize("truth, answer, expected", EQUALITY_TABLE, ids=[f"{t}|{a}" for t, a, _ in EQUALITY_TABLE])
def test_equality_table(truth, answer, expected):
    assert score("correct", [f"<think>x</think><answer>{answer}</answer>"], ground_truth=[truth]) == [expected]
    boxed_answer = answer if answer.startswith("\\boxed") else f"\\boxed{{{answer}}}"
    assert score("boxed", [f"so {boxed_answer}"], ground_truth=[truth]) == [expected]


# A truth of several parts (math-verify reads it as a set) may be answered part by part: the answer in <answer>,
# the same answer for `boxed` (parts in one box, or one box per part). Lists the truth in any order; each part
# one answer; every part of the truth given, no other. Adversarial ones (extra, missing, repeated parts) are in
# test_reward_adversarial.py.
MULTI_PART = [
    (
        "(5, 8), (8, 5)",
        ["(5, 8) \\quad \\text{and} \\quad (8, 5)"],
        ["\\boxed{(5, 8)} \\quad \\text{and} \\quad \\boxed{(8, 5)}"],
    ),
    ("(5, 8), (8, 5)", ["(8, 5), (5, 8)", "(x, y) = (5, 8) \\text{ or } (8, 5)"], ["\\boxed{(8, 5)}, \\boxed{(5, 8)}"]),
    (
        "k = 45, n = 2",
        ["\\boxed{k = 45} \\quad \\text{and} \\quad \\boxed{n = 2}", "n = 2; k = 45"],
        ["\\boxed{k = 45} and \\boxed{n = 2}"],
    ),
    (
        "\\{1, 2, 3\\}",
        ["\\boxed{1},\\boxed{2},\\boxed{3}", "3 and 2 and 1", "\\{1, 2, 3\\}"],
        ["\\boxed{1} and \\boxed{2} and \\boxed{3}", "\\boxed{1, 2} then \\boxed{3}"],
    ),
    (
        "a_3 = 2, a_{37} = 19",
        ["$$\\boxed{a_{37} = 19, \\quad a_3 = 2}$$"],
        ["$a_3 = \\boxed{2}$ and $a_{37} = \\boxed{19}$"],
    ),
    ("x_1 = 2,\\quad x_2 = -3", ["-3 \\text{ or } 2", "x_2 = -3 \\text{ and } x_1 = 2"], ["\\boxed{2}, \\boxed{-3}"]),
    (
        "(5, 8), (8, 5)",
        ["(5, 8), (8, 5), (5, 8)"],
        ["\\boxed{(5, 8)}, \\boxed{(8, 5)}, \\boxed{(5, 8)}"],
    ),  # a repeat counts once
]


@pytest.mark.parametrize("truth, answers, boxed_texts", MULTI_PART, ids=[m[0] for m in MULTI_PART])
def test_a_truth_of_several_parts_takes_its_parts(truth, answers, boxed_texts):
    texts = [f"<think>x</think><answer>{answer}</answer>" for answer in answers]
    assert score("correct", texts, ground_truth=[truth] * len(texts)) == [1.0] * len(texts)
    boxed = [f"<think>maybe \\boxed{{7}}</think> so {text}" for text in boxed_texts]
    assert score("boxed", boxed, ground_truth=[truth] * len(boxed)) == [1.0] * len(boxed)


def test_a_truth_of_one_part_still_takes_one_answer():
    answers = ["12, 13, 14", "11 \\quad 12", "\\boxed{11}\\boxed{12}", "11 \\text{ and } 12", "12 \\quad 12"]
    texts = [f"<think>x</think><answer>{answer}</answer>" for answer in answers]
    assert score("correct", texts, ground_truth=["12"] * len(texts)) == [0.0] * len(texts)
    assert score("correct", texts, ground_truth=["(12, 13)"] * len(texts)) == [0.0] * len(texts)  # a point is one part
    boxed = ["\\boxed{11}\\boxed{12}", "\\boxed{11} and \\boxed{12}", "\\boxed{12} or \\boxed{12.0}"]
    assert score("boxed", boxed, ground_truth=["12"] * len(boxed)) == [0.0] * len(boxed)


def test_equivalent_directly_and_in_the_helper_agree_on_words():
    from grpo_sweep.rewards.mathcheck import compare

    for truth, answer, expected in EQUALITY_TABLE[4:12]:
        assert equivalent(answer, truth) == compare(truth, answer) == expected, (truth, answer)


@pytest.mark.parametrize(
    "name, text, expected",
    [
        ("correct", "reasoning</think>\n<answer>12</answer>", 1.0),  # the prompt opened <think>
        ("correct", "<think>I will use <answer> tags</think><answer>12</answer>", 1.0),  # tags named in reasoning
        ("correct", "<answer>\n$12$\n</answer>", 1.0),
        ("correct", "<think>a</think> words <answer>12</answer> more words", 1.0),  # layout is format's job
        ("boxed", "<think>maybe \\boxed{11}</think> so \\boxed{12}", 1.0),
        ("boxed", "<think>x</think><answer>\\boxed{12}</answer>", 1.0),
        ("int", "<think>maybe <answer>1.5</answer></think><answer>-12</answer>", 1.0),
        ("format", "<think></think><answer>12</answer>", 1.0),  # reasoning may be blank
        ("format", "\n <think>a\nb</think>\n\n<answer>x</answer>\n", 1.0),
        ("strict_format", "<think>\n\n</think>\n<answer>\n1\n</answer>", 1.0),
        ("soft_format", "<think>a</think>\nso\n<answer>1</answer> done </answer>", 1.0),  # stray closer after
        ("soft_format", "<think>a</think><think>b</think><answer>1</answer>", 1.0),  # soft: repeats allowed
    ],
)
def test_rules_still_pay_for_the_real_thing(name, text, expected):
    assert score(name, [text], ground_truth=["12"]) == [expected]


def test_extract_answer():
    assert extract_answer("<answer>\n a \n</answer>") == "a"
    assert extract_answer("<answer>open") is None


def test_user_reward_by_import_path_keeps_its_config_name():
    fn = build_reward("short_bonus", "tests.reward_plugins.prefix_reward", {"prefix": "<think>"})
    assert fn.__name__ == "short_bonus"
    assert fn(completions=["<think>x", "no"]) == [1.0, 0.0]


def test_unknown_reward_lists_valid_names():
    with pytest.raises(RewardError, match="unknown reward 'formatt'.*correct.*format"):
        resolve_reward("formatt")


@pytest.mark.parametrize(
    "target, message",
    [
        ("no_such_module_xyz.fn", "cannot import module 'no_such_module_xyz'"),
        ("tests.reward_plugins.missing", "has no function 'missing'"),
        ("tests.reward_plugins.no_kwargs", "must accept \\*\\*kwargs"),
    ],
)
def test_bad_import_paths_fail_clearly(target, message):
    with pytest.raises(RewardError, match=message):
        resolve_reward(target)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("The answer is 42.", "42"),
        ("so x = -3", "-3"),
        ("first 2.5, then .5", ".5"),
        ("the ratio is 3/4", "3/4"),
        ("it costs 1,000 dollars", "1000"),
        ("a total of 1,234,567", "1234567"),
        ("guess 7, but \\boxed{\\frac{1}{2}} then 9", "\\frac{1}{2}"),  # boxed beats a later number
        ("<answer> 9 </answer> and 10", "9"),  # an answer tag beats a later number
        ("<answer> </answer> so 5", "5"),  # blank contents are skipped
        ("\\boxed{} so 6", "6"),
        ("so $\\frac{3}{4}$", "\\frac{3}{4}"),
        ("thus \\(x+1\\) it is", "x+1"),
        ("it is 3\\sqrt{2}.", "3\\sqrt{2}"),
        ("it is 2\\pi", "2\\pi"),
        ("12, 13, 14", "14"),
        ("no answer here", None),
        ("x2 and y3", None),  # digits inside names are not numbers
        ("", None),
    ],
)
def test_extract_lenient(text, expected):
    assert extract_lenient(text) == expected


@pytest.mark.parametrize(
    "text, truth, expected",
    [
        ("it costs 1,000", "1000", 1.0),
        ("ratio 3/4", "0.75", 1.0),
        ("is 3\\sqrt{2}.", "\\sqrt{18}", 1.0),
        ("is 41", "42", 0.0),
    ],
)
def test_extract_lenient_feeds_equivalent(text, truth, expected):
    assert equivalent(extract_lenient(text), truth) == expected


def test_extract_lenient_on_pathological_text():
    """How long it takes is measured in bench/pathological_inputs.py (linear in the input)."""
    found = [
        extract_lenient(text)
        for text in ("a" + " ." * 50_000, " \\a" * 50_000 + "!", "$" * 100_000, "1," * 50_000, "\\(" * 50_000)
    ]
    assert found == [None, "\\a", None, "1", None]
