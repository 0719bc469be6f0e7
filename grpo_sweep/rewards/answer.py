"""Answer rewards: is the answer right, and is it the kind of answer asked for?

Correctness is mathematical equality via math-verify (`12`, `12.0`, `\\frac{24}{2}` all equal 12), never
string equality: the walkthrough compares a string with an integer ground truth and so never rewards.
A sample whose ground truth cannot be parsed scores ``None`` so TRL skips it rather than teaching a wrong 0.

They pay only for ONE answer, given where asked: `correct` and `int` read exactly one ``<answer>…</answer>``
block outside the ``<think>`` block (tags mentioned inside the reasoning are ignored; nested, unclosed or stray
tags mean no answer); `boxed` reads the one distinct top-level ``\\boxed{…}`` outside ``<think>`` (several
distinct boxes only for a truth of as many parts). Which
answers are equal: see `equivalent` and `mathcheck.compare`.
"""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache

from ._text import texts
from .mathcheck import HELPER, _closing_brace, is_words, normalise_words, one_answer
from .registry import Needs, reward

_INT = re.compile(r"[+-]?\d+", re.ASCII)
_PLAIN_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)", re.ASCII)
# Longer candidates are not answers but runaway text; sympy can take minutes on them.
MAX_ANSWER_CHARS = 500
# the answer rewards read the answer block; a think block is optional (its tags only say what to skip)
ANSWER_TAG = Needs(tag_params=("answer_tag",))


def extract_answer(text: str, answer_tag: str = "answer") -> str | None:
    """Content of the last ``<answer>…</answer>`` pair (spanning lines), stripped; None when there is none.

    Loose on purpose (the `code` reward's fallback, `extract_lenient`); the `correct` and `int` rewards use
    the strict `answer_block`."""
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
_LENIENT_MATH = re.compile(
    r"\$\$([^$]{1,500})\$\$|\$([^$]{1,500})\$|\\\((.{1,500}?)\\\)|\\\[(.{1,500}?)\\\]", re.DOTALL
)
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
    """Content of the last ``\\boxed{…}`` with balanced braces (a plain regex stops at the first ``}``).

    Loose (any position, last one wins); the `boxed` reward uses the strict `boxed_answer`."""
    start = text.rfind("\\boxed{")
    while start != -1:
        depth, first = 0, start + len("\\boxed{") - 1
        for i in range(first, len(text)):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    return text[start + len("\\boxed{") : i].strip()
        start = text.rfind("\\boxed{", 0, start)  # unbalanced: try an earlier one
    return None


@lru_cache(maxsize=64)
def _tag_pattern(think_tag: str, answer_tag: str) -> re.Pattern:
    return re.compile(f"<(/?)({re.escape(think_tag)}|{re.escape(answer_tag)})>")


def _layout(text: str, answer_tag: str, think_tag: str) -> tuple[list[str], list[str]] | None:
    """(contents of the answer blocks outside think, the pieces of text outside think), None when malformed.

    Tags inside a think block are reasoning text and are skipped. A ``</think>`` before any ``<think>`` closes
    a think block opened by the prompt (chat templates that end with ``<think>``): all before it is reasoning.
    Malformed: a block opened inside another one (``<answer><answer>``, ``<answer><think>``,
    ``<think><think>``), a closing tag with no block open, a block left open.
    """
    opening, closing = f"<{think_tag}>", f"</{think_tag}>"
    # Fast paths (str.find runs in C) for the common layouts: no think tags, or one well-formed think block.
    if f"<{answer_tag}>" not in text and f"</{answer_tag}>" not in text:
        if opening not in text and closing not in text:
            return [], [text]
        t0, t1 = text.find(opening), text.find(closing)
        if 0 <= t0 < t1 and text.count(opening) == 1 and text.count(closing) == 1:
            return [], [text[:t0], text[t1 + len(closing) :]]
    blocks: list[str] = []
    outside: list[str] = []
    start, answer_start, in_think, seen_think = 0, -1, False, False
    for tag in _tag_pattern(think_tag, answer_tag).finditer(text):
        closing, name = tag.group(1) == "/", tag.group(2)
        if name == think_tag:
            if not closing:
                if in_think or answer_start != -1:
                    return None
                outside.append(text[start : tag.start()])
                in_think = seen_think = True
            elif in_think:
                in_think, start = False, tag.end()
            elif not seen_think:
                blocks, outside, answer_start, start, seen_think = [], [], -1, tag.end(), True
            else:
                return None
        elif in_think:
            continue
        elif not closing:
            if answer_start != -1:
                return None
            answer_start = tag.end()
        else:
            if answer_start == -1:
                return None
            blocks.append(text[answer_start : tag.start()])
            answer_start = -1
    if in_think or answer_start != -1:
        return None
    outside.append(text[start:])
    return blocks, outside


def answer_block(text: str, answer_tag: str = "answer", think_tag: str = "think") -> str | None:
    """Stripped content of the ONE ``<answer>…</answer>`` block outside ``<think>``; None when there are
    none or several, when it is blank, or when the tags are malformed (see `_layout`)."""
    opening, closing = f"<{answer_tag}>", f"</{answer_tag}>"
    if text.count(opening) == 1 and text.count(closing) == 1:
        # Fast path (str.find runs in C) for the common layouts; anything else goes through _layout.
        a0, a1 = text.find(opening), text.find(closing)
        t0, t1 = text.find(f"<{think_tag}>"), text.find(f"</{think_tag}>")
        if (
            a0 < a1
            and (t0 == -1 or text.count(f"<{think_tag}>") == 1)
            and (t1 == -1 or text.count(f"</{think_tag}>") == 1)
        ):
            if (t0 == t1 == -1) or (0 <= t0 < t1 and (a1 < t0 or a0 > t1)) or (t0 == -1 and 0 <= t1 < a0):
                return text[a0 + len(opening) : a1].strip() or None
    layout = _layout(text, answer_tag, think_tag)
    if layout is None or len(layout[0]) != 1:
        return None
    return layout[0][0].strip() or None


def boxed_answer(text: str, think_tag: str = "think") -> str | None:
    """The answer the top-level ``\\boxed{…}`` (balanced braces) outside ``<think>`` give; None when there is none
    or the tags are malformed (see `_layout`).

    One distinct box (the same answer boxed twice is one answer) gives its content. Several distinct boxes give
    all of them, in order, as ``\\boxed{a}\\boxed{b}``: that is one answer of several parts, which can only match
    a truth of as many parts (`mathcheck.compare`) and never a single value (`mathcheck.one_answer`)."""
    layout = _layout(text, "\0", think_tag)  # no answer tag can match "<\0>": answer tags play no part here
    if layout is None:
        return None
    found: dict[str, None] = {}  # distinct contents in order of appearance
    for piece in layout[1]:
        start = piece.find("\\boxed{")
        while start != -1:
            end = _closing_brace(piece, start + len("\\boxed{") - 1)
            if end == -1:
                break  # unbalanced: the rest of this piece is inside it
            found[piece[start + len("\\boxed{") : end].strip()] = None
            start = piece.find("\\boxed{", end)
    if len(found) == 1:
        return next(iter(found)) or None
    return "".join(f"\\boxed{{{content}}}" for content in found) or None


@lru_cache(maxsize=65536)
def _compare(truth: str, candidate: str | None) -> float | None:
    # sympy (via math-verify) in a helper process with a real timeout; see mathcheck.py.
    return HELPER.compare(truth, candidate)


def equivalent(candidate: str | None, ground_truth) -> float | None:
    """1.0 if ``candidate`` equals ``ground_truth``, 0.0 if not, None if the truth is missing or blank.

    A truth of words (`mathcheck.is_words`: ``Evelyn``, ``forty two``) equals a candidate with the same words
    after `mathcheck.normalise_words` (case, spacing, ``\\text{}``, trailing punctuation): ``forty two`` is
    not 42. Any other truth is math (`mathcheck.compare`): the candidate must be one answer
    (`mathcheck.one_answer`; a list ``12, 13`` never equals 12) of at most MAX_ANSWER_CHARS characters, or, for a
    truth of several parts (``(5, 8), (8, 5)``), as many parts as it has (``(5, 8) \\quad\\text{and}\\quad (8, 5)``).
    """
    if ground_truth is None:
        return None
    truth = str(ground_truth).strip()
    if not truth:
        return None
    if candidate is not None and len(candidate) > MAX_ANSWER_CHARS:
        candidate = None  # runaway text, not an answer (sympy can take minutes on it): only the truth is checked
    if _PLAIN_NUMBER.fullmatch(truth):
        # Fast exact paths for a numeric truth; sympy costs 1-12 ms a comparison.
        if candidate is None:
            return 0.0
        if not _PLAIN_NUMBER.fullmatch(candidate.strip()):
            candidate = one_answer(candidate)
            if candidate is None:
                return 0.0
        if _PLAIN_NUMBER.fullmatch(candidate.strip()):
            return 1.0 if Fraction(truth) == Fraction(candidate.strip()) else 0.0
        if not any(ch.isdigit() for ch in candidate):
            return 0.0  # words without a digit never equal a number (math-verify agrees, slowly)
        return _compare(truth, candidate)
    if is_words(truth):  # no sympy needed: decided here, as mathcheck.compare would
        return 0.0 if candidate is None else (1.0 if normalise_words(candidate) == normalise_words(truth) else 0.0)
    if candidate is not None:
        # Not one answer: still sent whole, as the truth may be of several parts (`6 \text{ and } 8`; known only
        # once parsed, in the helper), answered in parts.
        candidate = one_answer(candidate) or candidate
    return _compare(truth, candidate)


@reward("correct", ANSWER_TAG)
def correct(
    completions, ground_truth, answer_tag: str = "answer", think_tag: str = "think", **kwargs
) -> list[float | None]:
    """1 when the one `<answer>` block outside `<think>` (`answer_block`) equals `ground_truth` (`equivalent`)."""
    return [
        equivalent(answer_block(text, answer_tag, think_tag), truth)
        for text, truth in zip(texts(completions), ground_truth)
    ]


@reward("boxed")
def boxed(completions, ground_truth, think_tag: str = "think", **kwargs) -> list[float | None]:
    """1 when the distinct `\\boxed{…}` outside `<think>` (`boxed_answer`) equal `ground_truth` (`equivalent`): one
    box for a truth of one part, or one box per part (or fewer boxes holding lists) for a truth of several."""
    return [equivalent(boxed_answer(text, think_tag), truth) for text, truth in zip(texts(completions), ground_truth)]


@reward("int", ANSWER_TAG)
def int_answer(completions, answer_tag: str = "answer", think_tag: str = "think", **kwargs) -> list[float]:
    """1 when the one `<answer>` block outside `<think>` (`answer_block`) is an integer of ASCII digits, negative
    ones too (`str.isdigit` misses them), of at most MAX_ANSWER_CHARS characters."""
    scores = []
    for text in texts(completions):
        answer = answer_block(text, answer_tag, think_tag)
        scores.append(1.0 if answer is not None and len(answer) <= MAX_ANSWER_CHARS and _INT.fullmatch(answer) else 0.0)
    return scores
