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

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

PARAM_TYPES = ("float", "int", "categorical")
# GRPOConfig fields outside the schema pass through this open dict (train.py hands it to GRPOConfig)
PASSTHROUGH = "trainer.args."
MIX = "reward_mix"


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
    ) -> "SearchSpace":
        """``groups``: every config group of the config and its options; ``compose``: the job config for
        extra overrides, needed to read the rewards of each mix when ``reward_mix`` itself is searched."""
        params = {str(k): dict(v) for k, v in (params or {}).items()}
        groups = groups or {}
        group_params, added = [], []
        for key, spec in params.items():
            kind = spec.get("type")
            if kind not in PARAM_TYPES:
                raise SearchSpaceError(f"hydra.sweeper.params.{key}.type={kind!r}; use one of {PARAM_TYPES}")
            if kind == "categorical" and not spec.get("choices"):
                raise SearchSpaceError(f"hydra.sweeper.params.{key}: categorical needs a non-empty `choices` list")
            if kind in ("float", "int") and not ("low" in spec and "high" in spec and spec["low"] < spec["high"]):
                raise SearchSpaceError(f"hydra.sweeper.params.{key}: {kind} needs low < high, got {spec}")
            if kind == "float" and spec.get("log") and spec["low"] <= 0:
                raise SearchSpaceError(f"hydra.sweeper.params.{key}: a log-scaled range needs low > 0, got {spec['low']}")
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
                name = key[len(PASSTHROUGH):] if key.startswith(PASSTHROUGH) else ""
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
        space = cls(params=params, simplex=simplex, adjust_batch=False, groups=tuple(group_params),
                    added=tuple(added), simplex_by_mix=by_mix)
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
            if kind == "float":
                values[key] = trial.suggest_float(key, spec["low"], spec["high"], log=bool(spec.get("log", False)))
            elif kind == "int":
                values[key] = trial.suggest_int(key, spec["low"], spec["high"], log=bool(spec.get("log", False)))
            else:
                values[key] = trial.suggest_categorical(key, list(spec["choices"]))
        names, prefix = self.simplex, "simplex."
        if self.simplex_by_mix is not None:
            names, prefix = self.simplex_by_mix[values[MIX]], f"simplex.{values[MIX]}."
        if names:
            raw = [trial.suggest_float(f"{prefix}{name}", 0.0, 1.0) for name in names[:-1]]
            for name, weight in zip(names, stick_breaking(raw)):
                values[f"reward_mix.{name}.weight"] = round(weight, 6)
        if self.adjust_batch and "trainer.num_generations" in values:
            t = cfg.trainer
            prompts_per_step = max(1, t.per_device_train_batch_size // t.num_generations)
            values["trainer.per_device_train_batch_size"] = prompts_per_step * int(values["trainer.num_generations"])
        return values

    def as_overrides(self, values: Mapping[str, Any]) -> list[str]:
        """Command-line overrides for a point: group choices first (``reward_mix=format``), then values."""
        first = [f"{key}={values[key]}" for key in self.groups if key in values]
        rest = [
            f"{'++' if key in self.added else ''}{key}={_override_value(value)}"
            for key, value in values.items() if key not in self.groups
        ]
        return first + rest


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


def _select(cfg: Any, key: str):
    from omegaconf import OmegaConf

    value = OmegaConf.select(cfg, key, default=_MISSING)
    return value


def override_key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def merge_overrides(base: Sequence[str], extra: Sequence[str]) -> list[str]:
    """``base`` then ``extra``, dropping base overrides of a key that ``extra`` sets: Hydra refuses two
    values for one config group (``reward_mix=smoke reward_mix=format``), and the later one is meant."""
    keys = {override_key(o) for o in extra}
    return [o for o in base if override_key(o) not in keys] + list(extra)


def _override_value(value: Any) -> str:
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)
