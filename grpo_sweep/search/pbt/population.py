"""Population-based training over reward weights and the learning rate: the population, its decisions and its
record (``hparams_search=pbt``; the Hydra sweeper that drives it is ``search/pbt/sweeper.py``).

Truncation selection as in Jaderberg et al. (2017): ``population`` members train side by side in ``rounds`` of
``steps_per_round`` steps. After each round the members are ranked on validation (the run's ``optimized_metric``
at the round's last step); each of the bottom ``exploit_fraction`` takes a top member's checkpoint (adapter,
optimizer, scheduler, RNG) and its metrics history (exploit), then moves its values: each searched key times one
of ``perturb_factors``, or with ``resample_probability`` drawn afresh in its range (explore).

A member is one run directory (``members/<m>/``) that every round continues (``trainer.pause_at_step``), with the
run's own resume, so the learning-rate schedule and the weights' progress count to the whole run's
``trainer.max_steps``. A member's reward weights are a ``step`` schedule over the whole run (its lineage's weight
in each round), so its effective weights are its config, and the best member's mix replays as a plain run.

Every decision is written to ``pbt.jsonl`` before it is carried out, and carrying it out again gives the same
files: the same command continues a driver that was killed. No torch here (the login node runs this).
"""

from __future__ import annotations

import math
import random
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from ...run.files import append_jsonl, read_jsonl, write_jsonl_atomic
from ...run.record import SUMMARY_NAME, row_scores, val_figures
from ...run.results import BEST_DIR, METRICS, lookup
from ...run.resume import CHECKPOINTS, last_checkpoint, rows_up_to

# the population's lineage: its members are rounds of changing configs, not a grid's configurations
LINEAGE = "pbt.jsonl"

PLOT = "pbt.png"
MEMBERS_DIR = "members"
# the best member's mix, as an option of the reward_mix group under the sweep's own config directory
BEST_SCHEDULE = Path("conf") / "reward_mix" / "best_schedule.yaml"
LEARNING_RATE = "optimizer.learning_rate"
WEIGHT_KEY = re.compile(r"reward_mix\.([A-Za-z_][\w-]*)\.weight")
DIRECTIONS = ("maximize", "minimize")
# where a take-over assembles the donor's state before it replaces the recipient's
TAKEOVER_STAGING = "checkpoints.taking-over"


class PBTError(ValueError):
    """A PBT setting that cannot work; the message names it."""


@dataclass(frozen=True)
class Param:
    """One searched key and its range (``log``: perturbed and drawn on a log scale)."""

    key: str
    low: float
    high: float
    log: bool = False

    @property
    def term(self) -> str | None:
        match = WEIGHT_KEY.fullmatch(self.key)
        return match.group(1) if match else None

    def draw(self, rng: random.Random) -> float:
        if self.log:
            return math.exp(rng.uniform(math.log(self.low), math.log(self.high)))
        return rng.uniform(self.low, self.high)

    def clip(self, value: float) -> float:
        return min(self.high, max(self.low, value))


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise PBTError(f"{where}={value!r}: must be a finite number")
    return float(value)


def parse_params(params: Mapping[str, Any], mix: Mapping[str, Any]) -> list[Param]:
    """``hydra.sweeper.params`` as Params: ``reward_mix.<term>.weight`` of a term of the mix (without a schedule of
    its own) and ``optimizer.learning_rate``, each ``{low, high[, log]}``."""
    if not params:
        raise PBTError(
            "hydra.sweeper.params is empty: give the keys PBT moves, e.g. "
            "hydra.sweeper.params.optimizer.learning_rate={low:1e-4,high:3e-3,log:true}"
        )
    out = []
    for key, spec in params.items():
        where = f"hydra.sweeper.params.{key}"
        term = WEIGHT_KEY.fullmatch(str(key))
        if key != LEARNING_RATE and not term:
            raise PBTError(
                f"{where}: PBT moves reward_mix.<term>.weight and {LEARNING_RATE} (what a checkpoint can "
                "continue with); search other keys with hparams_search=grpo or a grid"
            )
        if term and term.group(1) not in mix:
            raise PBTError(f"{where}: the mix has no term {term.group(1)!r} (it has {', '.join(mix) or 'none'})")
        if term and (mix[term.group(1)] or {}).get("schedule") is not None:
            raise PBTError(
                f"{where}: reward_mix.{term.group(1)} has a schedule of its own; PBT makes the weight's "
                "schedule (drop the term's schedule)"
            )
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
        if low < 0:
            raise PBTError(f"{where}.low={low:g}: a weight must be >= 0")
        out.append(Param(str(key), low, high, bool(log)))
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

    @property
    def max_steps(self) -> int:
        return self.rounds * self.steps_per_round

    @property
    def exploited(self) -> int:
        """How many members take over another's state after a round (and how many give theirs)."""
        return max(1, int(self.population * self.exploit_fraction))


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
    if not 0 < fraction <= 0.5:
        raise PBTError(
            f"hydra.sweeper.exploit_fraction={fraction:g}: must be in (0, 0.5] (the bottom fraction "
            "takes over from the top fraction)"
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
    return Settings(population, rounds, steps, fraction, tuple(factors), probability, s.direction, s.seed)


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


def ranked(scores: Sequence[float | None], direction: str) -> list[int]:
    """Members best first; a member without a score (it failed) last; ties keep the lower member first."""
    sign = -1 if direction == "maximize" else 1
    return sorted(range(len(scores)), key=lambda m: (scores[m] is None, sign * (scores[m] or 0.0), m))


def decide(
    scores: Sequence[float | None],
    values: Sequence[dict[str, float]],
    params: Sequence[Param],
    settings: Settings,
    round_: int,
) -> list[dict]:
    """After ``round_``: which members take over which (each of the bottom ``exploited`` of those with a score that
    scored below every one of the top ``exploited``, and every member that failed, from one of the top ones, drawn)
    and the values each goes on with (explored)."""
    order = ranked(scores, settings.direction)
    scored = [m for m in order if scores[m] is not None]
    if not scored:
        return []
    k = settings.exploited
    donors = scored[:k]
    failed = [m for m in order if scores[m] is None]
    # a member scoring as well as a donor has nothing to gain from its state: a tie is no evidence (all 0 early on)
    worst_donor = scores[donors[-1]]
    recipients = [*failed, *(m for m in scored[-k:] if m not in donors and scores[m] != worst_donor)]
    rng = _rng(settings.seed, "round", round_)
    out = []
    for m in recipients:
        donor = rng.choice(donors)
        new, how = explore(values[donor], params, settings, rng)
        out.append({"member": m, "donor": donor, "values": new, "how": how})
    return out


def explore(
    values: dict[str, float], params: Sequence[Param], settings: Settings, rng: random.Random
) -> tuple[dict[str, float], dict[str, str]]:
    """``values`` moved: each key times one of the factors (clipped to its range), or drawn afresh."""
    new, how = {}, {}
    for p in params:
        if rng.random() < settings.resample_probability:
            new[p.key], how[p.key] = p.draw(rng), "resampled"
        else:
            factor = rng.choice(settings.perturb_factors)
            new[p.key], how[p.key] = p.clip(values[p.key] * factor), f"x{factor:g}"
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
    for p in params:
        if p.term is None:
            out.append(f"{p.key}={_value(history[-1][p.key])}")
            continue
        weights = [h[p.key] for h in history]
        out.append(f"{p.key}={_value(weights[0])}")
        schedule = weight_schedule(weights, settings.steps_per_round, settings.max_steps)
        if schedule:
            at = ",".join(map(_value, schedule["at"]))
            values = ",".join(map(_value, schedule["values"]))
            out.append(f"++reward_mix.{p.term}.schedule={{kind:step,at:[{at}],values:[{values}]}}")
    return out


# -- a member's state on disk --------------------------------------------------------------------------------
def round_score(run_dir: Path, step: int, metric: str) -> float | None:
    """The member's ``metric`` at ``step`` when its checkpoint of that step is complete (its validation there is
    written before its save); else None (it failed, or has not got there)."""
    found = last_checkpoint(run_dir)
    if found is None or found[1] < step:
        return None
    for row in read_jsonl(Path(run_dir) / METRICS):
        if row.get("step") == step:
            scores = row_scores(row)
            if scores is not None:
                value = lookup(val_figures(scores), metric)
                return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None
    return None


def take_over(sweep_dir: Path, recipient: int, donor: int, step: int) -> int:
    """Make ``recipient``'s run the donor's at ``step``: its checkpoint of that step (weights, optimizer,
    scheduler, RNG) and its metrics up to it. Staged next to the recipient and swapped in, so a kill part-way
    leaves either the old state or a staging directory the next attempt rebuilds. Returns the bytes copied."""
    src_dir, dst_dir = member_dir(sweep_dir, donor), member_dir(sweep_dir, recipient)
    source = src_dir / CHECKPOINTS / f"checkpoint-{step}"
    if not (source / "trainer_state.json").exists():
        raise PBTError(
            f"member {donor} has no complete checkpoint of step {step} in {source.parent}: it cannot be "
            "taken over (was it deleted?)"
        )
    staging = dst_dir / TAKEOVER_STAGING
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(source, staging / source.name)
    copied = sum(f.stat().st_size for f in staging.rglob("*") if f.is_file())
    write_jsonl_atomic(staging / METRICS, rows_up_to(read_jsonl(src_dir / METRICS), step))
    shutil.rmtree(dst_dir / CHECKPOINTS, ignore_errors=True)
    (staging / METRICS).replace(dst_dir / METRICS)
    staging.rename(dst_dir / CHECKPOINTS)
    # what the recipient's own run had reported: gone with its weights
    (dst_dir / SUMMARY_NAME).unlink(missing_ok=True)
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
    scores: dict[int, list] = field(default_factory=dict)  # round -> each member's score
    decisions: dict[int, list] = field(default_factory=dict)  # round -> its take-overs
    carried_out: set[int] = field(default_factory=set)  # rounds whose take-overs are done
    best: dict | None = None
    test: dict | None = None

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
        elif event == "round":
            self.scores[row["round"]] = row["scores"]
        elif event == "decide":
            self.decisions[row["round"]] = row["take_overs"]
            self._next_round(row["round"], row["take_overs"])
        elif event == "carried_out":
            self.carried_out.add(row["round"])
        elif event == "best":
            self.best = row
        elif event == "test":
            self.test = row

    def _next_round(self, round_: int, take_overs: list[dict]) -> None:
        replaced = {t["member"]: t for t in take_overs}
        before = [list(history[: round_ + 1]) for history in self.values]
        for m, history in enumerate(before):
            if m in replaced:
                t = replaced[m]
                self.values[m] = [*before[t["donor"]], dict(t["values"])]
            else:
                self.values[m] = [*history, dict(history[-1])]

    def write(self, row: dict) -> None:
        append_jsonl(self.path, row)
        self._apply(row)

    def history(self, member: int, round_: int) -> list[dict]:
        """The values of ``member``'s lineage in rounds 0..``round_``."""
        return self.values[member][: round_ + 1]
