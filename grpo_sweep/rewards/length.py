"""Length reward: longer (or shorter) completions score more, scaled by the completion budget."""

from __future__ import annotations

from ._text import texts
from .registry import reward

# Rough characters per token, used only when TRL did not pass token ids (e.g. rewards called directly).
_CHARS_PER_TOKEN = 4


@reward("length")
def length(
    completions,
    completion_ids=None,
    max_completion_length: int = 256,
    prefer: str = "long",
    **kwargs,
) -> list[float]:
    """Completion length over `max_completion_length`, in [0, 1]; `prefer="short"` gives 1 minus that."""
    if prefer not in ("long", "short"):
        raise ValueError(f"length reward: prefer={prefer!r}; use 'long' or 'short'")
    if completion_ids is not None:
        lengths = [len(ids) for ids in completion_ids]
    else:
        lengths = [len(t) / _CHARS_PER_TOKEN for t in texts(completions)]
    scores = [min(1.0, n / max_completion_length) for n in lengths]
    return scores if prefer == "long" else [1.0 - s for s in scores]
