"""Search spaces: plain parameters, config-group choices, reward weights on a simplex, batch-compatible
num_generations.

GRPO normalises advantages within each group, so multiplying every reward weight by one factor barely changes
training. Reward weights are therefore searched on the simplex (they sum to 1): a stick-breaking map from
[0, 1]^(k-1) onto the simplex, uniform for a uniform sampler, gives every trial a different mix.
A categorical over a config group (``reward_mix: {type: categorical, choices: [format, correct]}``) is applied
as a group override (``reward_mix=format``) when the trial's config is composed: the group is a dict, which a
value assignment cannot replace. When the mix itself is searched, the simplex is conditional on the chosen
mix: its parameters are named ``simplex.<mix>.<reward>`` so that TPE never pools one mix's weights with
another's (Optuna's define-by-run samples only the chosen mix's parameters).
No heavy imports: the sweeper composes these on the submitting node.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

PARAM_TYPES = ("float", "int", "categorical")
# GRPOConfig fields outside the schema pass through this open dict (train.py hands it to GRPOConfig)
PASSTHROUGH = "trainer.args."
MIX = "reward_mix"
# the Optuna parameters of the simplex: stick-breaking coordinates, not weights (``simplex.<mix>.<reward>`` when the
# mix is searched)
SIMPLEX = "simplex."
# the most combinations of the parameters' edges the sweeper composes and checks (~20 ms each) before any worker starts
EDGE_COMBINATIONS = 256
EXAMPLE = "{type: float, low: 1e-5, high: 1e-3, log: true}"


class SearchSpaceError(ValueError):
    """A search-space entry that cannot be sampled; the message names it."""


@dataclass
class SearchSpace:
    params: dict[str, dict]
    simplex: list[str]  # reward names whose weights are searched on the simplex
    adjust_batch: bool  # keep prompts per step fixed when num_generations changes
    groups: tuple[str, ...] = ()  # params that choose a config group's option
    added: tuple[str, ...] = ()  # params new to the config (GRPOConfig passthrough): `++key=value`
    simplex_by_mix: dict[str, list[str]] | None = None  # searched mix -> its rewards on the simplex

    @classmethod
    def from_config(
        cls,
        params: Mapping | None,
        reward_weights: Mapping | None,
        cfg: Any,
        groups: Mapping[str, Sequence[str]] | None = None,
        compose: Callable[[list[str]], Any] | None = None,
    ) -> SearchSpace:
        """``groups``: every config group of the config and its options; ``compose``: the job config for
        extra overrides, needed to read the rewards of each mix when ``reward_mix`` itself is searched."""
        from ..base import dotted_params

        settings = {key for keys in RANGE_KEYS.values() for key in keys}
        params = dotted_params(_as_container(params or {}), settings)
        for key, spec in params.items():
            if not isinstance(spec, Mapping):
                raise SearchSpaceError(f"hydra.sweeper.params.{key}={spec!r}: give {{type: ..., ...}}, e.g. {EXAMPLE}")
        params = {str(k): dict(v) for k, v in params.items()}
        groups = groups or {}
        group_params, added = [], []
        for key, spec in params.items():
            kind = spec.get("type")
            if kind not in PARAM_TYPES:
                raise SearchSpaceError(f"hydra.sweeper.params.{key}.type={kind!r}; use one of {PARAM_TYPES}")
            distribution(key, spec)
            if key in groups:
                if kind != "categorical":
                    raise SearchSpaceError(
                        f"hydra.sweeper.params.{key}: a config group takes type categorical with choices "
                        f"among its options ({', '.join(groups[key])}), not {kind}"
                    )
                for choice in spec["choices"]:
                    if str(choice) not in groups[key]:
                        raise SearchSpaceError(
                            f"hydra.sweeper.params.{key}: {choice!r} is not an option of config group {key} "
                            f"({', '.join(groups[key])})"
                        )
                spec["choices"] = [str(c) for c in spec["choices"]]
                group_params.append(key)
            elif _select(cfg, key) is _MISSING:
                name = key[len(PASSTHROUGH) :] if key.startswith(PASSTHROUGH) else ""
                if not name or "." in name:
                    raise SearchSpaceError(f"hydra.sweeper.params: {key!r} is not a config key")
                added.append(key)
        simplex: list[str] = []
        by_mix = None
        if reward_weights and MIX in group_params:
            if compose is None:
                raise SearchSpaceError(f"hydra.sweeper.params.{MIX}: searching the mix needs the config composer")
            wanted = reward_weights.get("rewards")
            terms = {mix: [str(n) for n in compose([f"{MIX}={mix}"]).reward_mix] for mix in params[MIX]["choices"]}
            unknown = [n for n in wanted or [] if not any(n in names for names in terms.values())]
            if unknown:
                raise SearchSpaceError(
                    f"hydra.sweeper.reward_weights.rewards: {unknown} in none of the searched mixes {list(terms)}"
                )
            by_mix = {}
            for mix, names in terms.items():
                chosen = [n for n in names if wanted is None or n in wanted]
                by_mix[mix] = chosen if len(chosen) >= 2 else []  # one reward: its weight is a scale, not a mix
        elif reward_weights:
            names = reward_weights.get("rewards") or list(cfg.reward_mix)
            unknown = [n for n in names if n not in cfg.reward_mix]
            if unknown:
                raise SearchSpaceError(
                    f"hydra.sweeper.reward_weights.rewards: {unknown} not in reward_mix {list(cfg.reward_mix)}"
                )
            if len(names) >= 2:
                simplex = [str(n) for n in names]
        space = cls(
            params=params,
            simplex=simplex,
            adjust_batch=False,
            groups=tuple(group_params),
            added=tuple(added),
            simplex_by_mix=by_mix,
        )
        generations = params.get("trainer.num_generations")
        if generations is not None:
            space.adjust_batch = bool(generations.pop("adjust_batch", True))
            space._check_generations(generations, cfg)
        return space

    def _check_generations(self, spec: dict, cfg: Any) -> None:
        if spec["type"] != "categorical":
            raise SearchSpaceError("hydra.sweeper.params.trainer.num_generations: use type categorical with choices")
        bad = [g for g in spec["choices"] if int(g) < 2]
        if bad:
            raise SearchSpaceError(f"hydra.sweeper.params.trainer.num_generations: choices {bad} < 2")
        if not self.adjust_batch:
            t = cfg.trainer
            batch = t.per_device_train_batch_size * (t.steps_per_generation or t.gradient_accumulation_steps)
            ok = [g for g in spec["choices"] if batch % int(g) == 0]
            if not ok:
                raise SearchSpaceError(
                    f"hydra.sweeper.params.trainer.num_generations: no choice in {list(spec['choices'])} divides "
                    f"the generation batch {batch}; set adjust_batch: true or change the choices"
                )
            spec["choices"] = ok

    def suggest(self, trial, cfg: Any) -> dict[str, Any]:
        """Sample one point: ``{dotted config key: value}`` ready to apply as overrides."""
        values: dict[str, Any] = {}
        for key, spec in self.params.items():
            kind = spec["type"]
            step = {"step": spec["step"]} if spec.get("step") is not None else {}
            if kind == "float":
                values[key] = trial.suggest_float(
                    key, spec["low"], spec["high"], log=bool(spec.get("log", False)), **step
                )
            elif kind == "int":
                values[key] = trial.suggest_int(
                    key, spec["low"], spec["high"], log=bool(spec.get("log", False)), **step
                )
            else:
                values[key] = trial.suggest_categorical(key, list(spec["choices"]))
        names, prefix = self.simplex, SIMPLEX
        if self.simplex_by_mix is not None:
            names, prefix = self.simplex_by_mix[values[MIX]], f"{SIMPLEX}{values[MIX]}."
        if names:
            raw = [trial.suggest_float(f"{prefix}{name}", 0.0, 1.0) for name in names[:-1]]
            for name, weight in zip(names, stick_breaking(raw)):
                values[f"reward_mix.{name}.weight"] = round(weight, 6)
        if self.adjust_batch and "trainer.num_generations" in values:
            t = cfg.trainer
            prompts_per_step = max(1, t.per_device_train_batch_size // t.num_generations)
            values["trainer.per_device_train_batch_size"] = prompts_per_step * int(values["trainer.num_generations"])
        return values

    def apply(self, cfg: Any, values: Mapping[str, Any]) -> Any:
        """A copy of ``cfg`` with a point's values set (a config-group choice is no value: it is composed)."""
        import copy

        from omegaconf import OmegaConf

        cfg = copy.deepcopy(cfg)
        for key, value in values.items():
            if key not in self.groups:
                OmegaConf.update(cfg, key, value, merge=False, force_add=key in self.added)
        return cfg

    def scales(self) -> dict[str, str]:
        """``{trial parameter: "log" | "linear"}`` for every numeric parameter a trial samples, the reward weights
        included (by their config key, as the trials carry them): the axes a plot of the trials draws them on."""
        out = {
            key: "log" if spec.get("log") else "linear"
            for key, spec in self.params.items()
            if spec["type"] in ("float", "int")
        }
        mixes = self.simplex_by_mix.values() if self.simplex_by_mix is not None else [self.simplex]
        out.update({f"reward_mix.{name}.weight": "linear" for names in mixes for name in names})
        return out

    def as_overrides(self, values: Mapping[str, Any]) -> list[str]:
        """Command-line overrides for a point: group choices first (``reward_mix=format``), then values."""
        first = [f"{key}={values[key]}" for key in self.groups if key in values]
        rest = [
            f"{'++' if key in self.added else ''}{key}={_override_value(value)}"
            for key, value in values.items()
            if key not in self.groups
        ]
        return first + rest

    def corners(self, cfg: Any) -> Iterator[tuple[str, Any, dict[str, Any]]]:
        """``(key, value, point)`` for each value at the edge of what a plain parameter can take (a range's ends, each
        choice), the other parameters at their base value (or their range's low end / first choice), as
        ``suggest`` makes the point: what the gate must pass for no trial to fail on the space itself."""
        for key, spec in self.params.items():
            if key in self.groups:  # composed and checked choice by choice by the sweeper
                continue
            for value in _edges(spec):
                yield key, value, self.suggest(_Corner(self.params, cfg, {key: value}), cfg)

    def edge_points(self, cfg: Any) -> tuple[bool, list[tuple[dict[str, Any], dict[str, Any]]]]:
        """``(all, [(picked, point), ...])``: the points the gate must pass for no trial to fail on the space itself.
        Every combination of the plain parameters' edges (a range's ends, each choice) where there are at most
        ``EDGE_COMBINATIONS`` (``all``: the verdict then depends on no choice's order: two values that fail only
        together are found whichever comes first); beyond, ``corners``: each edge with the others at their base."""
        # a config group's choices are composed and checked choice by choice by the sweeper
        edges = {key: _edges(spec) for key, spec in self.params.items() if key not in self.groups}
        if math.prod(len(values) for values in edges.values()) > EDGE_COMBINATIONS:
            return False, [({key: value}, point) for key, value, point in self.corners(cfg)]
        points = []
        for values in itertools.product(*edges.values()):
            picked = dict(zip(edges, values))
            points.append((picked, self.suggest(_Corner(self.params, cfg, picked), cfg)))
        return True, points


class _Corner:
    """A trial that answers ``pick`` for its keys and, for the others, the config's own value where the parameter can
    take it (else the low end or the first choice); a simplex weight gets the middle."""

    def __init__(self, params: Mapping[str, dict], cfg: Any, pick: Mapping[str, Any]):
        self.params, self.cfg, self.pick = params, cfg, pick

    def _value(self, name: str, can_take: Callable[[Any], bool], default: Any) -> Any:
        if name in self.pick:
            return self.pick[name]
        base = _select(self.cfg, name)
        return base if base is not _MISSING and can_take(base) else default

    def suggest_float(self, name, low, high, log=False, step=None):
        if name.startswith(SIMPLEX):
            return 0.5
        return self._value(name, lambda v: _number(v) and low <= v <= high, low)

    def suggest_int(self, name, low, high, log=False, step=1):
        return self._value(name, lambda v: _number(v) and low <= v <= high, low)

    def suggest_categorical(self, name, choices):
        return self._value(name, lambda v: v in list(choices), list(choices)[0])


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _edges(spec: dict) -> list:
    """The values at the edge of what a parameter samples: each choice, or a range's two ends."""
    return list(dict.fromkeys(spec["choices"] if spec["type"] == "categorical" else [spec["low"], _high_end(spec)]))


def _high_end(spec: dict) -> Any:
    """The highest value a range samples: ``high``, or the last step below it (as Optuna takes it)."""
    return distribution("", spec).high


RANGE_KEYS = {
    "float": ("type", "low", "high", "log", "step", "grid"),
    "int": ("type", "low", "high", "log", "step", "grid"),
    "categorical": ("type", "choices", "adjust_batch"),
}


def distribution(key: str, spec: Mapping) -> Any:
    """The Optuna distribution of a parameter's spec; a one-line SearchSpaceError naming the parameter and the value
    when the spec is not one (Optuna's own checks, and values it would take but no trial could sample)."""
    import math
    import warnings

    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    name = f"hydra.sweeper.params.{key}"
    kind = spec.get("type")
    unknown = [k for k in spec if k not in RANGE_KEYS.get(kind, ())]
    if unknown:
        raise SearchSpaceError(
            f"{name}.{unknown[0]}: not a setting of a parameter of type {kind} (it takes "
            f"{', '.join(RANGE_KEYS[kind][1:])})"
        )
    if kind == "categorical":
        choices = spec.get("choices")
        if not isinstance(choices, Sequence) or isinstance(choices, str) or not choices:
            raise SearchSpaceError(f"{name}.choices={choices!r}: categorical needs a non-empty list of choices")
        bad = [c for c in choices if c is not None and not isinstance(c, (bool, int, float, str))]
        if bad:
            raise SearchSpaceError(
                f"{name}.choices: {bad[0]!r} is not a single value (a number, a string, true/false or "
                "null); to search a group of settings, make it a config group's option"
            )
        return CategoricalDistribution(list(choices))
    for end in ("low", "high"):
        value = spec.get(end)
        if not _number(value) or not math.isfinite(value) or (kind == "int" and value != int(value)):
            what = "a whole number" if kind == "int" else "a finite number"
            raise SearchSpaceError(f"{name}.{end}={value!r}: a {kind} range needs {what} here")
    step = spec.get("step")
    if step is not None and (not _number(step) or not math.isfinite(step)):
        raise SearchSpaceError(f"{name}.step={step!r}: must be a positive number")
    if not spec["low"] < spec["high"]:
        raise SearchSpaceError(f"{name}: {kind} needs low < high, got low={spec['low']}, high={spec['high']}")
    args = {"low": spec["low"], "high": spec["high"], "log": bool(spec.get("log", False))}
    if step is not None:
        args["step"] = step
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a high that is no whole number of steps: taken down to the last step
            return (IntDistribution if kind == "int" else FloatDistribution)(**args)
    except ValueError as exc:  # Optuna's own: step > 0, low > 0 (or >= 1) with log, step with log
        raise SearchSpaceError(f"{name}={dict(spec)}: {str(exc).replace('`', '').rstrip('.')}") from None


def stick_breaking(u: list[float]) -> list[float]:
    """Map k-1 numbers in [0, 1] onto k non-negative weights summing to 1 (uniform in, uniform out)."""
    k = len(u) + 1
    weights, remaining = [], 1.0
    for i, ui in enumerate(u):
        # inverse CDF of Beta(1, k-1-i): the share of what is left that this weight takes
        share = 1.0 - (1.0 - min(max(ui, 0.0), 1.0)) ** (1.0 / (k - 1 - i))
        weights.append(remaining * share)
        remaining -= weights[-1]
    weights.append(max(remaining, 0.0))
    return weights


_MISSING = object()


def _as_container(params: Any) -> Any:
    from omegaconf import OmegaConf

    return OmegaConf.to_container(params, resolve=True) if OmegaConf.is_config(params) else params


def _select(cfg: Any, key: str):
    from omegaconf import OmegaConf

    value = OmegaConf.select(cfg, key, default=_MISSING)
    return value


def _override_value(value: Any) -> str:
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)
