"""The name → function registry of built-in rewards, and the decorator that fills it.

Kept free of heavy imports: composing and validating a config on a login node looks names up here.
"""
from __future__ import annotations

from typing import Callable

RewardFn = Callable[..., list]

REWARDS: dict[str, RewardFn] = {}


def reward(name: str) -> Callable[[RewardFn], RewardFn]:
    """Register a built-in reward under ``name`` and make ``name`` its ``__name__``.

    TRL logs each reward as ``rewards/<fn.__name__>/mean``, so the registry name is what users see.
    """

    def register(fn: RewardFn) -> RewardFn:
        if name in REWARDS:
            raise ValueError(f"reward name {name!r} registered twice")
        fn.__name__ = name
        fn.__qualname__ = name
        REWARDS[name] = fn
        return fn

    return register
