"""A reward term's weight over training: ``reward_mix.<term>.schedule``.

``reward_mix.<term>.weight`` stays the weight: the constant, or where the schedule starts. A schedule is a curve of
the weight over training **progress**, the step being trained over the run's last step (0 at the first step, 1 at
the last), so the same schedule means the same thing at any ``trainer.max_steps``:

- ``linear`` / ``cosine``: from ``weight`` at ``start_at`` to ``end`` at ``until`` (defaults 0 and 1), constant
  before and after; cosine eases in and out (half a cosine wave);
- ``step``: ``weight`` until the first of ``at``, then each of ``values`` from its ``at`` on;
- ``piecewise``: ``points``, pairs ``[progress, weight]``, joined by straight lines, the first point's weight held
  before it and the last's after it, as ``numpy.interp`` does: the points are the whole curve, so ``weight`` is not
  used (a curve that should start elsewhere gives a point at 0).

TRL's answer to the request (trl#3036; the PRs adding a scheduler, #5657 and #5670, were closed unmerged) is to
schedule inside the reward function: that scales what each reward logs, so the per-reward means stop being
comparable across steps and runs. Here the
rewards log what they pay, and the trainer's weights change (``run/train.RewardSchedule``). Everything in this
module is checked on the launching machine (no torch).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ..config.checks import WEIGHTS, WEIGHTS_WHY
from ..config.grpo_fields import scale_error
from . import RewardError

KINDS = ("linear", "cosine", "step", "piecewise")
# the keys each kind takes besides `kind`
KIND_KEYS = {
    "linear": ("end", "start_at", "until"),
    "cosine": ("end", "start_at", "until"),
    "step": ("at", "values"),
    "piecewise": ("points",),
}
KEYS = ("kind", "end", "start_at", "until", "at", "values", "points")


@dataclass(frozen=True)
class Schedule:
    """A weight as a function of progress: ``knots`` (progress, weight), progress increasing in [0, 1]."""

    kind: str
    knots: tuple[tuple[float, float], ...]

    def weight(self, progress: float) -> float:
        knots = self.knots
        if self.kind == "step":
            return next((w for p, w in reversed(knots) if progress >= p), knots[0][1])
        if self.kind == "piecewise":
            import numpy

            return float(numpy.interp(progress, [p for p, _ in knots], [w for _, w in knots]))
        if progress <= knots[0][0]:
            return knots[0][1]
        for (p0, w0), (p1, w1) in zip(knots, knots[1:]):
            if progress <= p1:
                t = (progress - p0) / (p1 - p0)
                if self.kind == "cosine":
                    t = (1 - math.cos(math.pi * t)) / 2
                return w0 + (w1 - w0) * t
        return knots[-1][1]

    def describe(self) -> str:
        """``linear: 1 at 0 -> 0 at 1``: each knot's weight at its progress."""
        return f"{self.kind}: " + " -> ".join(f"{w:g} at {p:g}" for p, w in self.knots)

    def record(self) -> dict:
        """What summary.json keeps: the kind and the knots it was read into."""
        return {"kind": self.kind, "knots": [list(k) for k in self.knots]}


def _number(value: Any, where: str, low: float | None = None, high: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise RewardError(f"{where}={value!r}: must be a finite number")
    if (low is not None and value < low) or (high is not None and value > high):
        what = "a weight >= 0" if high is None else f"progress in [{low:g}, {high:g}] (a fraction of the run)"
        raise RewardError(f"{where}={value!r}: must be {what}")
    error = scale_error(where, value, *WEIGHTS, WEIGHTS_WHY) if high is None else None  # a weight
    if error:
        raise RewardError(error)
    return float(value)


def _list(value: Any, where: str, example: str) -> list:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or not value:
        raise RewardError(f"{where}={value!r}: give a non-empty list, e.g. {example}")
    return list(value)


def _increasing(progress: list[float], where: str) -> None:
    for before, after in zip(progress, progress[1:]):
        if after <= before:
            raise RewardError(f"{where}={progress}: progress must increase ({after:g} after {before:g})")


def parse_schedule(term: str, weight: float, raw: Any) -> Schedule:
    """``reward_mix.<term>.schedule`` read into a Schedule, or a one-line RewardError naming the bad value."""
    where = f"reward_mix.{term}.schedule"
    if not isinstance(raw, Mapping):
        raise RewardError(f"{where}={raw!r}: give a mapping such as {{kind: linear, end: 0}}")
    unknown = [k for k in raw if k not in KEYS]
    if unknown:
        raise RewardError(f"{where}.{unknown[0]}: unknown key; a schedule takes {', '.join(KEYS)}")
    kind = raw.get("kind")
    if kind not in KINDS:
        raise RewardError(f"{where}.kind={kind!r}: use one of {', '.join(KINDS)}")
    foreign = [k for k in raw if k != "kind" and k not in KIND_KEYS[kind]]
    if foreign:
        owner = next(k for k in KINDS if foreign[0] in KIND_KEYS[k])
        raise RewardError(f"{where}.{foreign[0]} is for kind={owner}; kind={kind} takes {', '.join(KIND_KEYS[kind])}")
    if kind in ("linear", "cosine"):
        if raw.get("end") is None:
            raise RewardError(
                f"{where}.end is missing: the weight kind={kind} ends at (it starts at "
                f"reward_mix.{term}.weight={weight:g})"
            )
        end = _number(raw["end"], f"{where}.end", low=0)
        start_at = _number(raw.get("start_at", 0.0), f"{where}.start_at", 0, 1)
        until = _number(raw.get("until", 1.0), f"{where}.until", 0, 1)
        if until <= start_at:
            raise RewardError(f"{where}.until={until:g} is not after start_at={start_at:g}: progress must increase")
        return Schedule(kind, ((start_at, weight), (until, end)))
    if kind == "step":
        at = _list(raw.get("at"), f"{where}.at", "[0.5]")
        values = _list(raw.get("values"), f"{where}.values", "[0.0]")
        if len(at) != len(values):
            raise RewardError(
                f"{where}: at has {len(at)} progress points and values {len(values)} weights; give one "
                "weight for each point"
            )
        progress = [_number(p, f"{where}.at[{i}]", 0, 1) for i, p in enumerate(at)]
        _increasing(progress, f"{where}.at")
        weights = [_number(w, f"{where}.values[{i}]", low=0) for i, w in enumerate(values)]
        knots = ((0.0, weight),) if progress[0] > 0 else ()
        return Schedule(kind, knots + tuple(zip(progress, weights)))
    points = _list(raw.get("points"), f"{where}.points", "[[0, 1.0], [0.3, 0.5], [1, 0]]")
    knots = []
    for i, point in enumerate(points):
        if isinstance(point, (str, bytes)) or not isinstance(point, Sequence) or len(point) != 2:
            raise RewardError(f"{where}.points[{i}]={point!r}: give a pair [progress, weight], e.g. [0.3, 0.5]")
        knots.append(
            (_number(point[0], f"{where}.points[{i}][0]", 0, 1), _number(point[1], f"{where}.points[{i}][1]", low=0))
        )
    _increasing([p for p, _ in knots], f"{where}.points' progress")
    return Schedule(kind, tuple(knots))


def progress_of(step: int, max_steps: int) -> float:
    """The progress of the step being trained (``step`` optimizer steps done) in a run of ``max_steps``."""
    return min(1.0, step / (max_steps - 1)) if max_steps > 1 else 0.0


def weights_at(weights: Sequence[float], schedules: Sequence[Schedule | None], progress: float) -> list[float]:
    """Every term's weight at ``progress`` (a term without a schedule keeps its weight)."""
    return [w if s is None else s.weight(progress) for w, s in zip(weights, schedules)]


def zero_everywhere_at(weights: Sequence[float], schedules: Sequence[Schedule | None]) -> float | None:
    """The first progress at which every weight is 0, or None. Between knots each weight is monotone, so a point
    where all are 0 shows at a knot of one of them (or at 0 or 1)."""
    candidates = sorted({0.0, 1.0, *(p for s in schedules if s is not None for p, _ in s.knots)})
    return next((p for p in candidates if not any(weights_at(weights, schedules, p))), None)
