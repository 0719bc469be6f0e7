"""Reward library: small, pure functions over TRL's batch lists.

``REWARDS`` maps each built-in name to its function. Any importable function can be used too, by dotted
path (``mypkg.rewards.my_reward`` or ``mypkg.rewards:my_reward``); ``build_reward`` binds keyword parameters
from config and keeps a stable ``__name__`` so TRL logs ``rewards/<name>/mean``.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
from typing import Any, Mapping

from . import answer, code, format, length  # noqa: F401  (importing registers the built-ins)
from ._text import completion_text
from .answer import equivalent, extract_answer, extract_boxed
from .registry import REWARDS, Needs, RewardFn, needs, unimportable

__all__ = [
    "REWARDS",
    "RewardError",
    "Needs",
    "bind_reward",
    "build_reward",
    "check_signature",
    "completion_text",
    "equivalent",
    "extract_answer",
    "extract_boxed",
    "needs",
    "required_columns",
    "resolve_reward",
]

# What TRL's GRPOTrainer passes every reward besides the dataset columns (trl 1.14, _calculate_rewards).
TRL_ARGS = frozenset({"prompts", "completions", "completion_ids", "trainer_state", "log_extra", "log_metric"})


def required_columns(fn: RewardFn, bound=()) -> list[str]:
    """The dataset columns ``fn`` cannot be called without: parameters with no default that TRL does not
    pass itself and that config does not bind (``bound``: the mix's params, trainer settings)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return []
    keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [
        p.name
        for p in params
        if p.kind in keyword and p.default is p.empty and p.name not in TRL_ARGS and p.name not in bound
    ]


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
    fn = import_callable(target, f"reward {target!r}")
    check_signature(target, fn)
    return fn


def import_callable(path: str, where: str):
    """The function an import path (``pkg.mod.fn``, ``pkg.mod:fn``, ``pkg.mod:Class.fn``) names; a one-line RewardError
    starting with ``where`` when the module cannot be imported or has no such function (a reward's path, a factory's
    path)."""
    module_name, _, attr = path.rpartition(":") if ":" in path else path.rpartition(".")
    try:
        # imported here first, not by resolve_name alone: its errors name the module (resolve_name's own say
        # "invalid format" for a name that is no module, and read pkg.nosuch.fn as pkg lacking nosuch)
        importlib.import_module(module_name)
    except Exception as exc:  # ImportError, or the module raising while imported
        raise RewardError(f"{where}: {unimportable(module_name, exc)}") from None
    try:
        fn = pkgutil.resolve_name(f"{module_name}:{attr}")  # the attribute path too: pkg.mod:Class.method
    except (AttributeError, ValueError):
        fn = None
    if not callable(fn):
        raise RewardError(f"{where}: module {module_name!r} has no function {attr!r}")
    return fn


def check_signature(target: str, fn: RewardFn) -> None:
    """Raise a one-line RewardError when TRL could not call ``fn`` (``target`` names it in the message)."""
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
    positional = [p.name for p in params if p.kind is p.POSITIONAL_ONLY and p.default is p.empty]
    if positional:
        raise RewardError(
            f"reward {target!r}: parameter {positional[0]!r} is positional-only, but TRL passes everything by keyword"
        )


def build_reward(
    name: str,
    target: str | None = None,
    params: Mapping[str, Any] | None = None,
    columns: Mapping[str, str] | None = None,
) -> RewardFn:
    """The reward ``target`` (default: ``name``) with ``params`` bound, logged by TRL under ``name``.

    ``columns`` maps a parameter of the reward to the dataset column it is given (``{answer: ground_truth}``
    hands a reward written for a column ``answer`` the data's ``ground_truth``).
    """
    return bind_reward(name, resolve_reward(target or name), params, columns)


def bind_reward(
    name: str, fn: RewardFn, params: Mapping[str, Any] | None = None, columns: Mapping[str, str] | None = None
) -> RewardFn:
    """``build_reward`` for a reward already in hand (one a factory returned)."""
    params = dict(params or {})
    bound: RewardFn = functools.partial(fn, **params) if params else fn
    if columns:
        bound = _renamed(bound, dict(columns))
    if bound is fn and getattr(fn, "__name__", None) == name:
        return fn
    wrapper = functools.update_wrapper(functools.partial(bound), fn)
    wrapper.__name__ = name
    wrapper.__qualname__ = name
    return wrapper


def _renamed(fn: RewardFn, columns: dict[str, str]) -> RewardFn:
    def call(*args, **kwargs):
        for param, column in columns.items():
            if column in kwargs:  # absent: let fn's own error name the missing parameter
                kwargs[param] = kwargs[column]
        return fn(*args, **kwargs)

    return call
