"""Reward library: small, pure functions over TRL's batch lists.

``REWARDS`` maps each built-in name to its function. Any importable function can be used too, by dotted
path (``mypkg.rewards.my_reward`` or ``mypkg.rewards:my_reward``); ``build_reward`` binds keyword parameters
from config and keeps a stable ``__name__`` so TRL logs ``rewards/<name>/mean``.
"""
from __future__ import annotations

import functools
import importlib
import inspect
from typing import Any, Mapping

from . import answer, code, format, length  # noqa: F401  (importing registers the built-ins)
from ._text import completion_text
from .answer import equivalent, extract_answer, extract_boxed
from .registry import REWARDS, RewardFn

__all__ = [
    "REWARDS",
    "RewardError",
    "build_reward",
    "completion_text",
    "equivalent",
    "extract_answer",
    "extract_boxed",
    "resolve_reward",
]

# Rewards whose score is only meaningful against a ground_truth column.
NEEDS_GROUND_TRUTH = frozenset({"correct", "boxed"})


class RewardError(ValueError):
    """A reward named in config cannot be found or cannot take TRL's arguments."""


def resolve_reward(target: str) -> RewardFn:
    """A built-in reward by name, or any function by import path; a one-line error otherwise."""
    if target in REWARDS:
        return REWARDS[target]
    if "." not in target and ":" not in target:
        raise RewardError(
            f"unknown reward {target!r}; built-in rewards are: {', '.join(sorted(REWARDS))} "
            "(or give an import path such as mypkg.rewards.my_reward)"
        )
    module_name, _, attr = target.rpartition(":") if ":" in target else target.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # ImportError, or the module raising while imported
        raise RewardError(f"reward {target!r}: cannot import module {module_name!r} ({exc})") from exc
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise RewardError(f"reward {target!r}: module {module_name!r} has no function {attr!r}")
    _check_signature(target, fn)
    return fn


def _check_signature(target: str, fn: RewardFn) -> None:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return  # builtins / C functions: nothing to check
    takes_kwargs = any(p.kind is p.VAR_KEYWORD for p in params)
    names = {p.name for p in params}
    if "completions" not in names and not takes_kwargs:
        raise RewardError(
            f"reward {target!r} cannot take TRL's arguments: it needs a `completions` parameter "
            "and **kwargs (TRL passes prompts, completions, completion_ids and every dataset column)"
        )
    if not takes_kwargs:
        raise RewardError(
            f"reward {target!r} must accept **kwargs: TRL passes prompts, completion_ids, trainer_state "
            "and every dataset column by keyword"
        )


def build_reward(name: str, target: str | None = None, params: Mapping[str, Any] | None = None) -> RewardFn:
    """The reward ``target`` (default: ``name``) with ``params`` bound, logged by TRL under ``name``."""
    fn = resolve_reward(target or name)
    params = dict(params or {})
    bound: RewardFn = functools.partial(fn, **params) if params else fn
    if bound is fn and fn.__name__ == name:
        return fn
    wrapper = functools.update_wrapper(functools.partial(bound), fn)
    wrapper.__name__ = name
    wrapper.__qualname__ = name
    return wrapper
