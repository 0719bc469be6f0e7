"""Turn a ``reward_mix`` config into TRL's ``reward_funcs`` and ``reward_weights``."""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from ..config.checks import WEIGHTS, WEIGHTS_WHY
from ..config.grpo_fields import scale_error
from . import (
    REWARDS,
    RewardError,
    RewardFn,
    bind_reward,
    check_signature,
    import_callable,
    required_columns,
    resolve_reward,
    reward_model,
)
from . import needs as needs_of
from .args import check_arguments
from .guard import ON_ERROR, guarded
from .sandbox import ISOLATIONS
from .schedule import Schedule, parse_schedule, zero_everywhere_at

# Trainer settings a reward may take as a parameter; bound automatically unless the mix sets them.
TRAINER_PARAMS = ("max_completion_length",)
# Dataset columns TRL keeps from the rewards (it passes them as prompts / completions / completion_ids).
WITHHELD_COLUMNS = {"prompt": "prompts", "completion": "completions", "completion_ids": "completion_ids"}


@dataclass
class Term:
    name: str
    target: str
    weight: float
    params: dict
    columns: dict = field(default_factory=dict)
    # a function that returns the reward (TRL's get_soft_overlong_punishment, ...): target is its import path,
    # and factory_args are what it is called with
    factory: bool = False
    factory_args: dict = field(default_factory=dict)
    # a sequence-classification reward model (rewards/reward_model.py): target is its directory or hub id, and
    # model_args its options (tokenizer, batch_size, device, dtype, max_length)
    model: bool = False
    model_args: dict = field(default_factory=dict)
    # the weight over training (rewards/schedule.py); None: `weight` throughout
    schedule: Schedule | None = None

    @property
    def label(self) -> str:
        return f"reward_mix.{self.name}" + (f" ({self.target})" if self.target != self.name else "")


TERM_KEYS = ("weight", "fn", "factory", "factory_args", "model", "model_args", "params", "columns", "schedule")


@dataclass(frozen=True)
class ColumnNeed:
    """A dataset column a reward of the mix cannot run without, and how to give it one."""

    term: Term
    param: str  # the reward's parameter (or the params key that names the column, `Needs.column_params`)
    via_params: bool = False

    @property
    def reward(self) -> str:
        return self.term.label

    def fix(self, column: str, has_truth: bool) -> str:
        name = self.term.name
        if self.via_params:
            fix = f"set reward_mix.{name}.params.{self.param} to the column that holds them"
        elif column == "ground_truth":
            fix = "set data.ground_truth_column to the column that holds the answers"
        else:
            source = "ground_truth" if has_truth else "<column>"
            fix = f"map a column to it with reward_mix.{name}.columns.{self.param}={source}, or add the column"
        if self.term.weight == 0 and self.term.schedule is None:  # TRL computes it anyway, to log it
            return f"{fix}, or drop it with ~reward_mix.{name} (weight 0: it is only logged)"
        if self.term.target in REWARDS:
            return f"{fix}, or drop it with ~reward_mix.{name}"
        return fix

    def missing(self, column: str, which: str, columns: list[str], has_truth: bool) -> str:
        lacks = f"which the {which} data lacks (columns: {', '.join(columns)})"
        renamed = self._as_completions()
        if renamed:  # most likely the completions under another name, not a column
            return (
                f"{self.reward}: {renamed[0]} has no `completions` parameter, so `{self.param}` is read as a "
                f"dataset column, {lacks}; TRL passes the completions as `completions` (and prompts, "
                f"completion_ids, trainer_state and every dataset column, by name): write {renamed[1]}"
            )
        return f"{self.reward} needs column {column!r}, {lacks}; {self.fix(column, has_truth)}"

    def _as_completions(self) -> tuple[str, str] | None:
        """(its signature, the same with this parameter named ``completions``) when the reward takes no
        ``completions`` and the parameter is not one the mix maps to a column; else None."""
        if self.via_params or self.param in self.term.columns:
            return None
        fn = term_reward(self.term)
        try:
            signature = inspect.signature(fn).replace(return_annotation=inspect.Signature.empty)
        except (TypeError, ValueError):
            return None
        if "completions" in signature.parameters:
            return None
        name = getattr(fn, "__name__", "f")
        fixed = signature.replace(
            parameters=[
                p.replace(name="completions") if p.name == self.param else p for p in signature.parameters.values()
            ]
        )
        return f"{name}{signature}", f"{name}{fixed}"


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
        columns = term.get("columns") or {}
        if not isinstance(columns, Mapping) or not all(isinstance(v, str) for v in columns.values()):
            raise RewardError(
                f"reward_mix.{name}.columns={columns!r}: give parameter: column pairs, e.g. {{answer: ground_truth}}"
            )
        factory = term.get("factory")
        kinds = [key for key in ("fn", "factory", "model") if term.get(key) is not None]
        if len(kinds) > 1:  # a term is one reward: named, made by a factory, or a reward model
            raise RewardError(
                f"reward_mix.{name}: give fn (the reward) or factory (a function that returns the reward), not both"
                if "model" not in kinds
                else f"reward_mix.{name}: give one of fn (the reward), factory (a function that returns it) or "
                f"model (a reward model), not {' and '.join(kinds)}"
            )
        factory_args = term.get("factory_args")
        if factory_args is not None and factory is None:
            raise RewardError(
                f"reward_mix.{name}.factory_args without reward_mix.{name}.factory: name the function they are for"
            )
        if factory is not None and (not isinstance(factory, str) or not factory):
            raise RewardError(
                f"reward_mix.{name}.factory={factory!r}: give an import path such as "
                "trl.rewards.get_soft_overlong_punishment"
            )
        if not isinstance(factory_args or {}, Mapping):
            raise RewardError(f"reward_mix.{name}.factory_args={factory_args!r}: give argument: value pairs")
        model, model_args = term.get("model"), term.get("model_args")
        if model_args is not None and model is None:
            raise RewardError(
                f"reward_mix.{name}.model_args without reward_mix.{name}.model: name the reward model they are for"
            )
        if not isinstance(model_args or {}, Mapping):
            raise RewardError(
                f"reward_mix.{name}.model_args={model_args!r}: give option: value pairs, e.g. {{batch_size: 16}}"
            )
        if model is not None and term.get("params"):
            raise RewardError(
                f"reward_mix.{name}.params: a reward model takes no params; set its options as "
                f"reward_mix.{name}.model_args.<option> ({', '.join(reward_model.OPTIONS)})"
            )
        if model is not None and (not isinstance(model, str) or not model.strip()):
            raise RewardError(
                f"reward_mix.{name}.model={model!r}: give a local directory or a hub id (org/name) of a reward model"
            )
        schedule = term.get("schedule")
        if schedule is not None and not kinds and "weight" not in term:  # ++reward_mix.<typo>.schedule... made it
            others = [str(n) for n, t in mix.items() if n != name and isinstance(t, Mapping) and set(t) - {"schedule"}]
            raise RewardError(
                f"reward_mix.{name}.schedule: the mix has no term {name!r} (its terms: "
                f"{', '.join(others) or 'none'}); a schedule changes the weight of a term the mix has"
            )
        weight = float(term.get("weight", 1.0))
        out.append(
            Term(
                name=str(name),
                target=str(model or factory or term.get("fn") or name),
                weight=weight,
                params=dict(term.get("params") or {}),
                columns={str(k): str(v) for k, v in columns.items()},
                factory=factory is not None,
                factory_args={str(k): v for k, v in (factory_args or {}).items()},
                model=model is not None,
                model_args={str(k): v for k, v in (model_args or {}).items()},
                schedule=None if schedule is None else parse_schedule(str(name), weight, schedule),
            )
        )
    return out


def term_reward(term: Term) -> RewardFn:
    """The reward function ``term`` names: the built-in or imported one, what its factory returns, or its reward
    model's scorer (not loaded until it is called).

    A factory's reward is made once per (factory, args) for inspecting it (validation reads its signature several
    times); training makes its own with `make_reward`, so no state is shared between runs of one process."""
    if not term.factory and not term.model:
        return resolve_reward(term.target)
    args = term.model_args if term.model else term.factory_args
    key = (term.name, term.target, term.model, json.dumps(args, sort_keys=True, default=repr))
    if key not in _MADE:
        _MADE[key] = make_reward(term)
    return _MADE[key]


_MADE: dict[tuple, RewardFn] = {}


def make_reward(term: Term) -> RewardFn:
    """Call ``term``'s factory with its args; a one-line RewardError naming the term if it cannot give a reward.
    A reward model's term: its scorer, the options checked (files only: nothing is loaded)."""
    if term.model:
        options = reward_model.check_options(term.name, term.target, term.model_args)
        return reward_model.RewardModel(term.target, **options, term=term.name)
    where = f"reward_mix.{term.name}.factory={term.target}"
    if "." not in term.target and ":" not in term.target:
        raise RewardError(f"{where}: give an import path such as trl.rewards.get_soft_overlong_punishment")
    factory = import_callable(term.target, where)
    args = dict(term.factory_args)
    if "term_name" in _params(factory) and "term_name" not in args:  # for metrics of its own (judge/<term>/...)
        args["term_name"] = term.name
    try:
        inspect.signature(factory).bind(**args)
    except TypeError as exc:  # a missing or unknown argument
        if "completions" in _params(factory):  # a reward, not a factory
            raise RewardError(
                f"{where} is a reward itself (it takes completions): use reward_mix.{term.name}.fn="
                f"{term.target} instead of factory="
            ) from None
        raise RewardError(
            f"{where}: {exc}; it takes {_signature(factory)}, set as "
            f"+reward_mix.{term.name}.factory_args.<argument>=<value>"
        ) from None
    except ValueError:
        pass  # no signature to read (a builtin): the call below says what is wrong
    check_arguments(factory, term.factory_args, f"reward_mix.{term.name}.factory_args", term.target)
    try:
        fn = factory(**args)
    except RewardError as exc:  # the factory checked its arguments and says which is wrong
        raise RewardError(f"{where}: {exc}") from None
    except Exception as exc:
        raise RewardError(
            f"{where}: calling it with {term.factory_args} raised {type(exc).__name__}: {_first_line(exc)}"
        ) from None
    if not callable(fn):
        raise RewardError(
            f"{where} returned {type(fn).__name__} {_short(fn)}, not a reward function; "
            "name the reward itself with fn= instead of factory="
        )
    try:
        check_signature(f"{term.target}(...)", fn)
    except RewardError as exc:
        raise RewardError(f"reward_mix.{term.name}: the {exc}") from None
    return fn


def _signature(fn: Callable) -> str:
    try:
        return str(inspect.signature(fn).replace(return_annotation=inspect.Signature.empty))
    except (TypeError, ValueError):
        return "(...)"


def _params(fn: Callable) -> list[str]:
    try:
        return list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return []


def _first_line(exc: Exception) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else ""


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_mix(
    mix: Mapping[str, Any], reward_errors: str = "raise", trainer_args: Mapping[str, Any] | None = None
) -> list[Term]:
    """The reward_mix group (and ``reward_errors``, what its guard does with a reward that raises): resolve every
    reward, check its weight, the columns it asks for and its sandbox, and that ``trainer_args`` (trainer.args)
    does not give the weights TRL's way; raise a one-line RewardError naming the bad entry. Returns the terms, for
    the checks across groups."""
    if reward_errors not in ON_ERROR:
        raise RewardError(f"reward_errors={reward_errors!r}; use one of: {', '.join(ON_ERROR)}")
    mix_terms = terms(mix)
    if not mix_terms:
        raise RewardError(
            "reward_mix is empty; pick one of conf/reward_mix/ or add rewards "
            "(reward_mix=none +reward_mix.mine.fn=mypkg.rewards.my_reward), "
            f"built-ins: {', '.join(sorted(REWARDS))}"
        )
    for term in mix_terms:
        fn = term_reward(term)
        bind_reward(term.name, fn, term.params)  # raises on unknown names / bad imports
        check_arguments(fn, term.params, f"reward_mix.{term.name}.params", f"reward {term.target}")
        if term.weight < 0:
            raise RewardError(f"reward_mix.{term.name}.weight={term.weight}: weights must be >= 0")
        error = scale_error(f"reward_mix.{term.name}.weight", term.weight, *WEIGHTS, WEIGHTS_WHY)
        if error:
            raise RewardError(error)
        for column in _term_needs(term):
            if column in WITHHELD_COLUMNS:
                raise RewardError(
                    f"{term.label} needs column {column!r}, which TRL never passes to rewards "
                    f"(it passes {WITHHELD_COLUMNS[column]!r}); take that parameter instead"
                )
        isolation = term.params.get("isolation", "namespaces")
        if needs_of(fn).sandbox and isolation not in ISOLATIONS:
            raise RewardError(
                f"reward_mix.{term.name}.params.isolation={isolation!r}; use one of: {', '.join(ISOLATIONS)}"
            )
    if all(term.weight == 0 for term in mix_terms):
        raise RewardError("reward_mix: every weight is 0, so there is nothing to learn; give one reward a weight > 0")
    zero = zero_everywhere_at([t.weight for t in mix_terms], [t.schedule for t in mix_terms])
    if zero is not None:
        raise RewardError(
            f"reward_mix: every weight is 0 at progress {zero:g} of the run (the schedules of "
            f"{', '.join(t.name for t in mix_terms if t.schedule)}), so those steps learn nothing; "
            "keep one weight > 0 throughout"
        )
    if trainer_args and "reward_weights" in trainer_args:
        weights = list(trainer_args["reward_weights"] or [])
        names = [t.name for t in mix_terms]
        problem = "does not match" if len(weights) != len(names) else "would silently override"
        raise RewardError(
            f"trainer.args.reward_weights={weights} {problem} the {len(names)} rewards of reward_mix "
            f"({', '.join(names)}); "
            "set each weight as reward_mix.<name>.weight instead"
        )
    return mix_terms


def _term_needs(term: Term) -> dict[str, ColumnNeed]:
    """The columns ``term``'s reward must be given (column -> need), read off its signature with its params
    and the trainer settings bound."""
    fn = term_reward(term)
    columns = {
        term.columns.get(param, param): ColumnNeed(term, param)
        for param in required_columns(fn, bound={*term.params, *TRAINER_PARAMS})
    }
    for param, default in needs_of(fn).column_params.items():  # read through **kwargs, by the name param gives
        columns[str(term.params.get(param, default))] = ColumnNeed(term, param, via_params=True)
    return columns


def data_columns(mix: Mapping[str, Any]) -> dict[str, ColumnNeed]:
    """Every dataset column the mix's rewards need (ground_truth included), mapped to the first reward that needs it.

    A weight-0 reward counts: TRL still calls it (and logs its mean) every step.
    """
    needs: dict[str, ColumnNeed] = {}
    for term in terms(mix):
        for column, need in _term_needs(term).items():
            needs.setdefault(column, need)
    return needs


def needs_ground_truth(mix: Mapping[str, Any]) -> bool:
    return "ground_truth" in data_columns(mix)


def describe_mix(mix: Mapping[str, Any]) -> str:
    """The effective mix, one reward a line: name, weight, where it comes from, params, columns it reads."""
    mix_terms = terms(mix)
    lines = [f"reward mix: {len(mix_terms)} reward(s), reward = weighted sum"]
    width = max((len(t.name) for t in mix_terms), default=0)
    for term in mix_terms:
        builtin = term.target in REWARDS and not term.factory and not term.model
        source = f"built-in {term.target}" if builtin else f"reward model {term.target}" if term.model else term.target
        if term.factory or term.model_args:
            args = term.model_args if term.model else term.factory_args
            source += "(" + ", ".join(f"{k}={v!r}" for k, v in args.items()) + ")"
        parts = [f"  {term.name:<{width}}  weight {term.weight:g}", source]
        if term.schedule is not None:
            parts.insert(1, f"scheduled ({term.schedule.describe()})")
        elif term.weight == 0:
            parts.append("(logged only)")
        if term.params:
            parts.append("params " + ", ".join(f"{k}={v!r}" for k, v in term.params.items()))
        if term.columns:
            parts.append("columns " + ", ".join(f"{p}<-{c}" for p, c in term.columns.items()))
        reads = list(_term_needs(term))
        if reads:
            parts.append("reads " + ", ".join(reads))
        lines.append("  ".join(parts))
    return "\n".join(lines)


def build_mix(mix: Mapping[str, Any], trainer_cfg: Any = None, on_error: str = "raise") -> tuple[list, list[float]]:
    """(reward_funcs, reward_weights) for GRPOConfig/GRPOTrainer, in the mix's order; each reward guarded.

    ``mix`` is one the gate passed (``check_mix``): it is built, not checked again."""
    funcs, weights = [], []
    for term in terms(mix):
        fn = make_reward(term) if term.factory or term.model else resolve_reward(term.target)
        params = dict(term.params)
        for key in TRAINER_PARAMS:
            if trainer_cfg is not None and key not in params and _accepts(fn, key):
                params[key] = trainer_cfg[key]
        funcs.append(guarded(bind_reward(term.name, fn, params, term.columns), term.name, on_error))
        weights.append(term.weight)
    return funcs, weights


def scheduled_weights(mix: Mapping[str, Any]) -> tuple[list[str], list[float], list[Schedule | None]] | None:
    """(names, weights, schedules) in the mix's order when a term's weight is scheduled; None when none is."""
    mix_terms = terms(mix)
    if all(t.schedule is None for t in mix_terms):
        return None
    return [t.name for t in mix_terms], [t.weight for t in mix_terms], [t.schedule for t in mix_terms]


def _accepts(fn: RewardFn, param: str) -> bool:
    try:
        return param in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
