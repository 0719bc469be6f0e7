"""Turn a ``reward_mix`` config into TRL's ``reward_funcs`` and ``reward_weights``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from . import NEEDS_GROUND_TRUTH, REWARDS, RewardError, build_reward
from .guard import guarded

# Trainer settings a reward may take as a parameter; bound automatically unless the mix sets them.
TRAINER_PARAMS = ("max_completion_length",)


@dataclass
class Term:
    name: str
    target: str
    weight: float
    params: dict


TERM_KEYS = ("weight", "fn", "params")


def terms(mix: Mapping[str, Any]) -> list[Term]:
    out = []
    for name, term in mix.items():
        term = term if term is not None else {}
        if not isinstance(term, Mapping):
            raise RewardError(f"reward_mix.{name}={term!r}: give a mapping such as {{weight: 1.0}}")
        unknown = [key for key in term if key not in TERM_KEYS]
        if unknown:
            raise RewardError(f"reward_mix.{name}: unknown key {unknown[0]!r}; a reward takes {', '.join(TERM_KEYS)}")
        if not isinstance(term.get("weight", 1.0), (int, float)) or isinstance(term.get("weight"), bool):
            raise RewardError(f"reward_mix.{name}.weight={term.get('weight')!r}: must be a number")
        out.append(
            Term(
                name=str(name),
                target=str(term.get("fn") or name),
                weight=float(term.get("weight", 1.0)),
                params=dict(term.get("params") or {}),
            )
        )
    return out


def check_mix(mix: Mapping[str, Any]) -> list[Term]:
    """Resolve every reward and check the weights; raise a one-line RewardError naming the bad entry."""
    mix_terms = terms(mix)
    if not mix_terms:
        raise RewardError(f"reward_mix is empty; pick one of conf/reward_mix/ or add rewards, built-ins: {', '.join(sorted(REWARDS))}")
    for term in mix_terms:
        build_reward(term.name, term.target, term.params)  # raises on unknown names / bad imports
        if term.weight < 0:
            raise RewardError(f"reward_mix.{term.name}.weight={term.weight}: weights must be >= 0")
    if all(term.weight == 0 for term in mix_terms):
        raise RewardError("reward_mix: every weight is 0, so there is nothing to learn; give one reward a weight > 0")
    return mix_terms


def needs_ground_truth(mix: Mapping[str, Any]) -> bool:
    return any(term.target in NEEDS_GROUND_TRUTH for term in terms(mix))


def data_columns(mix: Mapping[str, Any]) -> dict[str, str]:
    """Dataset columns (other than ground_truth) that rewards of the mix read: column -> reward name."""
    return {str(term.params.get("tests_column", "tests")): term.name for term in terms(mix) if term.target == "code"}


def build_mix(mix: Mapping[str, Any], trainer_cfg: Any = None, on_error: str = "raise") -> tuple[list, list[float]]:
    """(reward_funcs, reward_weights) for GRPOConfig/GRPOTrainer, in the mix's order; each reward guarded."""
    funcs, weights = [], []
    for term in check_mix(mix):
        params = dict(term.params)
        for key in TRAINER_PARAMS:
            if trainer_cfg is not None and key not in params and _accepts(term.target, key):
                params[key] = trainer_cfg[key]
        funcs.append(guarded(build_reward(term.name, term.target, params), term.name, on_error))
        weights.append(term.weight)
    return funcs, weights


def _accepts(target: str, param: str) -> bool:
    import inspect

    from . import resolve_reward

    try:
        return param in inspect.signature(resolve_reward(target)).parameters
    except (TypeError, ValueError):
        return False
