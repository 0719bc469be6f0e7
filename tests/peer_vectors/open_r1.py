"""Vectors from open-r1's reward tests, as open-r1 wrote them.

Source: https://github.com/huggingface/open-r1 at commit 1416fa0cf21595d2083b399a2a0bbddd7f6e9563
(tests/test_rewards.py last changed in 21b48fbe4604dc875493d716de83476adb11e248), file tests/test_rewards.py.
Translation rules and every difference from open-r1 are in README.md next to this file.
"""

REPO = "huggingface/open-r1"
COMMIT = "1416fa0cf21595d2083b399a2a0bbddd7f6e9563"
PATH = "tests/test_rewards.py"

# accuracy_reward(completions, solution): the completion is open-r1's whole answer text, the solution the gold.
# (peer test, index, completion content, solution, expected)
ACCURACY = [
    # TestRewards.test_accuracy_reward_correct_answer
    ("test_accuracy_reward_correct_answer", 0, r"\boxed{\frac{63}{400}}", r"\frac{63}{400}", 1.0),
    # TestRewards.test_accuracy_reward_wrong_answer
    ("test_accuracy_reward_wrong_answer", 0, r"\boxed{\frac{64}{400}}", r"\frac{63}{400}", 0.0),
    # TestRewards.test_accuracy_reward_wrong_answer_no_latex
    ("test_accuracy_reward_wrong_answer_no_latex", 0, r"\boxed{3}", "6", 0.0),
    # TestRewards.test_multiple_completions
    ("test_multiple_completions", 0, r"\boxed{\frac{63}{400}}", r"\frac{63}{400}", 1.0),
    ("test_multiple_completions", 1, r"\boxed{\frac{64}{400}}", r"\frac{63}{400}", 0.0),
]

# format_reward(completions): open-r1's pattern is r"^<think>\n.*?\n</think>\n<answer>\n.*?\n</answer>$" (DOTALL).
# (peer test, index, completion content, expected)
FORMAT = [
    # TestRewards.test_format_reward_correct
    ("test_format_reward_correct", 0, "<think>\nSome reasoning\n</think>\n<answer>\nThe answer\n</answer>", 1.0),
    # TestRewards.test_format_reward_incorrect
    ("test_format_reward_incorrect", 0, "<think>Only thinking</think>", 0.0),
    ("test_format_reward_incorrect", 1, "<answer>Only answer</answer>", 0.0),
    ("test_format_reward_incorrect", 2, "No tags at all", 0.0),
    ("test_format_reward_incorrect", 3, "<think>Missing closing</think><answer>Missing closing", 0.0),
    ("test_format_reward_incorrect", 4, "<think>Wrong order</answer><answer>Wrong order</think>", 0.0),
    # TestRewards.test_format_reward_specific_multiline
    (
        "test_format_reward_specific_multiline",
        0,
        "<think>\nI will count each distinct object in the image:\n1. Purple scooter\n2. Red bicycle\n3. Green motorcycle\n"
        "4. Gray sedan\n5. Yellow school bus\n6. Small green double-decker bus\n7. Small red car\n8. Small purple car\n"
        "9. Small gray dirt bike\n\nThere are 9 distinct objects in total.\n</think>\n<answer>\n9\n</answer>",
        1.0,
    ),
]

# tag_count_reward(completions): 0.25 each for "<think>\n", "\n</think>\n", "\n<answer>\n", "\n</answer>" counted
# exactly once, in any order, no trailing-text penalty. (peer test, index, completion content, expected)
TAG_COUNT = [
    (
        "test_tag_count_rewards_all_correct",
        0,
        "<think>\nSome reasoning\n</think>\n<answer>\nThe answer\n</answer>",
        1.0,
    ),
    (
        "test_tag_count_rewards_missing_think_begin",
        0,
        "Some reasoning\n</think>\n<answer>\nThe answer\n</answer>",
        0.75,
    ),
    ("test_tag_count_rewards_missing_think_end", 0, "<think>\nSome reasoning\n<answer>\nThe answer\n</answer>", 0.75),
    (
        "test_tag_count_rewards_missing_answer_begin",
        0,
        "<think>\nSome reasoning\n</think>\nThe answer\n</answer>",
        0.75,
    ),
    ("test_tag_count_rewards_missing_answer_end", 0, "<think>\nSome reasoning\n</think>\n<answer>\nThe answer", 0.75),
    ("test_tag_count_rewards_missing_all_tags", 0, "Some reasoning\nThe answer", 0.0),
]

# get_soft_overlong_punishment(max_completion_len=100, soft_punish_cache=20)(completion_ids): 0 up to 80 tokens,
# falling linearly to -1 at 100 and beyond. (peer test, index, completion tokens, max length, peer's value)
LENGTH = [
    ("test_soft_overlong_punishment_short_completion", 0, 50, 100, 0.0),
    ("test_soft_overlong_punishment_long_completion", 0, 110, 100, -1.0),
    ("test_soft_overlong_punishment_intermediate_completion", 0, 90, 100, -0.5),
]
