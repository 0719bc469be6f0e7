"""Format rewards: does the completion lay out its reasoning and answer in the tags asked for?

Tag names are parameters (the walkthrough mixes ``<think>`` and ``<reasoning>``). Every reward
returns one float in [0, 1] per completion.
"""
from __future__ import annotations

import re
from functools import lru_cache
from itertools import islice

from ._text import texts
from .registry import reward


@lru_cache(maxsize=64)
def _tag_pattern(think: str, answer: str) -> re.Pattern:
    return re.compile(f"<(/?)({re.escape(think)}|{re.escape(answer)})>")


def _two_blocks(text: str, think: str, answer: str) -> tuple[str, str, str, str, str] | None:
    """(before, think content, between, answer content, after) when the only tags of either kind in ``text`` are
    one ``<think>``, ``</think>``, ``<answer>``, ``</answer>`` in that order; None otherwise. So neither block
    holds a tag of either kind and no second block exists anywhere."""
    tags = list(islice(_tag_pattern(think, answer).finditer(text), 5))  # a fifth tag already fails
    if [(t.group(1), t.group(2)) for t in tags] != [("", think), ("/", think), ("", answer), ("/", answer)]:
        return None
    t0, t1, t2, t3 = tags
    return (
        text[: t0.start()], text[t0.end() : t1.start()], text[t1.end() : t2.start()],
        text[t2.end() : t3.start()], text[t3.end() :],
    )


@reward("format")
def format_reward(completions, think_tag: str = "think", answer_tag: str = "answer", **kwargs) -> list[float]:
    """1 when the completion is exactly one `<think>…</think>` then exactly one `<answer>…</answer>` with
    non-blank content, no tag of either kind inside either block, and only whitespace before, between and
    after them. The reasoning may be anything, blank too, over any number of lines."""
    scores = []
    for text in texts(completions):
        parts = _two_blocks(text, think_tag, answer_tag)
        ok = parts is not None and _blank(parts[0]) and _blank(parts[2]) and _blank(parts[4]) and not _blank(parts[3])
        scores.append(1.0 if ok else 0.0)
    return scores


@reward("strict_format")
def strict_format(completions, think_tag: str = "think", answer_tag: str = "answer", **kwargs) -> list[float]:
    """1 for the walkthrough's exact layout: `<think>\\n…\\n</think>\\n<answer>\\n…\\n</answer>`, one trailing
    newline allowed, nothing else; the same one-block-each rule as `format` (answer non-blank)."""
    scores = []
    for text in texts(completions):
        parts = _two_blocks(text, think_tag, answer_tag)
        ok = (
            parts is not None
            and parts[0] == "" and parts[2] == "\n" and parts[4] in ("", "\n")
            and _newline_framed(parts[1]) and _newline_framed(parts[3]) and not _blank(parts[3])
        )
        scores.append(1.0 if ok else 0.0)
    return scores


@reward("soft_format")
def soft_format(completions, think_tag: str = "think", answer_tag: str = "answer", **kwargs) -> list[float]:
    """1 when a `<think>…</think>` block comes before an `<answer>…</answer>` block with non-blank content,
    neither nested in another block (an opening tag left unclosed before them counts as one) nor holding a
    tag; other text, further blocks and stray closing tags may be anywhere."""
    pattern = _tag_pattern(think_tag, answer_tag)
    scores = []
    for text in texts(completions):
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
            elif tag.group(2) == answer_tag and think_end != -1 and opening.start() >= think_end and not _blank(content):
                found = True
                break
        scores.append(1.0 if found else 0.0)
    return scores


def _blank(text: str) -> bool:
    return not text.strip()


def _newline_framed(content: str) -> bool:
    return len(content) >= 2 and content[0] == "\n" and content[-1] == "\n"


@reward("xmlcount")
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
            trailing = text[closing + len(tags[3]):].strip()
            score -= trailing_penalty * len(trailing)
        scores.append(min(1.0, max(0.0, score)))
    return scores
