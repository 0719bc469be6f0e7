"""Format rewards: does the completion lay out its reasoning and answer in the tags asked for?

Tag names are parameters (the walkthrough mixes ``<think>`` and ``<reasoning>``). Every reward
returns one float in [0, 1] per completion.
"""
from __future__ import annotations

import re
from functools import lru_cache

from ._text import texts
from .registry import reward


@lru_cache(maxsize=64)
def _format_pattern(think: str, answer: str) -> re.Pattern:
    # DOTALL so reasoning may span lines (the walkthrough's `.*?` without it fails on any newline).
    return re.compile(
        rf"\s*<{think}>.*?</{think}>\s*<{answer}>.*?</{answer}>\s*",
        re.DOTALL,
    )


@lru_cache(maxsize=64)
def _strict_pattern(think: str, answer: str) -> re.Pattern:
    # The walkthrough's exact layout: each tag on its own line, one trailing newline allowed.
    return re.compile(
        rf"<{think}>\n.*?\n</{think}>\n<{answer}>\n.*?\n</{answer}>\n?",
        re.DOTALL,
    )


@lru_cache(maxsize=64)
def _soft_pattern(think: str, answer: str) -> re.Pattern:
    return re.compile(rf"<{think}>.*?</{think}>.*?<{answer}>.*?</{answer}>", re.DOTALL)


@reward("format")
def format_reward(completions, think_tag: str = "think", answer_tag: str = "answer", **kwargs) -> list[float]:
    """1 when the completion is `<think>…</think>` then `<answer>…</answer>` with only whitespace around them."""
    pattern = _format_pattern(think_tag, answer_tag)
    return [1.0 if pattern.fullmatch(t) else 0.0 for t in texts(completions)]


@reward("strict_format")
def strict_format(completions, think_tag: str = "think", answer_tag: str = "answer", **kwargs) -> list[float]:
    """1 when the completion follows the walkthrough's exact newline layout of both tag pairs."""
    pattern = _strict_pattern(think_tag, answer_tag)
    return [1.0 if pattern.fullmatch(t) else 0.0 for t in texts(completions)]


@reward("soft_format")
def soft_format(completions, think_tag: str = "think", answer_tag: str = "answer", **kwargs) -> list[float]:
    """1 when both tag pairs appear in order anywhere in the completion."""
    pattern = _soft_pattern(think_tag, answer_tag)
    return [1.0 if pattern.search(t) else 0.0 for t in texts(completions)]


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
