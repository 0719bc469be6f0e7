"""Is a configuration really better than another, or is it seed noise? Paired differences over seeds, with a CI.

Runs that differ only in their seed are replicates of one configuration. Each configuration is compared with the
best one (the best mean objective) seed by seed: the same seed in both, only seeds both have, difference
``this - best``; the mean difference gets a Student t confidence interval with n-1 degrees of freedom. The verdict
says whether the interval excludes 0, in the objective's direction. Pure arithmetic: no torch, no files.
"""
from __future__ import annotations

import functools

import math
import statistics
from dataclasses import dataclass
from typing import Hashable, Iterable, Mapping, Sequence

DIRECTIONS = ("maximize", "minimize")
REFERENCE = "reference (best)"


def is_seed(key: str) -> bool:
    """An override or parameter that only picks a seed (``trainer.seed``, ``+data.seed``): runs differing only in
    these are replicates of one configuration."""
    return key.lstrip("+~").rsplit(".", 1)[-1] == "seed"


@functools.lru_cache(maxsize=None)
def t_quantile(p: float, dof: int) -> float:
    """The ``p`` quantile of Student's t with ``dof`` degrees of freedom (t_{0.975, 2} = 4.303).

    scipy is not a dependency and the standard library has no t distribution; mpmath (installed with sympy,
    which torch and math-verify both require) has the regularized incomplete beta function, whose inverse is the
    quantile: P(T > t) = I_{dof/(dof+t^2)}(dof/2, 1/2) / 2 for t > 0.
    """
    import mpmath

    if not 0.0 < p < 1.0:
        raise ValueError(f"t_quantile: p={p!r} must be strictly between 0 and 1")
    if int(dof) != dof or dof < 1:
        raise ValueError(f"t_quantile: dof={dof!r} must be a whole number >= 1")
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -t_quantile(1.0 - p, dof)

    def cdf(t):
        return 1 - mpmath.betainc(dof / 2, 0.5, 0, dof / (dof + t * t), regularized=True) / 2

    high = 1.0
    while cdf(high) < p:  # bracket the root: the quantile lies in (0, high]
        high *= 2
    return float(mpmath.findroot(lambda t: cdf(t) - p, (0.0, high), solver="anderson"))


def paired_ci(a: Sequence[float], b: Sequence[float], confidence: float = 0.95
              ) -> tuple[float | None, float | None, float | None, int]:
    """Mean of the paired differences ``a[i] - b[i]`` and its two-sided ``confidence`` interval (Student t, n-1 dof).

    Returns ``(mean, low, high, n)``; ``low`` and ``high`` are None with fewer than 2 pairs (no spread to measure),
    ``mean`` is None with none.
    """
    if len(a) != len(b):
        raise ValueError(f"paired_ci: {len(a)} values against {len(b)}; pairs need the same number")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"paired_ci: confidence={confidence!r} must be strictly between 0 and 1")
    diffs = [float(x) - float(y) for x, y in zip(a, b)]
    bad = [d for d in diffs if not math.isfinite(d)]
    if bad:
        raise ValueError(f"paired_ci: a difference is {bad[0]}; pass finite objectives only")
    n = len(diffs)
    if n == 0:
        return None, None, None, 0
    mean = statistics.fmean(diffs)
    if n < 2:
        return mean, None, None, n
    half = t_quantile((1 + confidence) / 2, n - 1) * statistics.stdev(diffs) / math.sqrt(n)
    return mean, mean - half, mean + half, n


def verdict(low: float | None, high: float | None, n: int, direction: str = "maximize") -> str:
    """``better`` / ``worse`` than the reference when the CI of ``this - reference`` excludes 0, else
    ``indistinguishable``; with fewer than 2 pairs there is no CI and it says so."""
    if direction not in DIRECTIONS:
        raise ValueError(f"verdict: direction={direction!r}; use maximize or minimize")
    if n < 2 or low is None or high is None:
        return f"indistinguishable ({n} paired seed{'' if n == 1 else 's'}: no CI)"
    if low > 0 or high < 0:
        higher = low > 0
        return "better" if higher == (direction == "maximize") else "worse"
    return "indistinguishable"


def seed_means(pairs: Iterable[tuple[Hashable, float | None]]) -> dict:
    """{seed: objective} from (seed, objective) pairs; runs without a finite objective are left out and two runs
    of one seed (a repeated run) count once, as their mean, so a seed is never paired twice."""
    values: dict = {}
    for seed, value in pairs:
        if isinstance(value, (int, float)) and math.isfinite(value):
            values.setdefault(seed, []).append(float(value))
    return {seed: statistics.fmean(v) for seed, v in values.items()}


@dataclass
class Comparison:
    """One configuration against the best: its objectives by seed and the paired difference from the best."""

    config: str
    by_seed: dict  # seed -> objective (runs without an objective left out)
    mean: float | None
    std: float | None
    delta: float | None = None  # mean paired difference this - best (None for the best itself)
    low: float | None = None
    high: float | None = None
    n: int = 0  # seeds both have
    verdict: str = "-"
    is_best: bool = False


def compare_to_best(groups: Mapping[str, Mapping[Hashable, float]], direction: str = "maximize",
                    confidence: float = 0.95) -> list[Comparison]:
    """Each configuration ({seed: objective}) against the one with the best mean objective, best first.

    A configuration with no objective at all comes last with verdict ``-``.
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"compare_to_best: direction={direction!r}; use maximize or minimize")
    rows = []
    for config, by_seed in groups.items():
        values = {s: float(v) for s, v in by_seed.items() if isinstance(v, (int, float)) and math.isfinite(v)}
        objectives = list(values.values())
        rows.append(Comparison(config, values, statistics.fmean(objectives) if objectives else None,
                               statistics.stdev(objectives) if len(objectives) > 1 else None))
    sign = -1 if direction == "maximize" else 1
    rows.sort(key=lambda c: (c.mean is None, sign * (c.mean or 0.0)))  # stable: ties keep the given order
    if not rows or rows[0].mean is None:
        return rows
    best = rows[0]
    best.is_best, best.verdict = True, REFERENCE
    for row in rows[1:]:
        if row.mean is None:
            continue
        shared = [s for s in row.by_seed if s in best.by_seed]
        row.delta, row.low, row.high, row.n = paired_ci([row.by_seed[s] for s in shared],
                                                        [best.by_seed[s] for s in shared], confidence)
        row.verdict = verdict(row.low, row.high, row.n, direction)
    return rows


def signed(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:+.3g}" if 0 < abs(value) < 1e-2 else f"{value:+.3f}"


def ci_text(row: Comparison) -> str:
    """``[low, high]`` of the difference from the best, ``-`` without one (the best itself, n < 2)."""
    return "-" if row.low is None or row.high is None else f"[{signed(row.low)}, {signed(row.high)}]"
