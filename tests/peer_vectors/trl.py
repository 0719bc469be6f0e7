"""Vectors from TRL's reward tests, as TRL wrote them.

Source: https://github.com/huggingface/trl at commit f2cd57710ae345ea6428ae95363267fcf38a3dc8
(tests/test_rewards.py last changed in 30558f512cfe11ece65148b524a763ce5855e60e), file tests/test_rewards.py.
Translation rules and every difference from TRL are in README.md next to this file.
"""

REPO = "huggingface/trl"
COMMIT = "f2cd57710ae345ea6428ae95363267fcf38a3dc8"
PATH = "tests/test_rewards.py"

# think_format_reward(completions): 1 when the completion starts with one <think>…</think> block (no nested or
# repeated <think>), whatever follows. (peer test, index, completion content, expected)
THINK_FORMAT = [
    # TestThinkFormatReward.test_valid_format
    ("test_valid_format", 0, "<think>This is my reasoning.</think>This is my answer.", 1.0),
    ("test_valid_format", 1, "<think>\nThis is my reasoning.\n</think>\nThis is my answer.", 1.0),
    ("test_valid_format", 2, "<think>\nThis is\nmy reasoning.\n</think>\nThis is my answer.", 1.0),
    ("test_valid_format", 3, "<think>\nThis is <some tag> my reasoning.</think>\nThis is my answer.", 1.0),
    ("test_valid_format", 4, "<think></think>\nThis is my answer.", 1.0),
    # TestThinkFormatReward.test_invalid_format
    ("test_invalid_format", 0, "<think>\nThis is my reasoning.\nThis is my answer.", 0.0),
    ("test_invalid_format", 1, "<think>This is my reasoning.\nThis is my answer.", 0.0),
    ("test_invalid_format", 2, "This is my reasoning. This is my answer.", 0.0),
    ("test_invalid_format", 3, "This is my reasoning.\nThis is my answer.", 0.0),
    ("test_invalid_format", 4, "This is my reasoning.</think>\nThis is my answer.", 0.0),
    ("test_invalid_format", 5, "This is my reasoning.</think>This is my answer.", 0.0),
    ("test_invalid_format", 6, "This<think>is my reasoning.</think>\nThis is my answer.", 0.0),
    ("test_invalid_format", 7, "<think>This is<think>my reasoning.</think></think>This is my answer.", 0.0),
    ("test_invalid_format", 8, "<think>This is</think>\nmy\n<think>reasoning.</think>\nThis is my answer.", 0.0),
    # TestThinkFormatReward.test_mixed_format
    ("test_mixed_format", 0, "<think>This is my reasoning.</think>This is my answer.", 1.0),
    ("test_mixed_format", 1, "<think>\nThis is my reasoning.\n</think>\nThis is my answer.", 1.0),
    ("test_mixed_format", 2, "<think>This is my reasoning.\nThis is my answer.", 0.0),
    ("test_mixed_format", 3, "This is my reasoning. This is my answer.", 0.0),
]

# accuracy_reward / reasoning_accuracy_reward(completions, solution): (peer test, index, completion content,
# solution, expected; None = "skip this sample", TRL's answer for an unparseable gold)
ACCURACY = [
    # TestAccuracyReward.test_accuracy_reward_correct_answer
    ("test_accuracy_reward_correct_answer", 0, r"\boxed{\frac{63}{400}}", r"\frac{63}{400}", 1.0),
    ("test_accuracy_reward_correct_answer", 1, r"\boxed{\frac{63}{400}}", "63/400", 1.0),
    # TestAccuracyReward.test_accuracy_reward_wrong_answer
    ("test_accuracy_reward_wrong_answer", 0, r"\boxed{\frac{64}{400}}", r"\frac{63}{400}", 0.0),
    # TestAccuracyReward.test_accuracy_reward_wrong_answer_no_latex
    ("test_accuracy_reward_wrong_answer_no_latex", 0, r"\boxed{3}", "6", 0.0),
    # TestAccuracyReward.test_accuracy_reward_unparsable_gold
    ("test_accuracy_reward_unparsable_gold", 0, "Answer is forty two.", "Answer is forty two.", None),
    ("test_accuracy_reward_unparsable_gold", 1, r"Some other content. \boxed{43}.", "Answer is forty three.", None),
    # TestAccuracyReward.test_accuracy_reward_in_worker_thread
    ("test_accuracy_reward_in_worker_thread", 0, r"\boxed{\frac{1}{3}}", r"\frac{1}{3}", 1.0),
]

# reasoning_accuracy_reward: only the text after </think> counts; no </think> at all scores 0.
REASONING_ACCURACY = [
    # TestReasoningAccuracyReward.test_correct_answer_yields_unit_reward
    (
        "test_correct_answer_yields_unit_reward",
        0,
        r"<think> Reasoning content </think> \boxed{\frac{63}{400}}",
        r"\frac{63}{400}",
        1.0,
    ),
    (
        "test_correct_answer_yields_unit_reward",
        1,
        r"Reasoning content </think> \boxed{\frac{63}{400}}",
        r"\frac{63}{400}",
        1.0,
    ),
    # TestReasoningAccuracyReward.test_incorrect_answer_yields_zero_reward
    (
        "test_incorrect_answer_yields_zero_reward",
        0,
        r"<think> Reasoning content </think> \boxed{\frac{64}{400}}",
        r"\frac{63}{400}",
        0.0,
    ),
    # TestReasoningAccuracyReward.test_correct_answer_in_reasoning_yields_zero_reward
    (
        "test_correct_answer_in_reasoning_yields_zero_reward",
        0,
        r"<think> My answer is \boxed{42} </think> Some other text.",
        r"\boxed{42}",
        0.0,
    ),
    (
        "test_correct_answer_in_reasoning_yields_zero_reward",
        1,
        r"<think> The answer is \boxed{42} </think> Here's a wrong answer: \boxed{43}.",
        r"\boxed{42}",
        0.0,
    ),
    # TestReasoningAccuracyReward.test_incomplete_reasoning_yields_zero_reward
    (
        "test_incomplete_reasoning_yields_zero_reward",
        0,
        r"<think> Incomplete reasoning without closing tag",
        r"\frac{63}{400}",
        0.0,
    ),
    (
        "test_incomplete_reasoning_yields_zero_reward",
        1,
        r"Correct answer \frac{63}{400} but completely missing reasoning content",
        r"\frac{63}{400}",
        0.0,
    ),
    # TestReasoningAccuracyReward.test_unparsable_gold_solution_yields_none_reward
    (
        "test_unparsable_gold_solution_yields_none_reward",
        0,
        r"<think> Reasoning content </think> \boxed{42}",
        "forty two",
        None,
    ),
]

# Token counts fed to TRL's length-shaped rewards: (peer test, index, completion tokens, max length, peer's value).
LENGTH = [
    # TestSoftOverlongPunishmentReward: get_soft_overlong_punishment(max_completion_len=100, soft_punish_cache=20)
    ("test_soft_overlong_punishment_short_completion", 0, 50, 100, 0.0),
    ("test_soft_overlong_punishment_long_completion", 0, 110, 100, -1.0),
    ("test_soft_overlong_punishment_intermediate_completion", 0, 90, 100, -0.5),
    # TestCosineScaledReward (correct answers): get_cosine_scaled_reward(max_len=100)
    ("test_correct_shorter_rewarded_more", 0, 25, 100, 0.92678),
    ("test_correct_shorter_rewarded_more", 1, 75, 100, 0.57322),
    ("test_midpoint_values", 0, 50, 100, 0.75),
    ("test_correct_boundary_values", 0, 0, 100, 1.0),
    ("test_correct_boundary_values", 1, 100, 100, 0.5),
    ("test_length_exceeding_max_len_is_clamped", 0, 200, 100, 0.5),
]
