"""Format rewards: does the completion lay out its reasoning and answer in the tags asked for?

Tag names are parameters (the walkthrough mixes ``<think>`` and ``<reasoning>``). Every reward
returns one float in [0, 1] per completion.
"""

from __future__ import annotations

import re
from functools import lru_cache

from ._text import texts
from .registry import Needs, reward

# every format reward scores both blocks
TAGS = Needs(tag_params=("think_tag", "answer_tag"))


@lru_cache(maxsize=64)
def _tag_pattern(think: str, answer: str) -> re.Pattern:
    return re.compile(f"<(/?)({re.escape(think)}|{re.escape(answer)})>")


@lru_cache(maxsize=64)
def _format_pattern(think: str, answer: str) -> re.Pattern:
    # DOTALL so reasoning may span lines (the walkthrough's `.*?` without it fails on any newline).
    return re.compile(rf"\s*<{think}>(.*?)</{think}>\s*<{answer}>(.*?)</{answer}>\s*", re.DOTALL)


@lru_cache(maxsize=64)
def _strict_pattern(think: str, answer: str) -> re.Pattern:
    # The walkthrough's exact layout: each tag on its own line, one trailing newline allowed.
    return re.compile(rf"<{think}>\n(.*?)\n</{think}>\n<{answer}>\n(.*?)\n</{answer}>\n?", re.DOTALL)


def _one_block_each(pattern: re.Pattern, text: str, think: str, answer: str) -> bool:
    """``pattern`` (think group, answer group) matches all of ``text``, neither group holds a tag of either kind
    (so there is no second block anywhere) and the answer is not blank."""
    # With one closing tag of each kind the lazy groups have one way to match: linear time, where
    # `</think><answer>` repeated would make the bare pattern try every pair.
    if text.count(f"</{think}>") != 1 or text.count(f"</{answer}>") != 1:
        return False
    match = pattern.fullmatch(text)
    if match is None or not match.group(2).strip():
        return False
    tags = _tag_pattern(think, answer)
    return tags.search(match.group(1)) is None and tags.search(match.group(2)) is None


@reward("format", TAGS)
def format_reward(completions, think_tag: str = "think", answer_tag: str = "answer", **kwargs) -> list[float]:
    """1 when the completion is exactly one `<think>…</think>` then exactly one `<answer>…</answer>` with
    non-blank content, no tag of either kind inside either block, and only whitespace before, between and
    after them. The reasoning may be anything, blank too, over any number of lines."""
    pattern = _format_pattern(think_tag, answer_tag)
    return [1.0 if _one_block_each(pattern, t, think_tag, answer_tag) else 0.0 for t in texts(completions)]


@reward("strict_format", TAGS)
def strict_format(completions, think_tag: str = "think", answer_tag: str = "answer", **kwargs) -> list[float]:
    """1 for the walkthrough's exact layout: `<think>\\n…\\n</think>\\n<answer>\\n…\\n</answer>`, one trailing
    newline allowed, nothing else; the same one-block-each rule as `format` (answer non-blank)."""
    pattern = _strict_pattern(think_tag, answer_tag)
    return [1.0 if _one_block_each(pattern, t, think_tag, answer_tag) else 0.0 for t in texts(completions)]


@reward("soft_format", TAGS)
def soft_format(completions, think_tag: str = "think", answer_tag: str = "answer", **kwargs) -> list[float]:
    """1 when a `<think>…</think>` block comes before an `<answer>…</answer>` block with non-blank content,
    neither nested in another block (an opening tag left unclosed before them counts as one) nor holding a
    tag; other text, further blocks and stray closing tags may be anywhere."""
    pattern = _tag_pattern(think_tag, answer_tag)
    scores = []
    tags = (f"<{think_tag}>", f"</{think_tag}>", f"<{answer_tag}>", f"</{answer_tag}>")
    for text in texts(completions):
        t0, t1, a0, a1 = (text.find(tag) for tag in tags)
        if t0 == -1 or a1 == -1:  # cheap reject, no scan
            scores.append(0.0)
            continue
        if t0 < t1 < a0 < a1 and all(text.count(tag) == 1 for tag in tags):  # the common case, in C
            scores.append(1.0 if text[a0 + len(tags[2]) : a1].strip() else 0.0)
            continue
        think_end, found, stack = -1, False, []
        for tag in pattern.finditer(text):
            if not tag.group(1):
                stack.append(tag)
                continue
            if not stack or stack[-1].group(2) != tag.group(2):
                continue  # a stray closing tag opens or closes nothing
            opening = stack.pop()
            content = text[opening.end() : tag.start()]
            if stack or pattern.search(content):
                continue  # nested in an open block, or holding a tag: not a block of its own
            if tag.group(2) == think_tag and think_end == -1:
                think_end = tag.end()
            elif (
                tag.group(2) == answer_tag and think_end != -1 and opening.start() >= think_end and not _blank(content)
            ):
                found = True
                break
        scores.append(1.0 if found else 0.0)
    return scores


def _blank(text: str) -> bool:
    return not text.strip()


@reward("xmlcount", TAGS)
def xmlcount(
    completions,
    think_tag: str = "think",
    answer_tag: str = "answer",
    trailing_penalty: float = 0.002,
    **kwargs,
) -> list[float]:
    """Partial credit, 0.25 per tag that appears exactly once and in order; text after `</answer>` costs a little.

    A dense version of Unsloth's `xmlcount_reward_func` (which gives 0.125 per tag, up to 0.5), scaled to
    [0, 1]. Dense partial credit is what lets a small model discover the format at all.
    """
    tags = (f"<{think_tag}>", f"</{think_tag}>", f"<{answer_tag}>", f"</{answer_tag}>")
    scores = []
    for text in texts(completions):
        score, cursor = 0.0, 0
        for tag in tags:
            if text.count(tag) != 1:
                continue
            position = text.find(tag)
            if position >= cursor:  # in order after the previous credited tag
                score += 0.25
                cursor = position + len(tag)
        closing = text.rfind(tags[3])
        if closing != -1 and text.count(tags[3]) == 1:
            trailing = text[closing + len(tags[3]) :].strip()
            score -= trailing_penalty * len(trailing)
        scores.append(min(1.0, max(0.0, score)))
    return scores
