"""A reward's arguments from config (a factory's ``factory_args``, a reward model's ``model_args``), read as the
kind they must be: each refusal is one line naming the key and the value, and what to give instead."""
from __future__ import annotations

import math
from typing import Any

from . import RewardError


def flag(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise RewardError(f"{key}={value!r}: give true or false")
    return value


def whole_number(key: str, value: Any, low: int, null: str | None = None) -> int | None:
    """``value`` as an int >= ``low``; with ``null`` (what null means, for the message) None is taken too."""
    if value is None and null is not None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise RewardError(f"{key}={value!r}: give a whole number >= {low}" + (f", or null ({null})" if null else ""))
    return value


def non_negative(key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise RewardError(f"{key}={value!r}: give a number >= 0")
    return float(value)


def seconds(key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 < value < math.inf):
        raise RewardError(f"{key}={value!r}: give seconds, a number > 0")
    return float(value)
