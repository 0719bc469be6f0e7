"""Answer rewards: is the answer right, and is it the kind of answer asked for?

Correctness is mathematical equality via math-verify (`12`, `12.0`, `\\frac{24}{2}` all equal 12), never
string equality: the walkthrough compares a string with an integer ground truth and so never rewards.
A sample whose ground truth cannot be parsed scores ``None`` so TRL skips it rather than teaching a wrong 0.
"""
from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache

from ._text import texts
from .mathcheck import HELPER
from .registry import reward

_INT = re.compile(r"[+-]?\d+")
_PLAIN_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)")
# Longer candidates are not answers but runaway text; sympy can take minutes on them.
MAX_ANSWER_CHARS = 500


def extract_answer(text: str, answer_tag: str = "answer") -> str | None:
    """Content of the last ``<answer>…</answer>`` pair (spanning lines), stripped; None when there is none."""
    closing = text.rfind(f"</{answer_tag}>")
    if closing == -1:
        return None
    opening = text.rfind(f"<{answer_tag}>", 0, closing)
    if opening == -1:
        return None
    return text[opening + len(answer_tag) + 2 : closing].strip()


# extract_lenient's candidates, found by one pass each; none can backtrack badly (no nested quantifiers).
_LENIENT_NUMBER = re.compile(
    r"(?<![\w.)])-?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?(?:/\d+)?(?![\w])|(?<![\w.])-?\.\d+"
)
_LENIENT_MATH = re.compile(r"\$\$([^$]{1,500})\$\$|\$([^$]{1,500})\$|\\\((.{1,500}?)\\\)|\\\[(.{1,500}?)\\\]", re.DOTALL)
# A LaTeX expression written bare as the text's last token: `3\sqrt{2}`, `\frac{3}{4}.`, `2\pi`.
_LENIENT_TAIL = re.compile(r"(?:^|\s)(-?[\w.{}^()/+*-]*\\[A-Za-z]+[\w.{}^()/+*\\-]*)[\s.,;:!]*\Z")


def extract_lenient(text: str) -> str | None:
    """The completion's final answer wherever and however it is written, for a *lenient* accuracy.

    In order of preference: the content of the last balanced ``\\boxed{…}``; else of the last
    ``<answer>…</answer>``; else whichever of these ends last in the text: a number (``42``, ``-3``, ``2.5``,
    ``.5``, ``3/4``, ``1,000`` returned as ``1000``), an inline math span (``$…$``, ``$$…$$``, ``\\(…\\)``,
    ``\\[…\\]``, its content), or a bare LaTeX expression as the text's last token (``… is 3\\sqrt{2}.``).
    Blank contents are skipped; None when nothing is found. Regex only (no sympy): pass the result to
    ``equivalent(candidate, ground_truth)`` to score it. Unlike the `correct`/`boxed` rewards it ignores
    layout (think blocks, repeated tags), so it measures "the right answer is there", not "the answer
    was given as asked".
    """
    if not text:
        return None
    boxed = extract_boxed(text)
    if boxed:
        return boxed
    tagged = extract_answer(text)
    if tagged:
        return tagged
    best, best_end = None, -1
    for match in _LENIENT_NUMBER.finditer(text):
        best, best_end = match.group(0).replace(",", ""), match.end()
    for match in _LENIENT_MATH.finditer(text):
        content = next(g for g in match.groups() if g is not None).strip()
        if content and match.end() >= best_end:
            best, best_end = content, match.end()
    tail = _LENIENT_TAIL.search(text[-MAX_ANSWER_CHARS:])
    if tail:
        best = tail.group(1).rstrip(".,;:")
    return best


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
def _compare(truth: str, candidate: str | None) -> float | None:
    # sympy (via math-verify) in a helper process with a real timeout; see mathcheck.py.
    return HELPER.compare(truth, candidate)


def equivalent(candidate: str | None, ground_truth) -> float | None:
    """1.0 if ``candidate`` equals ``ground_truth`` mathematically, 0.0 if not, None if the truth is unusable."""
    if ground_truth is None:
        return None
    truth = str(ground_truth).strip()
    if _PLAIN_NUMBER.fullmatch(truth):
        # Fast exact paths for a numeric truth; sympy costs 1-12 ms a comparison.
        if candidate is None:
            return 0.0
        if _PLAIN_NUMBER.fullmatch(candidate.strip()):
            return 1.0 if Fraction(truth) == Fraction(candidate.strip()) else 0.0
        if not any(ch.isdigit() for ch in candidate):
            return 0.0  # words without a digit never equal a number (math-verify agrees, slowly)
    if candidate is not None and (not candidate.strip() or len(candidate) > MAX_ANSWER_CHARS):
        candidate = None  # only the truth is checked (None when unusable), the answer scores 0
    return _compare(truth, candidate)


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
