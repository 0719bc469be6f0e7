"""The built-in task: integer arithmetic expressions such as ``(1 + 2) * 4`` with their values."""

from __future__ import annotations

import random

_OPS = ("+", "-", "*")


def random_expression(rng: random.Random, min_operands: int, max_operands: int, max_operand: int) -> tuple[str, int]:
    """A random expression over 1..max_operand with +, -, * and random parentheses, and its value."""
    terms = [str(rng.randint(1, max_operand)) for _ in range(rng.randint(min_operands, max_operands))]
    expression = terms[0]
    for term in terms[1:]:
        if rng.random() < 0.4 and any(op in expression for op in _OPS):
            expression = f"({expression})"
        expression = f"{expression} {rng.choice(_OPS)} {term}"
    # Safe: the string is built above from digits, spaces, parentheses and + - * only.
    return expression, int(eval(expression, {"__builtins__": {}}))


QUESTION = "What is the result of {}?"


def question(expression: str) -> str:
    """The task's question for ``expression``: the one phrasing of every split and the warm start's examples."""
    return QUESTION.format(expression)


# The keys of every row: validation knows the data's columns from this, without generating it.
ARITHMETIC_COLUMNS = ("question", "ground_truth")


def arithmetic_splits(
    n_train: int, n_val: int, n_test: int, min_operands: int, max_operands: int, max_operand: int, seed: int
) -> tuple[list[dict], list[dict], list[dict]]:
    """Seeded, disjoint train, validation and test lists of ``{"question", "ground_truth"}`` rows.

    Distinct expressions in the order the seeded generator first draws them: the first ``n_test`` are the test
    set, the next ``n_val`` validation, the rest train. The test set therefore depends only on the seed, the
    expression settings and ``n_test``, not on the other two sizes.
    """
    if min_operands < 2 or max_operands < min_operands:
        raise ValueError(
            f"data.arithmetic: min_operands={min_operands}, max_operands={max_operands}; "
            "need 2 <= min_operands <= max_operands"
        )
    for name, n in (("n_train", n_train), ("n_val", n_val), ("n_test", n_test)):
        if n < 1:
            raise ValueError(f"data.arithmetic.{name}={n}: every split needs at least 1 question")
    total = n_train + n_val + n_test
    rng = random.Random(seed)
    seen: dict[str, int] = {}
    attempts = 0
    while len(seen) < total:
        expression, value = random_expression(rng, min_operands, max_operands, max_operand)
        seen.setdefault(expression, value)
        attempts += 1
        if attempts > 50 * total + 1000:
            raise ValueError(
                f"data.arithmetic: only {len(seen)} distinct expressions exist for these settings, "
                f"asked for n_train + n_val + n_test = {total}; raise max_operand or max_operands"
            )
    rows = [{"question": question(e), "ground_truth": str(v)} for e, v in seen.items()]
    return rows[n_test + n_val :], rows[n_test : n_test + n_val], rows[:n_test]
