"""Population-based training over any value a run can change between rounds (reward weights, the learning rate,
``trainer.beta``, a reward's params, ...): the population, its decisions and its record (``hparams_search=pbt``;
the Hydra sweeper that drives it is ``search/pbt/sweeper.py``).

Truncation selection as in Jaderberg et al. (2017) and Ray Tune's ``PopulationBasedTraining``: ``population``
members train side by side in ``rounds`` of ``steps_per_round`` steps. After each round the members are ranked on
validation (the run's ``optimized_metric`` at the round's last step); each of the bottom ``exploit_fraction``
(rounded up, as Ray does, and at most half the population) may take a top member's checkpoint (adapter, optimizer,
scheduler, RNG) and its metrics history (exploit), then moves its values: each searched key times one of
``perturb_factors``, or with ``resample_probability`` drawn afresh in its range (explore). Reward weights move on
their ratios: GRPO normalises the weighted reward within each group, so scaling every weight by one factor changes
nothing, and their total is held at the donor's.

The ranking look is noisy (64 validation prompts: a gap of 0.05 is about one standard error), so with
``noise_guard`` a member exploits a donor only when the donor's lead, paired by question as the sweep's verdicts
pair runs, is more than ``noise_z`` standard errors (``ranking_gap``); the lineage records every candidate's gap
and standard error, so a plain PBT (``noise_guard=false``) still says how many of its exploits were beyond noise.

A member is one run directory (``members/<m>/``) that every round continues (``trainer.pause_at_step``), with the
run's own resume, so the learning-rate schedule and the weights' progress count to the whole run's
``trainer.max_steps``. A member's reward weights are a ``step`` schedule over the whole run (its lineage's weight
in each round), so its effective weights are its config, and the best member's mix replays as a plain run.

Every decision is written to ``pbt.jsonl`` before it is carried out, and carrying it out again gives the same
files: the same command continues a driver that was killed. No torch here (the login node runs this).
"""

from __future__ import annotations

import json
import math
import random
import re
import shutil
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from omegaconf import OmegaConf

from ...reading.stats import DIRECTIONS
from ...run.files import append_jsonl, read_jsonl, write_json_atomic, write_jsonl_atomic
from ...run.phases import why_fixed
from ...run.record import SUMMARY_NAME, row_scores, val_figures
from ...run.results import BEST_DIR, METRICS, OUTCOMES, lookup
from ...run.resume import CHECKPOINTS, last_checkpoint, rows_up_to

# the population's lineage: its members are rounds of changing configs, not a grid's configurations
LINEAGE = "pbt.jsonl"

PLOT = "pbt.png"
MEMBERS_DIR = "members"
# the best member's mix, as an option of the reward_mix group under the sweep's own config directory
BEST_SCHEDULE = Path("conf") / "reward_mix" / "best_schedule.yaml"
LEARNING_RATE = "optimizer.learning_rate"
WEIGHT_KEY = re.compile(r"reward_mix\.([A-Za-z_][\w-]*)\.weight")
EXPLORES = ("perturb", "pb2")
# where a take-over assembles the donor's state before it replaces the recipient's
TAKEOVER_STAGING = "checkpoints.taking-over"
# a recipient's own record before a take-over: superseded/step-<step>/ (metrics.jsonl, summary.json, outcomes/)
SUPERSEDED = "superseded"
SUPERSEDED_RECORD = "superseded.json"
# each round's ranking look, per member and question: looks/round-<r>.json
LOOKS = "looks"
# the schedule against the best fixed starting point: head_to_head/<arm>-<seed>/, a run each
HEAD_TO_HEAD = "head_to_head"


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
    """The PBT's own settings (``hydra.sweeper``), checked."""

    population: int
    rounds: int
    steps_per_round: int
    exploit_fraction: float
    perturb_factors: tuple[float, ...]
    resample_probability: float
    direction: str
    seed: int
    noise_guard: bool = True
    noise_z: float = 1.645
    # how a recipient's values move: perturb (x a factor, or drawn afresh) or pb2 (a time-varying GP bandit, pb2.py)
    explore: str = "perturb"
    # reward weights move on their ratios (their total held): false where the scale of the reward itself matters
    # (trainer.args.scale_rewards=none), set by the sweeper from the run's config
    weights_by_ratio: bool = True
    # false: a member decides as soon as its round ends, against the others' latest looks (asynchronous.py)
    synchronous: bool = True

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


def check_settings(s: Any, max_steps: int) -> Settings:
    """``hydra.sweeper``'s PBT settings with ``trainer.max_steps`` (the steps a round gets when
    ``steps_per_round`` is null), or a one-line PBTError naming the bad value."""

    def whole(name: str, value: Any, low: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise PBTError(f"hydra.sweeper.{name}={value!r}: must be a whole number >= {low}")
        return value

    population = whole("population", s.population, 2)
    rounds = whole("rounds", s.rounds, 1)
    if s.steps_per_round is None:
        if max_steps % rounds:
            raise PBTError(
                f"hydra.sweeper.rounds={rounds} does not divide trainer.max_steps={max_steps}: give "
                "hydra.sweeper.steps_per_round (then trainer.max_steps is rounds x steps_per_round)"
            )
        steps = max_steps // rounds
    else:
        steps = whole("steps_per_round", s.steps_per_round, 1)
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
    guard = getattr(s, "noise_guard", True)
    if not isinstance(guard, bool):
        raise PBTError(f"hydra.sweeper.noise_guard={guard!r}: must be true or false")
    z = _number(getattr(s, "noise_z", 1.645), "hydra.sweeper.noise_z")
    if z < 0:
        raise PBTError(f"hydra.sweeper.noise_z={z:g}: must be >= 0 (standard errors a donor's lead must exceed)")
    explore = getattr(s, "explore", "perturb")
    if explore not in EXPLORES:
        raise PBTError(f"hydra.sweeper.explore={explore!r}; use one of: {', '.join(EXPLORES)}")
    synchronous = getattr(s, "synchronous", True)
    if not isinstance(synchronous, bool):
        raise PBTError(f"hydra.sweeper.synchronous={synchronous!r}: must be true or false")
    return Settings(
        population,
        rounds,
        steps,
        fraction,
        tuple(factors),
        probability,
        s.direction,
        s.seed,
        guard,
        z,
        explore,
        synchronous=synchronous,
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


# -- decisions -----------------------------------------------------------------------------------------------
def _rng(seed: int, *where: Any) -> random.Random:
    return random.Random(":".join(map(str, ("pbt", seed, *where))))  # a str seed: the same draws in every process


def initial_population(params: Sequence[Param], settings: Settings) -> list[dict[str, float]]:
    """Each member's values for round 0, drawn in the ranges (log ranges on a log scale)."""
    rng = _rng(settings.seed, "init")
    return [{p.key: p.draw(rng) for p in params} for _ in range(settings.population)]


def start_row(name: str, settings: Settings, params: Sequence[Param], metric: str, base_seed: int) -> dict:
    """pbt.jsonl's first row: the settings, the ranges and the first population, as pbt.jsonl gives it back
    (tuples are lists there), so that a continued PBT's row compares equal to it."""
    row = {
        "event": "start",
        "name": name,
        "settings": asdict(settings),
        "params": [asdict(p) for p in params],
        "metric": metric,
        "base_seed": int(base_seed),
        "population": initial_population(params, settings),
    }
    return json.loads(json.dumps(row))


def ranked(scores: Sequence[float | None], direction: str) -> list[int]:
    """Members best first; a member without a score (it failed) last; ties keep the lower member first."""
    sign = -1 if direction == "maximize" else 1
    return sorted(range(len(scores)), key=lambda m: (scores[m] is None, sign * (scores[m] or 0.0), m))


def ranking_gap(
    donor: float,
    recipient: float,
    donor_outcomes: Mapping[str, float | None] | None,
    recipient_outcomes: Mapping[str, float | None] | None,
    direction: str,
) -> tuple[float, float | None]:
    """The donor's lead over the recipient on the ranking look (positive: better, in ``direction``) and its
    standard error, paired by question as the sweep's verdicts pair runs: the standard deviation of the
    per-question differences over the square root of their number. None where a member has no per-question
    outcomes of the look (a metric that is not an accuracy) or fewer than two questions are judged for both."""
    sign = 1.0 if direction == "maximize" else -1.0
    gap = sign * (donor - recipient)
    if not donor_outcomes or not recipient_outcomes:
        return gap, None
    diffs = [
        sign * (donor_outcomes[q] - recipient_outcomes[q])
        for q in donor_outcomes
        if donor_outcomes[q] is not None and recipient_outcomes.get(q) is not None
    ]
    if len(diffs) < 2:
        return gap, None
    return gap, statistics.stdev(diffs) / math.sqrt(len(diffs))


def beyond_noise(gap: float, se: float | None, z: float) -> bool | None:
    """Whether ``gap`` is more than ``z`` standard errors (None: no standard error to judge it by)."""
    if se is None:
        return None
    return gap > z * se if se > 0 else gap > 0


# propose(donor's values, the values going on this round, rng) -> (new values, how): the model-based explore (PB2)
Propose = Callable[[dict[str, float], list[dict[str, float]], random.Random], tuple[dict[str, float], dict[str, str]]]


def decide(
    scores: Sequence[float | None],
    values: Sequence[dict[str, float]],
    params: Sequence[Param],
    settings: Settings,
    round_: int,
    outcomes: Sequence[Mapping[str, float | None] | None] | None = None,
    propose: Propose | None = None,
    only: int | None = None,
) -> tuple[list[dict], list[dict]]:
    """After ``round_``: which members take over which, and the values each goes on with (explored); and which
    were held back by the noise guard. Every member that failed takes over one of the top ``exploited``, drawn;
    each of the bottom ``exploited`` that scored below every one of them takes over one drawn from those whose lead
    over it is beyond the ranking look's noise (``outcomes[m]``: member m's per-question values of the look), or
    from any of them with ``noise_guard`` off. Each take-over and each held-back member records the donor's
    ``gap``, its ``se`` and whether it was ``beyond_noise``. ``propose``: the values a recipient goes on with
    (PB2's model), else the donor's perturbed or drawn afresh (``explore``).

    ``only``: the decision of that member alone, its round just ended (an asynchronous PBT): ``scores`` holds the
    latest look of every member ranked (None for one not ranked now), and the quantile is of those ranked, as Ray's
    asynchronous PBT takes it; ``only`` without a score failed its round."""
    order = ranked(scores, settings.direction)
    scored = [m for m in order if scores[m] is not None]
    k = settings.exploited if only is None else settings.exploited_among(len(scored))
    if not scored or k == 0:
        return [], []
    donors = scored[:k]
    failed = [m for m in order if scores[m] is None and (only is None or m == only)]
    # a member scoring as well as a donor has nothing to gain from its state: a tie is no evidence (all 0 early on)
    worst_donor = scores[donors[-1]]
    bottom = [m for m in scored[-k:] if m not in donors and scores[m] != worst_donor and only in (None, m)]
    looks = list(outcomes) if outcomes is not None else [None] * len(scores)
    rng = _rng(settings.seed, "round", round_) if only is None else _rng(settings.seed, "member", only, "round", round_)
    take_overs, held_back = [], []
    judged: dict[int, dict] = {}
    for m in bottom:
        judged[m] = {}
        for d in donors:
            gap, se = ranking_gap(scores[d], scores[m], looks[d], looks[m], settings.direction)
            judged[m][d] = {"gap": gap, "se": se, "beyond_noise": beyond_noise(gap, se, settings.noise_z)}
    chosen: dict[int, int] = {m: rng.choice(donors) for m in failed}  # nothing to compare: no state to go on from
    for m in bottom:
        eligible = [d for d in donors if judged[m][d]["beyond_noise"] is not False] if settings.noise_guard else donors
        if eligible:
            chosen[m] = rng.choice(eligible)
        else:  # the lead of every donor is within the look's noise: the member goes on from its own weights
            nearest = max(donors, key=lambda d: judged[m][d]["gap"] / judged[m][d]["se"] if judged[m][d]["se"] else 0)
            held_back.append({"member": m, "donor": nearest, **judged[m][nearest]})
    # the values going on this round unchanged, then each new one as it is chosen: PB2 spreads its picks over them
    going_on = [dict(values[m]) for m in range(len(scores)) if m not in chosen]
    for m, donor in chosen.items():
        if propose is None:
            new, how = explore(values[donor], params, settings, rng)
        else:
            new, how = propose(values[donor], going_on, rng)
            new, how = hold_weights_total(values[donor], new, how, params, settings)
        going_on.append(new)
        lead = judged[m][donor] if m in judged else {"gap": None, "se": None, "beyond_noise": None}
        take_overs.append({"member": m, "donor": donor, "values": new, "how": how, **lead})
    return take_overs, held_back


def explore(
    values: dict[str, float], params: Sequence[Param], settings: Settings, rng: random.Random
) -> tuple[dict[str, float], dict[str, str]]:
    """``values`` moved: each key times one of the factors, or drawn afresh, within its range; then
    ``hold_weights_total``. ``how`` says what each key got, a bound that clipped it included."""
    new, how, asked = {}, {}, {}
    for p in params:
        if rng.random() < settings.resample_probability:
            new[p.key], how[p.key] = p.draw(rng), "resampled"
        else:
            factor = rng.choice(settings.perturb_factors)
            asked[p.key] = values[p.key] * factor
            new[p.key], how[p.key] = p.clip(asked[p.key]), f"x{factor:g}"
    for p in params:
        if p.key in asked and not math.isclose(new[p.key], asked[p.key]):
            how[p.key] += f", clipped to {new[p.key]:g}"
    return hold_weights_total(values, new, how, params, settings)


def hold_weights_total(
    before: dict[str, float],
    new: dict[str, float],
    how: dict[str, str],
    params: Sequence[Param],
    settings: Settings,
) -> tuple[dict[str, float], dict[str, str]]:
    """Reward weights (two or more, ``settings.weights_by_ratio``) rescaled so their total is ``before``'s: GRPO
    normalises the weighted reward within a group, so only their ratios move; ``how`` says the factor each got."""
    weights = [p for p in params if p.term is not None]
    if not settings.weights_by_ratio or len(weights) < 2:
        return new, how
    total, moved = sum(before[p.key] for p in weights), sum(new[p.key] for p in weights)
    if moved <= 0 or math.isclose(total, moved):
        return new, how
    new, how = dict(new), dict(how)
    for p in weights:
        asked = new[p.key] * total / moved
        new[p.key] = p.clip(asked)
        if before[p.key]:
            how[p.key] += f", x{asked / before[p.key]:.3g} with the weights' total held"
        if not math.isclose(new[p.key], asked):
            how[p.key] += f", clipped to {new[p.key]:g}"
    return new, how


# -- a member's config ---------------------------------------------------------------------------------------
def member_dir(sweep_dir: Path, member: int) -> Path:
    return Path(sweep_dir) / MEMBERS_DIR / str(member)


def _value(x: float) -> str:
    return repr(float(x))


def weight_schedule(history: Sequence[float], steps_per_round: int, max_steps: int) -> dict | None:
    """A weight's rounds so far (``history[k]``: its weight in round k) as a ``step`` schedule over the whole run:
    each round's weight from its first step, in the progress the trainer computes (``rewards.schedule.progress_of``),
    and the last one carried on into the next round (so a member's weight is a schedule, logged at every step,
    from round 0 on). None when the run has one round."""
    rounds = max_steps // steps_per_round
    if rounds < 2:
        return None
    knots = range(1, min(len(history), rounds - 1) + 1)
    return {
        "kind": "step",
        "at": [k * steps_per_round / (max_steps - 1) for k in knots],
        "values": [float(history[min(k, len(history) - 1)]) for k in knots],
    }


def member_overrides(
    member: int,
    history: Sequence[dict[str, float]],
    params: Sequence[Param],
    settings: Settings,
    base_seed: int,
    pause: bool = True,
) -> list[str]:
    """The overrides of ``member``'s run for the round ``len(history) - 1`` (``history``: its lineage's values,
    one dict a round): its directory, seed, learning rate, weights, and where it pauses (``pause`` False: it runs
    to the end, then the test split)."""
    round_ = len(history) - 1
    out = [
        f"hydra.sweep.subdir={MEMBERS_DIR}/{member}",
        f"trainer.seed={base_seed + member}",
        f"trainer.max_steps={settings.max_steps}",
        f"trainer.pause_at_step={(round_ + 1) * settings.steps_per_round if pause else 'null'}",
    ]
    return (
        out + [p.override(history[-1][p.key]) for p in params if p.term is None] + _weights(history, params, settings)
    )


def _weights(history: Sequence[dict[str, float]], params: Sequence[Param], settings: Settings) -> list[str]:
    """The lineage's reward weights: each its round-0 weight and a step schedule of the rounds so far."""
    out = []
    for p in params:
        if p.term is None:
            continue
        weights = [h[p.key] for h in history]
        out.append(p.override(weights[0]))
        schedule = weight_schedule(weights, settings.steps_per_round, settings.max_steps)
        if schedule:
            at = ",".join(map(_value, schedule["at"]))
            values = ",".join(map(_value, schedule["values"]))
            out.append(f"++reward_mix.{p.term}.schedule={{kind:step,at:[{at}],values:[{values}]}}")
    return out


def phases_value(phases: list[dict]) -> str:
    """``trainer.phases`` in Hydra's override grammar, on one line (dotted keys, numbers as Python writes them)."""

    def grammar(value: Any) -> str:
        if isinstance(value, dict):
            return "{" + ",".join(f"{k}:{grammar(v)}" for k, v in value.items()) + "}"
        if isinstance(value, list):
            return "[" + ",".join(grammar(v) for v in value) + "]"
        return repr(value)

    return grammar(phases)


def lineage_overrides(
    history: Sequence[dict[str, float]],
    params: Sequence[Param],
    settings: Settings,
    seeds: Sequence[int] | None = None,
    weights_inline: bool = True,
) -> list[str]:
    """A whole lineage (``history``: its values round by round) as one plain run's overrides: round 0's values,
    the weights as step schedules (``weights_inline``; else the mix comes from a file), and from each later round's
    first step that round's other values (``trainer.phases``), with ``seeds[r]`` as round r's seed when given."""
    moved = [p for p in params if p.term is None]
    out = [f"trainer.max_steps={settings.max_steps}", "trainer.pause_at_step=null"]
    if seeds is not None:
        out.append(f"trainer.seed={seeds[0]}")
    out += [p.override(history[0][p.key]) for p in moved]
    if weights_inline:
        out += _weights(history, params, settings)
    phases = [
        {
            "from_step": r * settings.steps_per_round,
            "set": {
                **{p.key: int(round(history[r][p.key])) if p.integer else float(history[r][p.key]) for p in moved},
                **({"trainer.seed": seeds[r]} if seeds is not None else {}),
            },
        }
        for r in range(1, len(history))
    ]
    if any(phase["set"] for phase in phases):
        out.append(f"trainer.phases={phases_value(phases)}")
    return out


# -- a member's state on disk --------------------------------------------------------------------------------
def round_score(run_dir: Path, step: int, metric: str) -> float | None:
    """The member's ``metric`` at ``step`` when its checkpoint of that step is complete (its validation there is
    written before its save); else None (it failed, or has not got there)."""
    found = last_checkpoint(run_dir)
    if found is None or found[1] < step:
        return None
    return logged_score(run_dir, step, metric)


def logged_score(run_dir: Path, step: int, metric: str) -> float | None:
    """The member's validation ``metric`` logged at ``step`` (metrics.jsonl), or None."""
    for row in read_jsonl(Path(run_dir) / METRICS):
        if row.get("step") == step:
            scores = row_scores(row)
            if scores is not None:
                value = lookup(val_figures(scores), metric)
                return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None
    return None


def supersede(run_dir: Path, step: int, donor: int, name: str | None = None) -> Path:
    """Keep ``run_dir``'s own record (metrics.jsonl, summary.json, outcomes/) before a take-over at ``step``
    replaces it: in ``superseded/step-<step>/`` (or ``name``), with ``superseded.json`` saying by whom. Once: a
    take-over tried again after a kill keeps the first copy, made before anything was replaced."""
    archive = Path(run_dir) / SUPERSEDED / (name or f"step-{step}")
    if archive.exists():
        return archive
    partial = archive.with_name(archive.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    for name in (METRICS, SUMMARY_NAME):
        if (Path(run_dir) / name).exists():
            shutil.copy2(Path(run_dir) / name, partial / name)
    if (Path(run_dir) / OUTCOMES).is_dir():
        shutil.copytree(Path(run_dir) / OUTCOMES, partial / OUTCOMES)
    write_json_atomic(partial / SUPERSEDED_RECORD, {"superseded_at_step": step, "by_member": donor})
    partial.rename(archive)
    return archive


def take_over(
    sweep_dir: Path, recipient: int, donor: int, step: int, donor_step: int | None = None, archive: str | None = None
) -> int:
    """Make ``recipient``'s run the donor's at ``donor_step`` (default ``step``, the recipient's own: a synchronous
    round): its checkpoint of that step (weights, optimizer, scheduler, RNG) and its metrics up to it; the
    recipient's own record at ``step`` is kept, marked superseded (``supersede``, in ``archive``). Staged next to
    the recipient and swapped in, so a kill part-way leaves either the old state or a staging directory the next
    attempt rebuilds. Returns the bytes copied."""
    src_dir, dst_dir = member_dir(sweep_dir, donor), member_dir(sweep_dir, recipient)
    step, own_step = step if donor_step is None else donor_step, step
    source = src_dir / CHECKPOINTS / f"checkpoint-{step}"
    if not (source / "trainer_state.json").exists():
        raise PBTError(
            f"member {donor} has no complete checkpoint of step {step} in {source.parent}: it cannot be "
            "taken over (was it deleted?)"
        )
    supersede(dst_dir, own_step, donor, archive)
    staging = dst_dir / TAKEOVER_STAGING
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(source, staging / source.name)
    copied = sum(f.stat().st_size for f in staging.rglob("*") if f.is_file())
    write_jsonl_atomic(staging / METRICS, rows_up_to(read_jsonl(src_dir / METRICS), step))
    shutil.rmtree(dst_dir / CHECKPOINTS, ignore_errors=True)
    (staging / METRICS).replace(dst_dir / METRICS)
    staging.rename(dst_dir / CHECKPOINTS)
    # what the recipient's own run had reported: gone with its weights (kept in superseded/)
    (dst_dir / SUMMARY_NAME).unlink(missing_ok=True)
    shutil.rmtree(dst_dir / OUTCOMES, ignore_errors=True)
    shutil.rmtree(dst_dir / BEST_DIR, ignore_errors=True)
    return copied


# -- the lineage ---------------------------------------------------------------------------------------------
@dataclass
class Lineage:
    """pbt.jsonl read back: the PBT's start, each round's scores, each round's decisions and whether they were
    carried out, the best member and its test."""

    path: Path
    start: dict | None = None
    values: list[list[dict]] = field(default_factory=list)  # values[m][r]: member m's values in round r
    # trained_by[m][r]: the member whose job trained round r of member m's lineage (its seed, its data order)
    trained_by: list[list[int]] = field(default_factory=list)
    rounds: dict[int, dict] = field(default_factory=dict)  # round -> its row (scores, start scores, values trained)
    decisions: dict[int, list] = field(default_factory=dict)  # round -> its take-overs
    held_back: dict[int, list] = field(default_factory=dict)  # round -> the members the noise guard kept
    carried_out: set[int] = field(default_factory=set)  # rounds whose take-overs are done
    # an asynchronous PBT (asynchronous.py): every member's report of a round, in the order they came
    reports: list[dict] = field(default_factory=list)
    # member -> its last report, while its weights are those the report looked at (a take-over ends that)
    current: dict[int, dict] = field(default_factory=dict)
    # member -> what it waits for: train (its next round), decide, carry (a take-over decided), finished, out
    due: dict[int, str] = field(default_factory=dict)
    # member -> the score of the state its next round starts from (its own last look, or its donor's)
    from_score: dict[int, float | None] = field(default_factory=dict)
    takes: dict[int, int] = field(default_factory=dict)  # member -> take-overs it made so far
    decided: dict[int, dict] = field(default_factory=dict)  # member -> its last decision
    timeline: list[dict] = field(default_factory=list)  # the reports, decisions and abandoned take-overs, in order
    _before: dict[int, tuple] = field(default_factory=dict)  # member -> its lineage before a take-over not yet done
    best: dict | None = None
    test: dict | None = None
    head_to_head: dict | None = None

    @classmethod
    def read(cls, path: Path) -> Lineage:
        lineage = cls(Path(path))
        for row in read_jsonl(path):
            lineage._apply(row)
        return lineage

    def _apply(self, row: dict) -> None:
        event = row.get("event")
        if event == "start":
            self.start = row
            self.values = [[dict(v)] for v in row["population"]]
            self.trained_by = [[m] for m in range(len(row["population"]))]
            self.due = {m: "train" for m in range(len(row["population"]))}
        elif event in ("report", "member_decide", "member_carried_out"):
            self.timeline.append(row)
        if event == "report":
            self._report(row)
        elif event == "member_decide":
            self._member_decide(row)
        elif event == "member_carried_out":
            m = row["member"]
            values, trained_by, current = self._before.pop(m)
            if row.get("abandoned"):  # the donor's checkpoint was gone: the member goes on from its own weights
                self.values[m] = [*values, dict(values[-1])]
                self.trained_by[m] = [*trained_by, m]
                self.current[m] = current
                self.from_score[m] = current["score"]
            self.due[m] = "train"
        elif event == "round":
            self.rounds[row["round"]] = row
        elif event == "decide":
            self.decisions[row["round"]] = row["take_overs"]
            self.held_back[row["round"]] = row.get("held_back", [])
            self._next_round(row["round"], row["take_overs"])
        elif event == "carried_out":
            self.carried_out.add(row["round"])
        elif event == "best":
            self.best = row
        elif event == "test":
            self.test = row
        elif event == "head_to_head":
            self.head_to_head = row

    @property
    def scores(self) -> dict[int, list]:
        """round -> each member's score at its end (None: it failed; asynchronous: its latest report of the round,
        None where it has none)."""
        if self.reports:
            out: dict[int, list] = {}
            for row in self.reports:
                out.setdefault(row["round"], [None] * len(self.values))[row["member"]] = row["score"]
            return dict(sorted(out.items()))
        return {r: row["scores"] for r, row in self.rounds.items()}

    @property
    def rounds_total(self) -> int:
        return int(self.start["settings"]["rounds"])

    def _report(self, row: dict) -> None:
        m = row["member"]
        self.reports.append(row)
        self.current[m] = row
        last = row["round"] == self.rounds_total - 1
        self.due[m] = "finished" if last and row["score"] is not None else "decide"

    def _member_decide(self, row: dict) -> None:
        m, r, t = row["member"], row["round"], row.get("take_over")
        self.decided[m] = row
        if t is not None:
            self.decisions.setdefault(r, []).append(t)
        if row.get("held_back"):
            self.held_back.setdefault(r, []).append(row["held_back"])
        self.from_score[m] = row.get("from_score")
        if row.get("out"):
            self.due[m] = "out"
        elif t is not None:
            d, dr = t["donor"], t["donor_round"]
            self._before[m] = (self.values[m][: r + 1], self.trained_by[m][: r + 1], self.current.pop(m, None))
            self.values[m] = [*self.values[d][: dr + 1], dict(t["values"])]
            self.trained_by[m] = [*self.trained_by[d][: dr + 1], m]
            self.takes[m] = self.takes.get(m, 0) + 1
            self.due[m] = "carry"
        else:
            self.values[m] = [*self.values[m][: r + 1], dict(self.values[m][r])]
            self.trained_by[m] = [*self.trained_by[m][: r + 1], m]
            self.due[m] = "train"

    def next_round(self, member: int) -> int:
        """The round ``member``'s lineage trains next (an asynchronous PBT)."""
        return len(self.values[member]) - 1

    def observations(self, direction: str, upto: int | None = None) -> list[dict]:
        """PB2's data: each round a member trained, its values against its improvement (its score less the score
        its round started from, better up); a synchronous PBT's rounds up to ``upto``, else every report."""
        sign = 1.0 if direction == "maximize" else -1.0
        rows: list[tuple] = (
            [(row["round"], row.get("values"), row["score"], row.get("start")) for row in self.reports]
            if self.reports
            else [
                (r, values, score, begun)
                for r, row in sorted(self.rounds.items())
                if upto is None or r <= upto
                for values, score, begun in zip(row.get("values") or [], row["scores"], row.get("start") or [])
            ]
        )
        return [
            {"round": r, "values": values, "improvement": sign * (score - begun)}
            for r, values, score, begun in rows
            if values is not None and score is not None and begun is not None
        ]

    def _next_round(self, round_: int, take_overs: list[dict]) -> None:
        replaced = {t["member"]: t for t in take_overs}
        before = [list(history[: round_ + 1]) for history in self.values]
        trained = [list(by[: round_ + 1]) for by in self.trained_by]
        for m, history in enumerate(before):
            if m in replaced:
                t = replaced[m]
                self.values[m] = [*before[t["donor"]], dict(t["values"])]
                self.trained_by[m] = [*trained[t["donor"]], m]
            else:
                self.values[m] = [*history, dict(history[-1])]
                self.trained_by[m] = [*trained[m], m]

    def write(self, row: dict) -> None:
        append_jsonl(self.path, row)
        self._apply(row)

    def history(self, member: int, round_: int) -> list[dict]:
        """The values of ``member``'s lineage in rounds 0..``round_``."""
        return self.values[member][: round_ + 1]

    def exploits(self) -> dict[str, int]:
        """How the take-overs of the bottom members stood against the ranking look's noise: ``beyond`` (the donor's
        lead was more than noise_z standard errors), ``within`` (it was not: a plain PBT copied noise), ``unjudged``
        (no per-question outcomes to judge it by), ``held_back`` (the guard kept the member on its own weights);
        ``failed``: take-overs of members that failed their round."""
        out = {"beyond": 0, "within": 0, "unjudged": 0, "held_back": 0, "failed": 0}
        for round_, moves in self.decisions.items():
            for t in moves:
                if t.get("gap", 0.0) is None:
                    out["failed"] += 1
                else:
                    out[{True: "beyond", False: "within", None: "unjudged"}[t.get("beyond_noise")]] += 1
            out["held_back"] += len(self.held_back.get(round_, []))
        return out
