"""Vectors from verl's reward-score tests.

verl's main branch has no unit vectors for its gsm8k / math / prime_math scorers under tests/utils/reward_score/
(only sandbox tests; tests/interactions/test_gsm8k_interaction.py mocks gsm8k.compute_score). The vectors below
come from the numeric-canonicalisation tests of an unmerged pull request:
https://github.com/volcengine/verl at commit d69068d2a32b985e759049da6f801a039b94b31b (merge of 87d81599 into
7bc70bbf), file tests/utils/reward_score/test_numeric_canonicalization_on_cpu.py, test test_is_equiv_boxed:
`is_equiv(remove_boxed(gt), pred) is True`.
"""

REPO = "volcengine/verl"
COMMIT = "d69068d2a32b985e759049da6f801a039b94b31b"
PATH = "tests/utils/reward_score/test_numeric_canonicalization_on_cpu.py"

# (peer test, index, gt as written, prediction, expected)
IS_EQUIV = [
    ("test_is_equiv_boxed", 0, "\\boxed{033}", "33", 1.0),
    ("test_is_equiv_boxed", 1, "\\boxed{+033}", "33", 1.0),
    ("test_is_equiv_boxed", 2, "\\boxed{-0}", "0", 1.0),
    ("test_is_equiv_boxed", 3, "\\boxed{000}", "0", 1.0),
]
