"""Answer rewards: is the answer right, and is it the kind of answer asked for?

Correctness is mathematical equality via math-verify (`12`, `12.0`, `\\frac{24}{2}` all equal 12), never
string equality: the walkthrough compares a string with an integer ground truth and so never rewards.
A sample whose ground truth cannot be parsed scores ``None`` so TRL skips it rather than teaching a wrong 0.
"""
from __future__ import annotations

import logging
import re
from fractions import Fraction
from functools import lru_cache

from ._text import texts
from .registry import reward

_INT = re.compile(r"[+-]?\d+")
_PLAIN_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)")
# Longer candidates are not answers but runaway text; sympy can take minutes on them.
MAX_ANSWER_CHARS = 500


class _DropTimeoutNotice(logging.Filter):
    # We turn math-verify's SIGALRM timeouts off on purpose (they fail outside the main thread).
    def filter(self, record: logging.LogRecord) -> bool:
        return "Timeout is disabled" not in record.getMessage()


for _name in ("math_verify.parser", "math_verify.grader"):
    logging.getLogger(_name).addFilter(_DropTimeoutNotice())


def extract_answer(text: str, answer_tag: str = "answer") -> str | None:
    """Content of the last ``<answer>…</answer>`` pair (spanning lines), stripped; None when there is none."""
    closing = text.rfind(f"</{answer_tag}>")
    if closing == -1:
        return None
    opening = text.rfind(f"<{answer_tag}>", 0, closing)
    if opening == -1:
        return None
    return text[opening + len(answer_tag) + 2 : closing].strip()


def extract_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{…}`` with balanced braces (a plain regex stops at the first ``}``)."""
    start = text.rfind("\\boxed{")
    while start != -1:
        depth, i = 0, start + len("\\boxed{") - 1
        for i in range(i, len(text)):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    return text[start + len("\\boxed{") : i].strip()
        start = text.rfind("\\boxed{", 0, start)  # unbalanced: try an earlier one
    return None


@lru_cache(maxsize=65536)
def _parse(expression: str):
    # Imported here: math-verify pulls in sympy (~1 s), which the login-node path must not pay.
    from math_verify import parse

    # Timeouts off: math-verify's own use SIGALRM, which raises outside the main thread.
    parsed = parse(expression, parsing_timeout=None)
    if not parsed and "$" not in expression:
        parsed = parse(f"${expression}$", parsing_timeout=None)
    return parsed


def equivalent(candidate: str | None, ground_truth) -> float | None:
    """1.0 if ``candidate`` equals ``ground_truth`` mathematically, 0.0 if not, None if the truth is unusable."""
    if ground_truth is None:
        return None
    truth = str(ground_truth).strip()
    if candidate is not None and _PLAIN_NUMBER.fullmatch(truth):
        # Fast exact paths for a numeric truth; sympy costs 1-12 ms a comparison.
        if _PLAIN_NUMBER.fullmatch(candidate.strip()):
            return 1.0 if Fraction(truth) == Fraction(candidate.strip()) else 0.0
        if not any(ch.isdigit() for ch in candidate):
            return 0.0  # words without a digit never equal a number (math-verify agrees, slowly)
    gold = _parse(truth)
    if not gold:
        return None
    if candidate is None or not candidate.strip() or len(candidate) > MAX_ANSWER_CHARS:
        return 0.0
    answer = _parse(candidate)
    if not answer:
        return 0.0
    from math_verify import verify

    return 1.0 if verify(gold, answer, timeout_seconds=None) else 0.0


@reward("correct")
def correct(completions, ground_truth, answer_tag: str = "answer", **kwargs) -> list[float | None]:
    """1 when the last `<answer>` content equals `ground_truth` mathematically."""
    return [
        equivalent(extract_answer(text, answer_tag), truth)
        for text, truth in zip(texts(completions), ground_truth)
    ]


@reward("boxed")
def boxed(completions, ground_truth, **kwargs) -> list[float | None]:
    """1 when the last `\\boxed{…}` (balanced braces) equals `ground_truth` mathematically."""
    return [equivalent(extract_boxed(text), truth) for text, truth in zip(texts(completions), ground_truth)]


@reward("int")
def int_answer(completions, answer_tag: str = "answer", **kwargs) -> list[float]:
    """1 when the `<answer>` content is an integer (negative ones too: `str.isdigit` misses them)."""
    scores = []
    for text in texts(completions):
        answer = extract_answer(text, answer_tag)
        scores.append(1.0 if answer is not None and _INT.fullmatch(answer) else 0.0)
    return scores
