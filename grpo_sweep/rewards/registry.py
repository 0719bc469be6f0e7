"""The name → function registry of built-in rewards, and the decorator that fills it.

Kept free of heavy imports: composing and validating a config on a login node looks names up here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

RewardFn = Callable[..., list]

REWARDS: dict[str, RewardFn] = {}


@dataclass(frozen=True)
class Needs:
    """What a reward needs beyond the columns its signature names (those are read off it: `required_columns`).
    Declared where the reward is registered (or as a function's ``reward_needs`` attribute, for one's own);
    validation, the data checks and the machine check read it from here."""

    # parameter -> its default: the reward reads the column that this parameter names, through **kwargs
    column_params: Mapping[str, str] = field(default_factory=dict)
    # it runs generated code: its `isolation` param must be one the sandbox has, and the machine must provide it
    sandbox: bool = False
    # parameters naming a tag the completion must write to score (think_tag, answer_tag): the system prompt must
    # ask for that tag, or a model that follows the prompt cannot earn the reward (validation checks it)
    tag_params: tuple[str, ...] = ()


def needs(fn: RewardFn) -> Needs:
    return getattr(fn, "reward_needs", None) or Needs()


def reward(name: str, needs: Needs | None = None) -> Callable[[RewardFn], RewardFn]:
    """Register a built-in reward under ``name`` and make ``name`` its ``__name__``.

    TRL logs each reward as ``rewards/<fn.__name__>/mean``, so the registry name is what users see.
    """

    def register(fn: RewardFn) -> RewardFn:
        if name in REWARDS:
            raise ValueError(f"reward name {name!r} registered twice")
        fn.__name__ = name
        fn.__qualname__ = name
        if needs is not None:
            fn.reward_needs = needs
        REWARDS[name] = fn
        return fn

    return register
