"""Is a configuration really better than another, or is it noise? The one engine every verdict comes from.

``judge(y, ...)`` takes a design y[..., k, S, Q] (configurations x seeds x per-question outcomes, or Q = 1 per-run
values; any leading batch axes) and returns a typed ``Judgement``: each configuration against a reference, its
difference, standard error, family-wise critical value, the difference it detects with 80 % power and the call.
Everything that prints or stores a verdict goes through it: ``compare`` below (a grid's runs), the seeds sweeper's
looks and verdicts (search/seeds/sequential.py: this engine with a budget over its looks), the batch simulations
(search/simulate.py, bench/verdict_battery.py). Words are made from its results in reading/wording.py.

- **Ranking and reference** come from validation (``rank_value``, normally ``summary.objective`` = val_accuracy);
  the reference is the best complete configuration (of configurations tied on it, the first in the sweep's order).
- **The verdict** (``better`` / ``worse`` / ``indistinguishable``) is about the test counterpart (``value``, and
  ``outcomes`` per question when every run has them).
- **Noise: each configuration its own.** The variance of a difference of two configuration means is each one's
  own variance of a run's mean over its S seeds (S - 1 degrees of freedom), divided by S, plus the pair's
  configuration x question interaction over the Q paired questions (estimated from the per-question differences
  less the runs' residual noise: ~Q - 1 degrees of freedom). One variance pooled over configurations would give
  3 seeds (k - 1)(S - 1) degrees of freedom, but when configurations differ in noise (an lr sweep whose high rates
  are unstable), the validation-best reference is usually a noisy one and the pooled standard error is wrong, not
  just noisy: measured from outside, 0.09-0.12 false verdicts where 0.05 was promised.
- **The critical value** is Tukey's studentized range over the ``family`` (all k configurations) at each variance
  part's degrees of freedom, weighted by the part's share (Dunnett's C, Dunnett 1980): at S - 1 for the seeds,
  at infinity for the questions. Games-Howell (Welch's degrees of freedom) is liberal at 2-4 degrees of freedom;
  this is not. The selection of the reference on validation, which shares each run's luck with test, is what the
  family over all configurations pays for.
- **The cost** is power at few seeds: with 2 seeds a configuration's noise has one degree of freedom (t_{0.975, 1}
  = 12.7), with 3 seeds two. Nothing at 2 or 3 seeds can tell whether one configuration is noisier than another,
  so the engine does not assume it; the words say what another seed would buy (``Judgement.detectable``).
- **Two modes.** All of the above is ``strict`` (``mode="strict"``). The default, ``moderated`` (moderation.py),
  spends what the design shares: each pair's seed part from its seed-paired run-mean differences (the design's
  seeds are shared: ``paired``), moderated towards a prior fitted on every pair of the sweep and never below its
  own, floored at the within-run noise of the pair's per-question differences, with a critical value simulated
  for k x S over noise patterns up to 4x apart (``moderation.SPREAD_LIMIT``) and seed correlations -0.3 to 0.9;
  the questions' part and Dunnett's C weighting as in strict. ``outside_family`` names a configuration whose
  spread looks past that family.
- Configurations missing a seed the others have are ``incomplete`` (the seeds named); with one seed there is
  ``no verdict`` (add seeds); every comparison states the smallest difference the design detects with 80 % power
  (``mde``) and how many seeds would resolve the observed difference (``seeds_needed``). A configuration whose
  every outcome is the same (collapsed) has no variance of its own and widens no other comparison.

bench/verdict_battery.py measures the error and the power in every regime above. Pure arithmetic over numpy and
scipy.stats (imported where used: the login node imports this module, not scipy); no torch, no files
(grpo_sweep/reading/results.py reads the run directories). Every interval of the project is here: the verdicts',
a configuration's test figure (``test_interval``), the plots' t band (``t_quantile``).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Hashable, Mapping, Sequence

import numpy as np

from ..run.record import OUTCOME_FIELDS, test_counterpart

DIRECTIONS = ("maximize", "minimize")
# How the seed part of a comparison's noise is estimated (``verdicts:`` of the sweepers, ``--verdicts`` of the report):
# strict, each configuration's own variance alone (S - 1 degrees of freedom, any noise pattern); moderated, the
# seed-paired variance where the design shares seeds, moderated across configurations, with a critical value
# calibrated by simulation over configurations up to moderation.SPREAD_LIMIT times noisier than each other.
STRICT, MODERATED = "strict", "moderated"
VERDICT_MODES = (MODERATED, STRICT)
DEFAULT_VERDICTS = MODERATED
REFERENCE = "reference"
# The verdict keywords (``Comparison.verdict``); ``note`` says why and what would resolve it.
VERDICTS = ("better", "worse", "indistinguishable", "incomplete", "no verdict", REFERENCE, "-")
POWER = 0.8
MAX_SEEDS = 100  # seeds_needed looks this far; beyond it the question count (not seeds) limits the design


def is_seed(key: str) -> bool:
    """An override or parameter that only picks a seed (``trainer.seed``, ``+data.seed``): runs differing only in
    these are replicates of one configuration."""
    return key.lstrip("+~").rsplit(".", 1)[-1] == "seed"


def t_quantile(p: float, dof: int) -> float:
    """The ``p`` quantile of Student's t with ``dof`` degrees of freedom (t_{0.975, 2} = 4.303)."""
    from scipy.stats import t

    if not 0.0 < p < 1.0:
        raise ValueError(f"t_quantile: p={p!r} must be strictly between 0 and 1")
    if int(dof) != dof or dof < 1:
        raise ValueError(f"t_quantile: dof={dof!r} must be a whole number >= 1")
    return float(t.ppf(p, dof))


@functools.lru_cache(maxsize=64)
def normal_quantile(p: float) -> float:
    """The ``p`` quantile of the standard normal (1.96 for 0.975)."""
    from scipy.stats import norm

    return float(norm.ppf(p))


# --- the studentized range distribution (Tukey) ----------------------------------------------------------------------
# scipy integrates it numerically: a quantile takes ~0.1 s, a cdf ~6 ms (df = inf: ~1 ms). So a quantile is cached
# per (p, k, df), and the decisions that only need "is this ratio past the critical value" ask the cdf instead.


@functools.lru_cache(maxsize=4096)
def _range_quantile(p: float, k: int, df: float) -> float:
    from scipy.stats import studentized_range

    return float(studentized_range.ppf(p, k, df))


def _check_range(name: str, k: int, df: np.ndarray) -> None:
    if int(k) != k or k < 2:
        raise ValueError(f"{name}: k={k!r} must be a whole number >= 2")
    if np.any(np.isnan(df)) or np.any(df < 1):
        raise ValueError(f"{name}: df={df.tolist()!r} must be >= 1 (or inf)")


def studentized_range_quantile(p: float, k: int, df) -> np.ndarray | float:
    """The ``p`` quantile of the studentized range of ``k`` means, ``df`` degrees of freedom (array or scalar;
    real >= 1, or inf). q_{0.95}(3, 10) = 3.877; with k = 2 it is sqrt(2) * t_{(1+p)/2, df}."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"studentized_range_quantile: p={p!r} must be strictly between 0 and 1")
    scalar = np.ndim(df) == 0
    df = np.atleast_1d(np.asarray(df, float))
    _check_range("studentized_range_quantile", k, df)
    unique, index = np.unique(df, return_inverse=True)
    q = np.array([_range_quantile(float(p), int(k), float(d)) for d in unique])[index.reshape(df.shape)]
    return float(q[0]) if scalar else q


# --- the engine: every verdict of the project is computed here ------------------------------------------------------


@dataclass
class Judgement:
    """Every configuration of a design y[..., k, S, Q] against one reference, arrays (..., k) over any leading batch
    axes (a batch of simulated sweeps). The reference's own row has ``se`` 0 and no call."""

    reference: np.ndarray  # (...,) int: the row compared against
    means: np.ndarray  # a configuration's mean over its seeds and questions
    delta: np.ndarray  # mean minus the reference's
    se: np.ndarray  # standard error of delta; 0 for the reference and where nothing varies
    crit: np.ndarray  # the family-wise critical value, in standard errors
    power_t: np.ndarray  # how far past crit, in se, a difference is found with 80 % power (mde = (crit + power_t) se)
    call: np.ndarray  # int: sign(delta) where the difference is called (-1 below the reference, +1 above), else 0
    var_runs: np.ndarray  # each configuration's variance of a run's mean over seeds (S - 1 degrees of freedom)
    var_questions: np.ndarray  # the configuration x question part of var(delta) (0 without per-question outcomes)
    seeds: int
    questions: int
    family: int  # configurations in the family the intervals hold over
    alpha: float
    mode: str = STRICT  # one of VERDICT_MODES
    paired: bool = False  # the seed part of a pair's variance from its seed-paired differences
    var_pair: np.ndarray | None = None  # a pair's per-run variance of its difference as used (moderated, floored)
    prior_df: np.ndarray | None = None  # (...,) moderated: the prior's degrees of freedom d0 (0: none borrowed)
    configurations: int = 0  # k judged (the moderated critical value is calibrated for k x seeds)

    @property
    def low(self) -> np.ndarray:
        return self.delta - self.crit * self.se

    @property
    def high(self) -> np.ndarray:
        return self.delta + self.crit * self.se

    @property
    def mde(self) -> np.ndarray:
        """The smallest |delta| this design detects with 80 % power, per configuration (0 where se is 0)."""
        return (self.crit + self.power_t) * self.se

    @property
    def pair_variance(self) -> np.ndarray:
        """Per configuration, the per-run variance of its difference from the reference as the verdict used it."""
        return self.var_runs + _at(self.var_runs, self.reference) if self.var_pair is None else self.var_pair

    @property
    def seed_share(self) -> np.ndarray:
        """The share of var(delta) that comes from the two configurations' seeds (the rest is questions)."""
        return _seed_share(self.pair_variance / self.seeds, self.se**2)

    def _noise(self) -> Noise | None:
        if self.mode == STRICT:
            return None
        return Noise(self.configurations, self.paired, self.prior_df[..., None], self.seeds)

    def detectable(self, seeds) -> np.ndarray:
        """The mde each configuration would have with ``seeds`` seeds each (same variances): what more seeds buy."""
        return detectable(self.pair_variance, self.var_questions, seeds, self.family, self.alpha, self._noise())

    def seeds_needed(self, delta) -> np.ndarray:
        """Seeds per configuration for 80 % power at a true difference |``delta``| (per configuration): the fewest
        S' in S + 1 .. MAX_SEEDS whose detectable difference is at most it; 0 where even MAX_SEEDS seeds are not
        enough (or the questions' part alone is too large: more questions, not seeds, would resolve it)."""
        return seeds_needed(
            self.pair_variance, self.var_questions, delta, self.seeds, self.family, self.alpha, self._noise()
        )


@functools.lru_cache(maxsize=1024)
def _power_margin(crit: float, df: float, power: float = 0.8) -> float:
    """How far past the critical value, in estimated standard errors, a true difference must lie to be called with
    ``power``. With df degrees of freedom the estimated se scatters (two seeds: by a factor of ~3 either way), so
    crit + t_power undersells it: the noncentral t's lambda with P(T_df(lambda) > crit) = power, over the median of
    s / sigma, so that a difference of the printed size (its median over sweeps) is found that often."""
    from scipy.optimize import brentq
    from scipy.stats import chi2, nct, norm

    if not math.isfinite(df):
        return float(norm.ppf(power))
    lam = brentq(lambda x: nct.sf(crit, df, x) - power, crit, 20 * crit + 40)
    return float(lam / math.sqrt(chi2.median(df) / df) - crit)


def _margins(crit_seed, df, power: float) -> np.ndarray:
    """_power_margin over an array of critical values (they take a few distinct values: cached)."""
    crit_seed = np.asarray(crit_seed, float)
    df = np.broadcast_to(np.asarray(df, float), crit_seed.shape)
    pairs = {(float(c), float(d)) for c, d in zip(crit_seed.ravel(), df.ravel())}
    table = {pair: _power_margin(*pair, power) for pair in pairs}
    return np.array([table[(float(c), float(d))] for c, d in zip(crit_seed.ravel(), df.ravel())]).reshape(
        crit_seed.shape
    )


def _at(values: np.ndarray, index: np.ndarray) -> np.ndarray:
    """values[..., index] broadcast back over the last axis (each batch row's reference)."""
    return np.take_along_axis(values, np.asarray(index)[..., None], -1)


def _critical(family: int, df, alpha: float) -> np.ndarray:
    """Tukey's q_{1-alpha}(family, df) / sqrt(2), vectorised over integer-valued df (and inf)."""
    return np.asarray(studentized_range_quantile(1 - alpha, family, df)) / math.sqrt(2)


def _weighted(share, at_seeds, at_questions):
    # Cochran's weighting of a sum of two variance parts with their own degrees of freedom (Dunnett's C): the seed
    # part has S - 1, the questions' part (~Q - 1) is treated as known
    return share * at_seeds + (1 - share) * at_questions


def _seed_share(var_seed, var) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(var > 0, var_seed / np.where(var > 0, var, 1.0), 1.0)


@dataclass(frozen=True)
class Noise:
    """How a moderated verdict's seed part was estimated: k configurations judged, paired by seed or not, and the
    prior degrees of freedom borrowed from the others (moderation.py). None where strict."""

    configurations: int
    paired: bool
    prior_df: np.ndarray  # broadcasts against the comparisons
    # the seeds the critical value is calibrated at: the design's. A projection to more seeds (detectable,
    # seeds_needed) keeps its factor, which falls with seeds: the projection errs towards more seeds, and costs no
    # simulation per seed count asked (20 configurations: ~5 s each)
    seeds: int


def _crit_and_margin(
    share, df, family: int, alpha: float, power: float = POWER, noise: Noise | None = None, seeds=None
) -> tuple[np.ndarray, np.ndarray]:
    """The critical value and the power margin (how far past it a difference is found with ``power``), in standard
    errors, for a difference whose variance is ``share`` seeds (df degrees of freedom) and the rest questions.
    Strict: Tukey's range at df; moderated (``noise``): the calibrated critical value at df = S - 1 + d0."""
    if noise is None:
        crit_seed = _critical(family, df, alpha)
        margin = _margins(crit_seed, df, power)
    else:
        from . import moderation

        crit_seed = np.asarray(moderation.critical(alpha, family, noise.seeds, df, noise.paired, noise.configurations))
        # the margin at the seeds' own degrees of freedom, not the borrowed ones: a pair's moderated variance is
        # never below its own estimate, which scatters as S - 1 degrees of freedom do (with S - 1 + d0 the printed
        # detectable difference was found with only 0.6-0.75 power in the battery); rounded, so a batch of sweeps
        # asks for few values
        own = np.broadcast_to(np.asarray(seeds, float) - 1, np.shape(crit_seed))
        margin = _margins(np.round(crit_seed, 2), own, power)
    crit = _weighted(share, crit_seed, _critical(family, np.inf, alpha))
    return crit, _weighted(share, margin, _power_margin(0.0, math.inf, power))


def detectable(
    var_seed_pair, var_questions, seeds, family: int, alpha: float, noise: Noise | None = None
) -> np.ndarray:
    """The 80 %-power detectable difference of a pair whose two configurations' per-run variances sum to
    ``var_seed_pair`` (moderated: the pair's moderated variance) and whose question part is ``var_questions``, at
    ``seeds`` seeds each (arrays broadcast)."""
    seeds = np.asarray(seeds, float)
    var_seed = np.asarray(var_seed_pair, float) / seeds
    var = var_seed + np.asarray(var_questions, float)
    df = seeds - 1 if noise is None else seeds - 1 + noise.prior_df
    crit, power = _crit_and_margin(_seed_share(var_seed, var), df, family, alpha, noise=noise, seeds=seeds)
    return (crit + power) * np.sqrt(var)


def seeds_needed(
    var_seed_pair, var_questions, delta, seeds: int, family: int, alpha: float, noise: Noise | None = None
) -> np.ndarray:
    """See Judgement.seeds_needed; elementwise. The detectable difference falls with S, so a bisection finds it."""
    var_seed_pair, var_questions, delta = np.broadcast_arrays(
        np.asarray(var_seed_pair, float), np.asarray(var_questions, float), np.abs(np.asarray(delta, float))
    )
    if delta.ndim == 0:
        return seeds_needed(var_seed_pair[None], var_questions[None], delta[None], seeds, family, alpha, noise)[0]
    out = np.zeros(delta.shape, int)
    for i in zip(*np.nonzero(delta > 0)):
        one = None
        if noise is not None:
            one = Noise(
                noise.configurations, noise.paired, np.broadcast_to(noise.prior_df, delta.shape)[i], noise.seeds
            )

        def detects(s: int) -> bool:
            return float(detectable(var_seed_pair[i], var_questions[i], s, family, alpha, one)) <= delta[i]

        if seeds >= MAX_SEEDS or not detects(MAX_SEEDS):
            continue
        low, high = seeds, MAX_SEEDS  # detects(high); low does not (or is the design itself)
        while high - low > 1:
            mid = (low + high) // 2
            low, high = (low, mid) if detects(mid) else (mid, high)
        out[i] = high
    return out


def judge(
    y,
    alpha: float = 0.05,
    direction: str = "maximize",
    reference=None,
    rank=None,
    family: int | None = None,
    floor=None,
    margin: float | None = None,
    confirm: Judgement | None = None,
    mode: str = DEFAULT_VERDICTS,
    paired: bool = True,
) -> Judgement:
    """Every configuration of ``y`` (..., k >= 2 configurations, S >= 2 seeds, Q questions: per-question outcomes,
    or Q = 1 per-run values) against a reference, with (1 - ``alpha``) intervals that hold for every pair of the
    ``family`` (default k) configurations at once.

    ``reference``: the row each is compared with (int, or (...,) ints); default: the best mean of ``rank`` (the
    validation design, same leading shape, any trailing axes) or of y itself; ties: the first. ``floor``: (..., k)
    lower bounds of each configuration's per-run variance (the binomial p(1-p)/n of an accuracy without per-question
    outcomes). ``margin``: a call also needs the difference past the critical value by this power's quantile
    (0.8: at least what the design detects with 80 % power). ``confirm``: another judgement (validation's, at its
    own alpha) that must call the same configurations the same way round. ``mode``: ``strict`` (what follows) or
    ``moderated`` (moderation.py: seed-paired where ``paired``, the seeds being shared by design, variances moderated
    across configurations, a simulated critical value); ``paired`` is read in moderated mode only.

    The noise model: each configuration's own variance of a run's mean over its seeds (S - 1 degrees of freedom:
    configurations may differ in noise, and a noisy one is usually the validation-best under the null), plus the
    configuration x question interaction of the pair (question-level noise, many degrees of freedom). The critical
    value weights Tukey's studentized range at each part's degrees of freedom (Dunnett's C). The selection of the
    reference by validation, which shares each run's luck with test, is covered by the all-pairs family.
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"judge: direction={direction!r}; use maximize or minimize")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"judge: alpha={alpha!r} must be strictly between 0 and 1")
    check_mode(mode, "judge: mode")
    y = np.asarray(y, float)
    if y.ndim < 3:
        raise ValueError(f"judge: y has shape {y.shape}; it needs (configurations, seeds, questions)")
    k, n_seeds, n_questions = y.shape[-3:]
    if k < 2 or n_seeds < 2:
        raise ValueError(f"judge: {k} configurations x {n_seeds} seeds; a verdict needs >= 2 of each")
    if not np.isfinite(y).all():
        raise ValueError("judge: y holds a value that is not finite")
    family = k if family is None else int(family)
    if family < k:
        raise ValueError(f"judge: family={family} is smaller than the {k} configurations judged")
    sign = 1.0 if direction == "maximize" else -1.0
    means = y.mean((-2, -1))
    if reference is None:
        basis = means if rank is None else np.asarray(rank, float).reshape(*y.shape[:-2], -1).mean(-1)
        reference = np.argmax(sign * basis, -1)
    reference = np.broadcast_to(np.asarray(reference, int), y.shape[:-3]).copy()
    run_means = y.mean(-1)
    var_runs = run_means.var(-1, ddof=1)
    if floor is not None:
        var_runs = np.maximum(var_runs, np.asarray(floor, float))
    if n_questions > 1:
        # var over questions of the pair's per-question difference estimates 2 v_cq + (v_e + v_e') / S; the residual
        # mean squares remove the second part (v_cq's degrees of freedom are ~Q - 1: its floor at 0 moves little)
        per_question = y.mean(-2)
        diff = per_question - np.take_along_axis(per_question, reference[..., None, None], -2)
        resid = y - run_means[..., None] - per_question[..., None, :] + means[..., None, None]
        ms_e = (resid**2).sum((-2, -1)) / ((n_seeds - 1) * (n_questions - 1))
        var_questions = np.maximum(0.0, diff.var(-1, ddof=1) - (ms_e + _at(ms_e, reference)) / n_seeds) / n_questions
    else:
        var_questions = np.zeros_like(var_runs)
    is_reference = np.arange(k) == reference[..., None]
    noise, var_pair, prior_df = None, var_runs + _at(var_runs, reference), None
    if mode == MODERATED:
        from .moderation import moderate, pair_units

        if paired:
            diff = run_means - np.take_along_axis(run_means, reference[..., None, None], -2)
            units = diff.var(-1, ddof=1)
            if n_questions > 1:
                # paired, the floor is the within-run noise of the pair's per-question differences: two runs of one
                # seed answer alike more often than chance (the same data order, initialisation, generations)
                d = y - np.take_along_axis(y, reference[..., None, None, None], -3)
                d_resid = d - d.mean(-1, keepdims=True) - d.mean(-2, keepdims=True) + d.mean((-2, -1), keepdims=True)
                within_pair = (d_resid**2).sum((-2, -1)) / ((n_seeds - 1) * (n_questions - 1)) / n_questions
            else:
                within_pair = np.zeros_like(units)
            if floor is not None:
                units = np.maximum(units, np.asarray(floor, float) + _at(np.asarray(floor, float), reference))
            # the prior from every pair of configurations, not the reference's alone (they all share its noise)
            moderated, df = moderate(np.where(is_reference, np.nan, units), n_seeds - 1, *pair_units(run_means))
            var_pair = np.maximum(np.where(is_reference, 0.0, moderated), within_pair)
        else:
            # the question-level floor: a run's mean varies at least by its own within-run noise, the residual mean
            # square of its seeds x questions table over Q (known to (S - 1)(Q - 1) degrees of freedom); 0 per run
            within = ms_e / n_questions if n_questions > 1 else np.zeros_like(var_runs)
            # a collapsed configuration (no variance) is left out of the prior and keeps its 0
            moderated, df = moderate(np.where(var_runs > 0, var_runs, np.nan), n_seeds - 1)
            own = np.maximum(np.where(var_runs > 0, moderated, 0.0), within)
            var_pair = own + _at(own, reference)
        prior_df = np.asarray(df - (n_seeds - 1))
        noise = Noise(k, paired, prior_df[..., None], n_seeds)
    var_seed = np.where(is_reference, 0.0, var_pair) / n_seeds
    var = np.where(is_reference, 0.0, var_seed + var_questions)
    var_questions = np.where(is_reference, 0.0, var_questions)
    se = np.sqrt(var)
    share = _seed_share(var_seed, var)
    df = n_seeds - 1 if noise is None else n_seeds - 1 + noise.prior_df
    crit, power_t = _crit_and_margin(share, df, family, alpha, noise=noise, seeds=n_seeds)
    delta = means - _at(means, reference)
    need = crit + _crit_and_margin(share, df, family, alpha, margin, noise, n_seeds)[1] if margin else crit
    called = (se > 0) & (np.abs(delta) > need * se) & ~is_reference
    if confirm is not None:
        called &= confirm.call == np.sign(delta)
    return Judgement(
        reference,
        means,
        delta,
        se,
        crit,
        power_t,
        (np.sign(delta) * called).astype(int),
        var_runs,
        var_questions,
        n_seeds,
        n_questions,
        family,
        alpha,
        mode,
        bool(paired) and mode == MODERATED,
        var_pair,
        prior_df,
        k,
    )


def check_mode(mode: str, where: str = "verdicts") -> str:
    """``mode`` if it is one of VERDICT_MODES, else a one-line error naming it."""
    if mode not in VERDICT_MODES:
        raise ValueError(f"{where}={mode!r}: use {' or '.join(VERDICT_MODES)}")
    return mode


# --- the public comparison -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunRecord:
    """One run as the comparison sees it.

    ``rank_value``: what ranks (the validation objective); ``value``: the test counterpart the verdict is about
    (None: not measured, then every run falls back to its ``rank_value``); ``n_questions``: how many questions
    ``value`` is an accuracy over (None: not an accuracy); ``outcomes``: {question key: 0/1 or None} on test
    (None: no per-question file); ``rank_n_questions``: the same as ``n_questions`` for ``rank_value``.
    """

    seed: Hashable
    rank_value: float | None
    value: float | None = None
    n_questions: int | None = None
    outcomes: Mapping[str, float | None] | None = None
    rank_n_questions: int | None = None


# why a comparison's verdict is what it is (Comparison.reason)
REASONS = (
    "reference",
    "incomplete",
    "no result",
    "one seed",
    "no noise",
    "indistinguishable",
    "not confirmed",
    "validation does not call it",
    "running",
    "no look",
    "",
)


@dataclass(frozen=True)
class Design:
    """What a verdict was computed on: k configurations compared, each on ``seeds`` seeds and ``questions`` paired
    questions (None: per-run values), at family-wise ``alpha``; on test or, where not every run has a test value, on
    the validation objective; ``floored``: per-run values with the binomial floor of an accuracy. An adaptive
    design also names its settings (min_seeds, max_seeds, alpha shared by the looks)."""

    configurations: int
    seeds: int
    questions: int | None
    alpha: float
    on_test: bool = True
    floored: bool = False
    adaptive: tuple | None = None  # (min_seeds, max_seeds) of hydra/sweeper=seeds
    mode: str = STRICT  # how the seed part of the noise was estimated (VERDICT_MODES)
    paired: bool = False  # moderated: seed-paired differences (the design shares seeds)
    prior_df: float | None = None  # moderated: the degrees of freedom borrowed from the other configurations


@dataclass
class Comparison:
    """One configuration against the reference (the best complete configuration on validation)."""

    config: str
    seeds: tuple = ()  # the seeds its numbers use
    rank_mean: float | None = None  # validation objective, mean over those seeds
    mean: float | None = None  # the test counterpart, mean over those seeds (and the common questions)
    std: float | None = None  # sd over seeds of the per-run test value
    delta: float | None = None  # mean - reference's mean (None for the reference and without a verdict)
    low: float | None = None  # family-wise (1 - alpha) interval of delta
    high: float | None = None
    verdict: str = "-"  # one of VERDICTS
    note: str = ""  # why, and what would resolve it
    missing_seeds: tuple = ()  # seeds the complete configurations have and this one lacks
    extra_seeds: tuple = ()  # seeds it has that the design does not use (too few configurations ran them)
    mde: float | None = None  # smallest true |delta| detected with 80 % power at this design
    seeds_needed: int | None = None  # seeds per configuration for 80 % power at the observed |delta|
    method: str = ""  # how the intervals were made, one sentence for reports (reading/wording.py)
    is_best: bool = False
    n_questions: int | None = None  # questions paired per seed (None: per-run values)
    tied: tuple = ()  # the reference's: the configurations whose validation mean equals its own
    reason: str = ""  # why the verdict is what it is, one of REASONS (words: reading/wording.py)
    se: float | None = None  # standard error of delta
    mde_one_more: float | None = None  # the mde with one more seed each (what a further seed buys)
    seed_share: float | None = None  # the share of delta's variance that comes from seeds (the rest: questions)
    design: Design | None = None  # the design the verdict comes from
    against: str | None = None  # hydra/sweeper=seeds: the leader it was judged against, when not the reference
    validation: bool | None = None  # hydra/sweeper=seeds: whether validation's budgeted test called it
    stopped: str = ""  # hydra/sweeper=seeds: why it got no more seeds
    spread: float | None = None  # moderated: its run-to-run variance over the others' pooled, when past the family


def verdict_source(metric: str | None) -> tuple[str | None, str | None, bool]:
    """What the verdict reads for an objective named ``metric`` (summary.optimized_metric): the summary key of its
    test counterpart (summary.test_counterpart: ``val_rewards.fmt`` -> ``test_rewards.fmt``; None when it has none:
    then the objective itself is compared), the outcomes/test.jsonl field with its per-question values (None: not
    per question), and whether it is an accuracy over questions (binomial floor)."""
    value_key = test_counterpart(metric)
    field = OUTCOME_FIELDS.get(value_key) if value_key else None
    return value_key, field, field is not None


def seed_text(seed: Hashable) -> str:
    """A seed as a reader would type it: ``trainer.seed=3`` from ``("trainer.seed=3",)`` (a run's seed overrides,
    results.SweepRun.seed); other values as they print."""
    if isinstance(seed, tuple):
        return " ".join(map(str, seed)) or "(no seed)"
    return str(seed)


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _mean(values):
    return sum(values) / len(values) if values else None


def sd(values) -> float | None:
    """The sample standard deviation (None under two values): the one every figure, table and plot uses."""
    if len(values) < 2:
        return None
    m = math.fsum(values) / len(values)
    # float arithmetic: statistics.stdev is exact (fractions) and ~20x slower, at tens of thousands of steps a sweep
    return math.sqrt(math.fsum((v - m) ** 2 for v in values) / (len(values) - 1))


def standard_error(values) -> float | None:
    """The standard error of ``values``' mean, sd / sqrt(n) (None under two values): a ranking look's, or a paired
    difference's."""
    spread = sd(values)
    return None if spread is None else spread / math.sqrt(len(values))


def mean_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high) over seeds, as the plots draw a band: a t interval of the mean with >= 3 values, their
    range with 2 (a t interval on one degree of freedom is 12.7 sd wide: no band worth drawing), the value with 1."""
    if not values:
        raise ValueError("mean_interval: no values")
    n = len(values)
    mean = math.fsum(values) / n
    if n == 1:
        return mean, mean, mean
    if n == 2:
        return mean, min(values), max(values)
    half = t_quantile(0.5 + confidence / 2, n - 1) * standard_error(values)
    return mean, mean - half, mean + half


@dataclass
class _Seed:
    rank: float
    value: float
    n: int | None
    outcomes: dict | None


def _merge(records: Sequence[RunRecord], use_test: bool) -> dict:
    """{seed: _Seed}: a seed run twice counts once, as the mean of its runs (never paired twice)."""
    by_seed: dict = {}
    for r in records:
        if not _finite(r.rank_value):
            continue
        value, n = (r.value, r.n_questions) if use_test else (r.rank_value, r.rank_n_questions)
        by_seed.setdefault(r.seed, []).append((float(r.rank_value), float(value), n, r.outcomes if use_test else None))
    out = {}
    for seed, runs in by_seed.items():
        outcomes = None
        if all(o is not None for *_, o in runs):
            keys = set.intersection(*(set(o) for *_, o in runs))
            outcomes = {
                key: _mean([o[key] for *_, o in runs]) if all(_finite(o[key]) for *_, o in runs) else None
                for key in keys
            }
        ns = {n for _, _, n, _ in runs}
        out[seed] = _Seed(
            _mean([r for r, *_ in runs]), _mean([v for _, v, *_ in runs]), ns.pop() if len(ns) == 1 else None, outcomes
        )
    return out


def compare(
    groups: Mapping[str, Sequence[RunRecord]],
    direction: str = "maximize",
    alpha: float = 0.05,
    mode: str = DEFAULT_VERDICTS,
) -> list[Comparison]:
    """Every configuration against the best on validation, with family-wise ``alpha`` verdicts on test (``judge``
    over the complete configurations' runs, on the seeds they share, in ``mode``). The complete configurations
    share every seed of the design by construction (a seed is a run's seed overrides: the same trainer.seed gives
    every configuration the same data order, adapter initialisation and first generations), so a moderated verdict
    pairs them by seed; an incomplete one is not judged.

    ``groups``: {configuration: its runs}. Returns one Comparison per configuration: complete configurations by
    validation mean (best first, the reference), then incomplete ones, then those without any result (``-``); each
    with its numbers and ``reason``, no words (reading/wording.py describes them).
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"compare: direction={direction!r}; use maximize or minimize")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"compare: alpha={alpha!r} must be strictly between 0 and 1")
    check_mode(mode)
    ranked = [r for records in groups.values() for r in records if _finite(r.rank_value)]
    # the verdict is about the test counterpart only when every ranked run has one: a sweep half old, half new
    # falls back to the validation objective for all, rather than mixing two measurements
    use_test = bool(ranked) and all(_finite(r.value) for r in ranked)
    by_config = {config: _merge(records, use_test) for config, records in groups.items()}

    with_results = [c for c, seeds in by_config.items() if seeds]
    # the design's seeds: those at least half of the configurations ran (one configuration's extra replicate
    # does not make every other one incomplete)
    count: dict = {}
    for c in with_results:
        for seed in by_config[c]:
            count[seed] = count.get(seed, 0) + 1
    design = [
        s
        for s in sorted(count, key=lambda s: (str(type(s)), s if isinstance(s, (int, float)) else str(s)))
        if 2 * count[s] >= len(with_results)
    ]
    complete = [c for c in with_results if all(s in by_config[c] for s in design)]
    sign = -1.0 if direction == "maximize" else 1.0

    rows: dict[str, Comparison] = {}
    for c in groups:
        seeds = by_config[c]
        used = [s for s in design if s in seeds] if c in complete else list(seeds)
        values = [seeds[s].value for s in used]
        rows[c] = Comparison(
            c,
            tuple(used),
            _mean([seeds[s].rank for s in used]),
            _mean(values),
            sd(values),
            missing_seeds=tuple(s for s in design if s not in seeds) if seeds else (),
            extra_seeds=tuple(s for s in seeds if s not in design) if c in complete else (),
        )
    complete.sort(key=lambda c: sign * rows[c].rank_mean)  # stable: ties keep the given order
    incomplete = sorted((c for c in with_results if c not in complete), key=lambda c: sign * rows[c].rank_mean)
    order = complete + incomplete + [c for c in groups if c not in with_results]
    out = [rows[c] for c in order]

    for c in incomplete:
        rows[c].verdict, rows[c].reason = "incomplete", "incomplete"
    for c in groups:
        if c not in with_results:
            rows[c].reason = "no result"
    if not complete:
        return out
    reference = rows[complete[0]]
    reference.is_best, reference.verdict, reference.reason = True, REFERENCE, REFERENCE
    reference.tied = tuple(
        c for c in complete[1:] if math.isclose(rows[c].rank_mean, reference.rank_mean, rel_tol=1e-9, abs_tol=1e-12)
    )
    others = complete[1:]
    if len(design) < 2:
        for c in others:
            rows[c].verdict, rows[c].reason = "no verdict", "one seed"
        return out
    if not others:
        return out

    y, n_questions, floor = design_matrix([by_config[c] for c in complete], design)
    judged = judge(y, alpha, direction, reference=0, floor=floor, mode=mode, paired=True)
    prior = None if judged.prior_df is None else float(judged.prior_df)
    for row in out:
        row.design = Design(
            len(complete),
            len(design),
            n_questions,
            alpha,
            use_test,
            floor is not None,
            mode=mode,
            paired=judged.paired,
            prior_df=prior,
        )
    for i, ratio in outside_family(y, mode).items():
        rows[complete[i]].spread = ratio
    more = judged.detectable(len(design) + 1)
    for i, c in enumerate(complete):
        rows[c].mean, rows[c].n_questions = float(judged.means[i]), n_questions
    for c in others:
        i, row = complete.index(c), rows[c]
        row.delta, row.se = float(judged.delta[i]), float(judged.se[i])
        if row.se <= 0:
            row.verdict, row.reason = "no verdict", "no noise"
            continue
        row.low, row.high = float(judged.low[i]), float(judged.high[i])
        row.mde, row.mde_one_more = float(judged.mde[i]), float(more[i])
        row.seed_share = float(judged.seed_share[i])
        if judged.call[i]:
            row.verdict = "better" if (judged.call[i] > 0) == (direction == "maximize") else "worse"
        else:
            row.verdict, row.reason = "indistinguishable", "indistinguishable"
            row.seeds_needed = int(judged.seeds_needed(abs(row.delta))[i]) or None
    return out


def outside_family(y, mode: str, level: float = 0.1) -> dict[int, float]:
    """{configuration index: its run-to-run variance over the others' pooled} for each configuration whose spread
    looks outside the moderated mode's family (run-to-run SDs up to moderation.SPREAD_LIMIT apart): its variance
    ratio to the others is past SPREAD_LIMIT^2 times F's (1 - ``level``) quantile (either way round). At 3 seeds
    (2 degrees of freedom) this names a configuration 16x noisier in run luck in about half the battery's sweeps,
    and warns in at most 5 % of sweeps inside the family (BENCHMARKS.md). Strict mode promises nothing about
    spreads, so it has none. y[k, S, Q] as judge takes it."""
    if mode == STRICT:
        return {}
    from scipy.stats import f

    from .moderation import SPREAD_LIMIT

    run_means = np.asarray(y, float).mean(-1)
    k, s = run_means.shape
    var = run_means.var(-1, ddof=1)
    out = {}
    for c in range(k):
        others = np.delete(var, c).mean()
        if var[c] <= 0 or others <= 0:
            continue
        ratio = float(var[c] / others)
        high = SPREAD_LIMIT**2 * f.ppf(1 - level, s - 1, (k - 1) * (s - 1))
        low = f.ppf(level, s - 1, (k - 1) * (s - 1)) / SPREAD_LIMIT**2
        if ratio > high or ratio < low:
            out[c] = ratio
    return out


def design_matrix(configs: list[dict], design: list) -> tuple[np.ndarray, int | None, np.ndarray | None]:
    """y[c, s, q] over the questions every run answered (judged, not None), or y[c, s, 1] of per-run values; the
    number of questions paired; each configuration's floor of its per-run variance, the mean binomial p(1-p)/n of
    its runs (None: not an accuracy, or per question)."""
    cells = [config[s] for config in configs for s in design]
    if all(cell.outcomes is not None for cell in cells):
        keys = sorted(set.intersection(*(set(k for k, v in cell.outcomes.items() if _finite(v)) for cell in cells)))
        if len(keys) >= 2:
            y = np.array([[[config[s].outcomes[k] for k in keys] for s in design] for config in configs])
            return y, len(keys), None
    y = np.array([[[config[s].value] for s in design] for config in configs])
    floor = None
    if all(cell.n is not None and cell.n > 0 and 0.0 <= cell.value <= 1.0 for cell in cells):
        floor = np.array(
            [_mean([config[s].value * (1 - config[s].value) / config[s].n for s in design]) for config in configs]
        )
    return y, None, floor


def runs_matrix(cells: Sequence[Sequence[RunRecord]]) -> tuple[np.ndarray, np.ndarray | None]:
    """y[c, s, q] and the floor from runs as compare takes them, seed by seed in the given order (the adaptive
    design's looks: configuration c's seeds 1..n)."""
    configs = [{i: _Seed(r.value, r.value, r.n_questions, r.outcomes) for i, r in enumerate(runs)} for runs in cells]
    y, _, floor = design_matrix(configs, list(range(len(cells[0]))))
    return y, floor


# --- one configuration's test figure with an interval (the Optuna study's best, best.yaml) --------------------------

CONFIDENCE = 0.95
BOOTSTRAP = 4000


def test_interval(
    values: list[float], outcomes: list[dict] | None, n_questions: int | None, bounded: bool = True, rng_seed: int = 0
) -> dict:
    """The mean of a configuration's per-seed test figures and a 95 % interval.

    With per-question outcomes of every seed: a percentile bootstrap that resamples seeds and questions
    independently (questions are shared by the seeds, so one resample of the questions serves every seed), on
    the questions every seed judged. That counts both seed noise and the noise of which questions the test set
    happens to hold; with one seed it counts the questions only (said in ``method``).
    Without outcomes (older runs): a normal approximation, seed variance / S plus the binomial variance of
    ``n_questions`` questions (not divided by S: the seeds answer the same questions), for accuracies, with
    Student t's critical value on S - 1 degrees of freedom (the normal's with one seed).
    """
    if outcomes:
        keys = sorted(set.intersection(*(set(k for k, v in o.items() if v is not None) for o in outcomes)))
        if keys:
            matrix = np.array([[o[k] for k in keys] for o in outcomes], dtype=float)  # seeds x questions
            s, q = matrix.shape
            rng = np.random.default_rng(rng_seed)
            # each bootstrap draw: question weights (a multinomial resample of the q questions) and s seeds
            counts = rng.multinomial(q, np.full(q, 1.0 / q), size=BOOTSTRAP)  # draws x questions
            per_seed = matrix @ counts.T / q  # seeds x draws: each seed's mean on the resampled questions
            picks = rng.integers(0, s, size=(BOOTSTRAP, s))
            draws = per_seed[picks, np.arange(BOOTSTRAP)[:, None]].mean(axis=1)
            alpha = (1 - CONFIDENCE) / 2
            low, high = np.quantile(draws, [alpha, 1 - alpha])
            mean = float(matrix.mean())
            # A bootstrap of outcomes that are all equal (every question right, or wrong) has no spread: never narrower
            # than the Wilson interval of the mean over q questions (as if the seeds were one run)
            w_low, w_high = wilson(mean, q)
            return {
                "mean": mean,
                "low": min(float(low), w_low),
                "high": max(float(high), w_high),
                "seeds": s,
                "questions": q,
                "method": f"{CONFIDENCE:.0%} bootstrap over {s} seed(s) x {q} questions"
                + (" (one seed: seed noise not included)" if s == 1 else ""),
            }
    if not values:
        return {"mean": None, "low": None, "high": None, "method": "no test figure in the runs' summary.json"}
    s = len(values)
    mean = sum(values) / s
    variance, parts = 0.0, []
    if s >= 2:
        variance += sum((v - mean) ** 2 for v in values) / (s - 1) / s
        parts.append(f"{s} seeds' variance")
    if bounded and n_questions:
        variance += mean * (1 - mean) / n_questions
        parts.append(f"binomial over {n_questions} questions")
    if not parts:
        return {
            "mean": mean,
            "low": None,
            "high": None,
            "seeds": s,
            "method": "one seed and no per-question outcomes: no interval",
        }
    two_sided = (1 + CONFIDENCE) / 2
    half = (t_quantile(two_sided, s - 1) if s >= 2 else normal_quantile(two_sided)) * math.sqrt(variance)
    low, high = mean - half, mean + half
    if bounded:
        low, high = max(0.0, low), min(1.0, high)
    return {
        "mean": mean,
        "low": low,
        "high": high,
        "seeds": s,
        "method": f"{CONFIDENCE:.0%} normal approximation: " + " + ".join(parts) + " (no per-question outcomes)",
    }


def wilson(p: float, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Wilson's score interval of a proportion ``p`` of ``n`` (never zero-width, inside [0, 1])."""
    z = normal_quantile((1 + confidence) / 2)
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)
