"""The name → function registry of built-in rewards, and the decorator that fills it.

Kept free of heavy imports: composing and validating a config on a login node looks names up here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable, Mapping

from ..config.show import first_line

RewardFn = Callable[..., list]

REWARDS: dict[str, RewardFn] = {}

# The directory `python launch.py` was started from, told to every process of the launch (run/context.py): with
# PYTHONPATH, where a reward's module given by import path is imported from.
LAUNCH_DIR_ENV = "GRPO_SWEEP_LAUNCH_DIR"


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


def launch_dir() -> str:
    return os.environ.get(LAUNCH_DIR_ENV) or os.getcwd()


def unimportable(module: str, exc: BaseException) -> str:
    """Why ``module`` (a reward's or a factory's, by import path) did not import, and what would make it import:
    the module itself not found is a matter of where it is looked for (the launch directory and PYTHONPATH,
    those of every process of the launch); anything else is the module's own error."""
    missing = getattr(exc, "name", None) if isinstance(exc, ModuleNotFoundError) else None
    if missing and (module == missing or module.startswith(missing + ".")):
        return (
            f"cannot import module {module!r} from the launch directory {launch_dir()} or PYTHONPATH; run from "
            "the directory that holds it, or add that directory to PYTHONPATH"
        )
    return f"cannot import module {module!r} ({first_line(exc)})"
