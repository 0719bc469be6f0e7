"""A PBT's settings (``hydra.sweeper``, their defaults here and only here: config.py's dataclass takes them) and the
keys it moves (``hydra.sweeper.params``), checked: each bad value refused in one line naming it. No torch here."""

from __future__ import annotations

import math
import random
import re
from dataclasses import asdict, dataclass, fields
from typing import Any, Mapping

from omegaconf import OmegaConf

from ...reading.stats import DEFAULT_VERDICTS, DIRECTIONS, check_mode
from ...run.phases import why_fixed

LEARNING_RATE = "optimizer.learning_rate"
WEIGHT_KEY = re.compile(r"reward_mix\.([A-Za-z_][\w-]*)\.weight")
EXPLORES = ("perturb", "pb2")


class PBTError(ValueError):
    """A PBT setting that cannot work; the message names it."""


@dataclass(frozen=True)
class Param:
    """One searched key and its range (``log``: perturbed and drawn on a log scale)."""

    key: str
    low: float
    high: float
    log: bool = False
    integer: bool = False  # the config's value is an int: every value PBT gives it is rounded

    @property
    def term(self) -> str | None:
        match = WEIGHT_KEY.fullmatch(self.key)
        return match.group(1) if match else None

    def draw(self, rng: random.Random) -> float:
        if self.log:
            value = math.exp(rng.uniform(math.log(self.low), math.log(self.high)))
        else:
            value = rng.uniform(self.low, self.high)
        return self.clip(value)

    def clip(self, value: float) -> float:
        value = min(self.high, max(self.low, value))
        return float(round(value)) if self.integer else value

    def override(self, value: float) -> str:
        """``key=value`` as the member's command line gives it (an int key as an int)."""
        return f"{self.key}={int(round(value)) if self.integer else repr(float(value))}"


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise PBTError(f"{where}={value!r}: must be a finite number")
    return float(value)


# What a PBT moves itself, besides what no run continued from its checkpoint can change (run/phases.FIXED)
SWEEPER_SETS = {
    "trainer.seed": "each member's seed is the sweeper's (trainer.seed + member)",
    "trainer.max_steps": "the sweeper sets it (hydra.sweeper.rounds x steps_per_round)",
    "trainer.pause_at_step": "the sweeper sets it, round by round",
}


_MISSING = object()


def parse_params(params: Mapping[str, Any], mix: Mapping[str, Any], config: Any = None) -> list[Param]:
    """``hydra.sweeper.params`` as Params, each ``{low, high[, log]}``: ``reward_mix.<term>.weight`` of a term of
    the mix (without a schedule of its own) and any other number of the run's ``config`` that a round can change
    (``run/phases.FIXED`` says which cannot, and why)."""
    if not params:
        raise PBTError(
            "hydra.sweeper.params is empty: give the keys PBT moves, e.g. "
            "hydra.sweeper.params.optimizer.learning_rate={low:1e-4,high:3e-3,log:true}"
        )
    out = []
    for key, spec in params.items():
        key = str(key)
        where = f"hydra.sweeper.params.{key}"
        term = WEIGHT_KEY.fullmatch(key)
        why = SWEEPER_SETS.get(key) or why_fixed(key)
        if why:
            raise PBTError(
                f"{where}: PBT cannot move {key} between rounds ({why}); search it with a grid or an Optuna "
                "study (hparams_search=grpo)"
            )
        if term and term.group(1) not in mix:
            raise PBTError(f"{where}: the mix has no term {term.group(1)!r} (it has {', '.join(mix) or 'none'})")
        if term and (mix[term.group(1)] or {}).get("schedule") is not None:
            raise PBTError(
                f"{where}: reward_mix.{term.group(1)} has a schedule of its own; PBT makes the weight's "
                "schedule (drop the term's schedule)"
            )
        integer = False
        if not term and key != LEARNING_RATE and config is not None:
            value = OmegaConf.select(OmegaConf.create(config), key, default=_MISSING)
            if value is _MISSING:
                raise PBTError(f"{where}: {key} is not a config key of this run")
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise PBTError(f"{where}: {key}={value!r} is not a number; PBT moves numbers")
            integer = isinstance(value, int)
        if not isinstance(spec, Mapping) or set(spec) - {"low", "high", "log"} or not {"low", "high"} <= set(spec):
            raise PBTError(f"{where}={spec!r}: give {{low: <number>, high: <number>}} (and log: true for a log scale)")
        low, high = _number(spec["low"], f"{where}.low"), _number(spec["high"], f"{where}.high")
        log = spec.get("log", False)
        if not isinstance(log, bool):
            raise PBTError(f"{where}.log={log!r}: must be true or false")
        if not low < high:
            raise PBTError(f"{where}: low={low:g} must be below high={high:g}")
        if (log or key == LEARNING_RATE) and low <= 0:
            raise PBTError(f"{where}.low={low:g}: must be > 0 ({'a log scale' if log else 'a learning rate'})")
        if term and low < 0:
            raise PBTError(f"{where}.low={low:g}: a weight must be >= 0")
        if integer and math.floor(high) < math.ceil(low):
            raise PBTError(f"{where}: {key} is a whole number and [{low:g}, {high:g}] holds none")
        out.append(Param(key, low, high, bool(log), integer))
    return out


@dataclass(frozen=True)
class Settings:
    """The PBT's own settings (``hydra.sweeper``): each default is here, once (config.py's sweeper dataclass takes
    them, hparams_search=pbt sets only its params)."""

    # the PBT's name: its directory (hparams_search=pbt: outputs/<task>/pbt/<name>), so the same command continues it
    name: str = "pbt"
    population: int = 4
    rounds: int = 3
    # None: trainer.max_steps / rounds; else trainer.max_steps becomes rounds x steps_per_round (checked: a number)
    steps_per_round: int | None = None
    # after a round, this fraction at the bottom (rounded up, at most half the population, as Ray Tune's
    # quantile_fraction) takes over from as many at the top; 0: no member takes over another
    exploit_fraction: float = 0.25
    # a member takes over a donor only when the donor's lead on the ranking look is more than noise_z standard
    # errors (paired by question; docs/search.md); false: plain PBT, which copies whichever donor is ahead
    noise_guard: bool = True
    noise_z: float = 1.645
    # how a recipient's values move: perturb (perturb_factors, resample_probability) or pb2 (Parker-Holder et al.,
    # 2020: a time-varying GP bandit over the round-to-round improvement, as Ray Tune's PB2; for small populations)
    explore: str = "perturb"
    # true: a member's decision waits until every member has reported the round (a barrier: the population ranked
    # together); false: each member decides as its own round ends, against the others' latest looks, and goes on
    # at once (Ray Tune's default), so a slow node holds no one but its own member
    synchronous: bool = True
    # at the end, the best lineage's schedule against the best starting point held fixed, each over this many fresh
    # seeds, with the sweep's verdict (0: not run; the end says how to run it)
    head_to_head_seeds: int = 3
    # how the head-to-head's verdict estimates noise: moderated (seed-paired, borrowing strength) or strict
    verdicts: str = DEFAULT_VERDICTS
    # explore: each moved value times one of these (clipped to its range) ...
    perturb_factors: tuple[float, ...] = (0.8, 1.25)
    # ... or, with this probability, drawn afresh in its range
    resample_probability: float = 0.25
    direction: str = "maximize"
    # the draws (the first population, who takes over from whom, the moves)
    seed: int = 0
    # reward weights move on their ratios (their total held): false where the scale of the reward itself matters
    # (trainer.args.scale_rewards=none); not a sweeper key: the sweeper sets it from the run's config
    weights_by_ratio: bool = True

    @property
    def max_steps(self) -> int:
        return self.rounds * self.steps_per_round

    @property
    def exploited(self) -> int:
        """How many members at the bottom may take over another's state after a round (and how many at the top
        may give theirs): the fraction of the population rounded up, at most half of it (Ray Tune's
        ``quantile_fraction``); 0 with a fraction of 0."""
        return self.exploited_among(self.population)

    def exploited_among(self, ranked: int) -> int:
        """``exploited`` for ``ranked`` members (an asynchronous PBT ranks those with a look, as Ray does)."""
        # round() first: 0.1 x 30 is 3.0000000000000004, which ceil would make 4
        return min(math.ceil(round(ranked * self.exploit_fraction, 9)), ranked // 2)

    def design(self) -> dict:
        """What makes two PBTs the same population (pbt.jsonl's start row records it; a continued PBT must match):
        every setting but its name (its directory) and what only its end reads (the head-to-head)."""
        return {k: v for k, v in asdict(self).items() if k not in AFTER_THE_ROUNDS}

    @classmethod
    def recorded(cls, design: Mapping[str, Any]) -> Settings:
        """Settings as a start row recorded them; a setting it predates takes its default."""
        known = {f.name for f in fields(cls)}
        given = {k: v for k, v in design.items() if k in known}
        if "perturb_factors" in given:
            given["perturb_factors"] = tuple(given["perturb_factors"])
        return cls(**given)


# settings a start row does not record: they do not change a round (a PBT predating them continues)
AFTER_THE_ROUNDS = ("name", "head_to_head_seeds", "verdicts")


def _whole(name: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise PBTError(f"hydra.sweeper.{name}={value!r}: must be a whole number >= {low}")
    return value


def _boolean(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise PBTError(f"hydra.sweeper.{name}={value!r}: must be true or false")
    return value


def check_settings(s: Any, max_steps: int) -> Settings:
    """``hydra.sweeper``'s PBT settings (the sweeper's config, or Settings) with ``trainer.max_steps`` (the steps a
    round gets when ``steps_per_round`` is null), or a one-line PBTError naming the bad value: the checks
    OmegaConf's types cannot make (ranges, lists, choices)."""
    population = _whole("population", s.population, 2)
    rounds = _whole("rounds", s.rounds, 1)
    if s.steps_per_round is None:
        if max_steps % rounds:
            raise PBTError(
                f"hydra.sweeper.rounds={rounds} does not divide trainer.max_steps={max_steps}: give "
                "hydra.sweeper.steps_per_round (then trainer.max_steps is rounds x steps_per_round)"
            )
        steps = max_steps // rounds
    else:
        steps = _whole("steps_per_round", s.steps_per_round, 1)
    fraction = _number(s.exploit_fraction, "hydra.sweeper.exploit_fraction")
    if not 0 <= fraction <= 0.5:
        raise PBTError(
            f"hydra.sweeper.exploit_fraction={fraction:g}: must be in [0, 0.5] (the bottom fraction "
            "takes over from the top fraction; 0: no member takes over another)"
        )
    factors = list(s.perturb_factors or [])
    if not factors:
        raise PBTError("hydra.sweeper.perturb_factors is empty: give factors, e.g. [0.8, 1.25]")
    factors = [_number(f, "hydra.sweeper.perturb_factors") for f in factors]
    if any(f <= 0 for f in factors):
        raise PBTError(f"hydra.sweeper.perturb_factors={factors}: each must be > 0")
    probability = _number(s.resample_probability, "hydra.sweeper.resample_probability")
    if not 0 <= probability <= 1:
        raise PBTError(f"hydra.sweeper.resample_probability={probability:g}: must be in [0, 1]")
    if s.direction not in DIRECTIONS:
        raise PBTError(f"hydra.sweeper.direction={s.direction!r}; use one of: {', '.join(DIRECTIONS)}")
    if isinstance(s.seed, bool) or not isinstance(s.seed, int):
        raise PBTError(f"hydra.sweeper.seed={s.seed!r}: must be a whole number")
    z = _number(s.noise_z, "hydra.sweeper.noise_z")
    if z < 0:
        raise PBTError(f"hydra.sweeper.noise_z={z:g}: must be >= 0 (standard errors a donor's lead must exceed)")
    if s.explore not in EXPLORES:
        raise PBTError(f"hydra.sweeper.explore={s.explore!r}; use one of: {', '.join(EXPLORES)}")
    check_head_to_head(s.head_to_head_seeds)
    return Settings(
        name=str(s.name),
        population=population,
        rounds=rounds,
        steps_per_round=steps,
        exploit_fraction=fraction,
        noise_guard=_boolean("noise_guard", s.noise_guard),
        noise_z=z,
        explore=s.explore,
        synchronous=_boolean("synchronous", s.synchronous),
        head_to_head_seeds=s.head_to_head_seeds,
        verdicts=check_mode(s.verdicts, "hydra.sweeper.verdicts"),
        perturb_factors=tuple(factors),
        resample_probability=probability,
        direction=s.direction,
        seed=s.seed,
        weights_by_ratio=s.weights_by_ratio if isinstance(s, Settings) else True,
    )


def check_head_to_head(seeds: Any) -> None:
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds == 1 or seeds < 0:
        raise PBTError(
            f"hydra.sweeper.head_to_head_seeds={seeds!r}: give 0 (not run) or 2 or more seeds (one seed a side "
            "cannot tell the two apart from seed noise)"
        )


def check_metric(metric: str) -> None:
    if not str(metric).startswith("val_"):
        raise PBTError(
            f"optimized_metric={metric!r}: PBT ranks members on validation; use a val_ figure "
            "(val_accuracy, val_rewards.<term>)"
        )
