"""Borrowing strength across configurations: the moderated variances and their simulated critical value, the
``verdicts: moderated`` mode of the engine (stats.judge).

At 3 seeds a configuration's own variance has 2 degrees of freedom and Tukey's critical value over 10
configurations is 9.9 standard errors. Configurations of one sweep usually have run-to-run noise of a similar size,
so each one's variance estimate can lean on the others' (empirical Bayes, Smyth 2004, limma's ``eBayes``):

- **Units.** Where the design shares seeds (a grid's ``trainer.seed=1,2,3``, the seeds sweeper, replicated
  trials: seed s gives every configuration the same data order, adapter initialisation and first generations), a
  comparison's unit is the pair: the variance over seeds of the seed-paired differences of the two configurations'
  run means, valid whatever their correlation (S - 1 degrees of freedom). Where it does not, each configuration's
  own variance of a run's mean is a unit, and a pair's variance is the sum of its two configurations'.
- **The prior.** The units' variances are treated as scaled chi-squares around a common prior s0^2 with d0 degrees
  of freedom, both estimated from the sweep by Smyth's method of moments on log variances (``fit_prior``; paired,
  on every pair of the sweep, not the reference's alone: those all share its noise). A unit's
  moderated variance is (d0 s0^2 + d s^2) / (d0 + d) with d0 + d degrees of freedom, **never below its own
  estimate** s^2: a noisy configuration (the validation-best reference, usually, under the null) is never shrunk
  towards the quiet ones, only a quiet one raised towards the others.
- **The critical value** is not taken from a distribution that would hold only if every configuration had the same
  noise: it is Bonferroni's t quantile at d0 + d degrees of freedom over the all-pairs family, scaled by a factor
  calibrated by simulation for the design actually run (k configurations, S seeds, paired or not, alpha): the
  (1 - alpha) quantile, over null sweeps, of the largest |t| over every pair of configurations (so it holds
  whichever configuration validation picks as the reference), taken at the worst of a declared family of noise
  patterns (``patterns``): run-to-run SDs up to ``SPREAD_LIMIT`` (4) times apart, seeds shared at correlations -0.3
  to 0.9 (paired). That family is what the mode promises its error over; stats.judge warns, naming the
  configuration, when a configuration's spread looks outside it.

bench/verdict_battery.py measures the promise and the power against ``strict`` (today's engine) on the same
sweeps. numpy and scipy.special/stats only, imported where used; the one file is the calibrations' cache in
$GRPO_SWEEP_CACHE (``calibration``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from pathlib import Path

import numpy as np

SPREAD_LIMIT = 4.0  # the moderated mode's promise: configurations' run-to-run SDs at most this many times apart
CORRELATIONS = (0.0, 0.45, 0.9, -0.3)  # seed-shared correlations of the family (paired designs); -0.3: mixed signs
SIMULATIONS = 8000  # null sweeps per noise pattern, up to 12 configurations (fewer beyond: the work grows as k^2)
DF_CAP = 1e4  # d0 beyond this is infinite for every purpose here (the t quantile no longer moves)


@functools.cache
def _trigamma_table() -> tuple[np.ndarray, np.ndarray]:
    """log trigamma(y) and log y on a grid (trigamma is smooth and monotone: its inverse is read off by
    interpolation, thousands of times faster than Newton's iteration on scipy's polygamma in the calibration)."""
    from scipy.special import polygamma

    y = np.logspace(-4, 6, 4001)
    return np.log(polygamma(1, y))[::-1], np.log(y)[::-1]


def _trigamma_inverse(x: np.ndarray) -> np.ndarray:
    """y with trigamma(y) = x (limma's trigammaInverse; relative error < 1e-5 on the grid, asymptotes off it:
    trigamma(y) ~ 1/y^2 near 0 and 1/y far out)."""
    x = np.asarray(x, float)
    log_tri, log_y = _trigamma_table()
    inside = np.exp(np.interp(np.log(np.clip(x, 1e-300, None)), log_tri, log_y))
    return np.where(x > math.exp(log_tri[-1]), 1.0 / np.sqrt(x), np.where(x < math.exp(log_tri[0]), 1.0 / x, inside))


def fit_prior(s2: np.ndarray, d: float, overlap: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """(s0^2, d0) over the last axis of ``s2`` (units' variances with ``d`` degrees of freedom each; NaN or 0: left
    out, a collapsed configuration has no noise to share). Smyth's (2004) method of moments on log s^2, as limma's
    fitFDist: hand-written because limma is R and no kept Python package carries it. d0 is 0 (no moderation) where
    fewer than two units have a variance, infinite (capped at DF_CAP) where they scatter no more than chi-squares
    of d degrees of freedom would. ``overlap``: the mean correlation between two units' log variances (pairs of
    configurations that share one: their variances are not independent, so they scatter less than independent ones
    and would pass for a stronger prior); their scatter is divided by 1 - overlap."""
    from scipy.special import digamma, polygamma

    s2 = np.asarray(s2, float)
    ok = np.isfinite(s2) & (s2 > 0)
    n = ok.sum(-1)
    e = np.where(ok, np.log(np.where(ok, s2, 1.0)) - digamma(d / 2) + math.log(d / 2), 0.0)
    emean = e.sum(-1) / np.maximum(n, 1)
    scatter = (np.where(ok, (e - emean[..., None]) ** 2, 0.0)).sum(-1) / np.maximum(n - 1, 1)
    evar = scatter / (1 - overlap) - polygamma(1, d / 2)
    positive = evar > 0
    d0 = np.where(positive, 2 * _trigamma_inverse(np.where(positive, evar, 1.0)), DF_CAP)
    d0 = np.minimum(d0, DF_CAP)
    s0 = np.exp(emean + digamma(d0 / 2) - np.log(d0 / 2))
    few = n < 2
    return np.where(few, 0.0, s0), np.where(few, 0.0, d0)


def moderate(s2: np.ndarray, d: float, prior: np.ndarray | None = None, overlap: float = 0.0):
    """Each unit's moderated variance, never below its own (last axis: the units), and the degrees of freedom it
    carries (d + d0, per leading index). ``prior``: the units the prior is fitted on, when not ``s2`` itself."""
    s0, d0 = fit_prior(s2 if prior is None else prior, d, overlap)
    shrunk = (d0[..., None] * s0[..., None] + d * s2) / (d0[..., None] + d)
    return np.maximum(s2, np.where(np.isfinite(shrunk), shrunk, s2)), d + d0


def base_quantile(alpha: float, family: int, df) -> np.ndarray:
    """Bonferroni's two-sided t quantile over the family's pairs at ``df``: the shape the calibrated factor
    scales (its level is the simulation's)."""
    df = np.asarray(df, float)
    log_df, q = _t_table(1 - alpha / (family * (family - 1)))
    return np.interp(np.log(np.clip(df, 1.0, DF_CAP)), log_df, q)


@functools.lru_cache(maxsize=256)
def _t_table(p: float) -> tuple[np.ndarray, np.ndarray]:
    """Student's t quantile p over log-spaced degrees of freedom 1 .. DF_CAP (interpolated in log df: the
    calibration asks for thousands of fractional df at once)."""
    from scipy.stats import t

    df = np.geomspace(1.0, DF_CAP, 600)
    return np.log(df), t.ppf(p, df)


def patterns(k: int, paired: bool) -> list[tuple[np.ndarray, np.ndarray]]:
    """The declared family: (sds (k,), loadings (k,)) — a run's mean is sd_c (l_c w_s + sqrt(1 - l_c^2) z_cs),
    so configurations c, c' correlate at l_c l_c' by seed. Spreads: equal; one 4x noisier; one 4x quieter; half 4x
    noisier; geometric from 1 to 4. Correlations (paired designs only; unshared seeds are independent): 0, 0.45 and
    0.9 for every pair, and -0.3/+0.3 between halves of opposite/same sign."""
    ramp = SPREAD_LIMIT ** (np.arange(k) / max(k - 1, 1))
    spreads = [np.ones(k), np.r_[SPREAD_LIMIT, np.ones(k - 1)], np.r_[1.0, np.full(k - 1, SPREAD_LIMIT)], ramp]
    half = np.ones(k)
    half[k - k // 2 :] = SPREAD_LIMIT
    spreads.append(half)
    loadings = [np.zeros(k)]
    if paired:
        for rho in CORRELATIONS[1:]:
            load = np.full(k, math.sqrt(abs(rho)))
            if rho < 0:
                load[1::2] *= -1
            loadings.append(load)
    return [(sd, load) for sd in spreads for load in loadings]


def pair_units(m: np.ndarray) -> tuple[np.ndarray, float]:
    """Every pair's seed-paired variance of run-mean differences, (..., k (k - 1) / 2) from m[..., k, S], and the
    mean correlation of two of them (``fit_prior``'s overlap): pairs sharing a configuration correlate at 1/4 when
    noise is equal (the squared correlation, 1/2, of two differences sharing a term)."""
    k = m.shape[-2]
    i, j = np.triu_indices(k, 1)
    units = (m[..., i, :] - m[..., j, :]).var(-1, ddof=1)
    n = len(i)
    sharing = 2 * (k - 2) / (n - 1) if n > 1 else 0.0
    return units, 0.25 * sharing


def pair_statistics(m: np.ndarray, paired: bool, alpha: float, family: int) -> np.ndarray:
    """(N,) the largest |t| / base_quantile over every pair of the k configurations of each null sweep m[N, k, S]
    (run means), as stats.judge computes a pair's t in moderated mode with either as the reference."""
    n, k, s = m.shape
    d = s - 1
    i, j = np.triu_indices(k, 1)
    diff = m[:, i].mean(-1) - m[:, j].mean(-1)
    if paired:
        units, overlap = pair_units(m)
        moderated, df = moderate(units, d, overlap=overlap)
    else:
        v, df = moderate(m.var(-1, ddof=1), d)
        moderated = v[:, i] + v[:, j]
    se = np.sqrt(moderated / s)
    t = np.abs(diff) / np.where(se > 0, se, np.inf)
    return t.max(-1) / base_quantile(alpha, family, df)


@functools.lru_cache(maxsize=256)
def calibration(k: int, seeds: int, alpha: float, paired: bool, family: int | None = None) -> float:
    """The factor on base_quantile that keeps P(any pair's |t| past it) <= alpha at every noise pattern of the
    family, for k configurations (all pairs of ``family``, default k) x ``seeds`` seeds: the largest, over the
    patterns, of the (1 - alpha) quantile of pair_statistics. Deterministic (a fixed stream per design), so it is
    kept in $GRPO_SWEEP_CACHE once simulated (0.1-5 s a design; a seeds sweep replays every look each round)."""
    family = k if family is None else family
    if paired and k == 2:  # one pair borrows nothing: its t has exactly S - 1 degrees of freedom whatever the noise
        return 1.0
    key = f"{k} {seeds} {alpha!r} {int(paired)} {family}"
    stored = _stored()
    if key in stored:
        return float(stored[key])
    value = _simulate(k, seeds, alpha, paired, family)
    _store(key, value)
    return value


def _simulate(k: int, seeds: int, alpha: float, paired: bool, family: int) -> float:
    rng = np.random.default_rng([20261207, k, seeds, int(paired), family, int(round(alpha * 1e6))])
    sims = SIMULATIONS if k <= 12 else max(2000, SIMULATIONS * 12 // k)
    worst = 0.0
    # the same draws under every pattern (common random numbers): the largest of the patterns' quantiles is then
    # not inflated by their independent Monte Carlo errors
    z = rng.standard_normal((sims, k, seeds))
    w = rng.standard_normal((sims, 1, seeds))
    for sd, load in patterns(k, paired):
        m = sd[None, :, None] * (load[None, :, None] * w + np.sqrt(1 - load**2)[None, :, None] * z)
        worst = max(worst, float(np.quantile(pair_statistics(m, paired, alpha, family), 1 - alpha)))
    return worst


def _cache_file() -> Path:
    """The calibrations simulated so far, under a name that changes with this module's code and numpy's version
    (either changes the numbers)."""
    from ..models.tiny import cache_root

    digest = hashlib.sha256(Path(__file__).read_bytes() + np.__version__.encode()).hexdigest()[:12]
    return cache_root() / f"verdict-calibration-{digest}.json"


def _stored() -> dict:
    try:
        return json.loads(_cache_file().read_text())
    except (OSError, ValueError):
        return {}


def _store(key: str, value: float) -> None:
    """Added to the file atomically; a write lost to another process's is simulated again later, and a cache that
    cannot be written costs only the time."""
    from ..run.files import write_text_atomic

    try:
        write_text_atomic(_cache_file(), json.dumps({**_stored(), key: value}, indent=0) + "\n")
    except OSError:
        pass


def critical(alpha: float, family: int, seeds: int, df, paired: bool, k: int | None = None) -> np.ndarray:
    """The moderated critical value, in standard errors, of a pair whose variance carries ``df`` degrees of freedom."""
    factor = calibration(k or family, seeds, alpha, paired, family)
    return factor * base_quantile(alpha, family, df)
