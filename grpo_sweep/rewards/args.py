"""A reward's arguments from config (a factory's ``factory_args``, a reward model's ``model_args``, a reward's
``params``), read as the kind they must be: each refusal is one line naming the key and the value, and what to give
instead. ``check_arguments`` holds them to the function's own annotations."""

from __future__ import annotations

import inspect
import math
import types
import typing
from typing import Any, Mapping

from ..config.grpo_fields import Domain, kinds_of, value_kind
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


# What some factories' arguments can be beyond their annotations' types, by the factory's module and name: TRL's
# rewards take any int, and crash at the first step on some (an n-gram of 0 tokens divides by zero).
FACTORY_DOMAINS: dict[str, dict[str, Domain]] = {
    "trl.rewards.other_rewards.get_repetition_penalty_reward": {
        "ngram_size": Domain(1, what="tokens an n-gram"),
        "max_penalty": Domain(None, 0, what="a penalty"),
    },
    "trl.rewards.other_rewards.get_soft_overlong_punishment": {
        "max_completion_len": Domain(1, what="tokens"),
        "soft_punish_cache": Domain(0, what="tokens"),
    },
    "trl.rewards.accuracy_rewards.get_cosine_scaled_reward": {"max_len": Domain(1, what="tokens")},
}


def _annotations(fn: Any) -> dict[str, Any]:
    """Parameter -> its annotation, as a type (a string annotation that does not resolve is left out)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}
    try:
        hints = typing.get_type_hints(fn.__init__ if inspect.isclass(fn) else fn)
    except Exception:  # noqa: BLE001  (a name the annotation uses is not importable here: not checked)
        hints = {}
    out = {name: hints.get(name, p.annotation) for name, p in params.items() if p.annotation is not p.empty}
    return {name: a for name, a in out.items() if not isinstance(a, str)}


def _expected(annotation: Any) -> tuple[list[str], list[Any]]:
    """(kinds, literal values) an annotation takes: ``int | None`` -> (int, none); ``Literal["a", "b"]`` ->
    ("a", "b")."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        parts = [_expected(arg) for arg in typing.get_args(annotation)]
        return [k for kinds, _ in parts for k in kinds], [v for _, values in parts for v in values]
    if origin is typing.Literal:
        return [], list(typing.get_args(annotation))
    return kinds_of(annotation), []


def _mismatch(value: Any, annotation: Any) -> str | None:
    """What ``annotation`` takes, when ``value`` is not of it (None: it is, or the annotation is not one checked)."""
    kinds, literals = _expected(annotation)
    kind = value_kind(value)
    if "any" in kinds or kind == "any" or any(type(value) is type(v) and value == v for v in literals):
        return None
    if kind in kinds or (kind == "int" and "float" in kinds):
        return None
    return " or ".join([*kinds, *(repr(v) for v in literals)])


def check_arguments(fn: Any, values: Mapping[str, Any], where: str, name: str) -> None:
    """Each of ``values`` (config's arguments for ``fn``, set as ``<where>.<key>``) against ``fn``'s annotation of it
    (bool, int, float, str, None, Literal and unions of them; a class of its own is not checked) and, for a factory
    of ``FACTORY_DOMAINS``, its domain: a one-line RewardError naming the key, the value and what ``name`` takes."""
    annotations = _annotations(fn)
    domains = FACTORY_DOMAINS.get(f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', '')}", {})
    for key, value in values.items():
        if key in annotations and (takes := _mismatch(value, annotations[key])):
            raise RewardError(f"{where}.{key}={value!r}: {name}'s {key} takes {takes}, not {value_kind(value)}")
        domain = domains.get(key)
        if domain is not None and value_kind(value) in ("int", "float") and not domain.holds(value):
            raise RewardError(f"{where}.{key}={value!r}: {domain.text()} ({domain.what})")
