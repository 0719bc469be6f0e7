"""Is a configuration really better than another, or is it noise? Verdicts whose family-wise error is what they say.

``compare(groups, direction)`` takes each configuration's runs (``RunRecord``: seed, validation objective, test
value, per-question test outcomes) and returns one ``Comparison`` per configuration, best first:

- **Ranking and reference** come from validation (``rank_value``, normally ``summary.objective`` = val_accuracy);
  the reference is the best complete configuration (of configurations tied on it, the first in the sweep's
  order, and its note says they tie: ``Comparison.tied``).
- **The verdict** (``better`` / ``worse`` / ``indistinguishable``) is about the test counterpart (``value``, and
  ``outcomes`` per question when every run has them). Its interval is a Tukey simultaneous interval over *all pairs*
  of complete configurations, so the chance of any false ``better``/``worse`` in the whole sweep is at most
  ``alpha`` whichever configuration is the reference. That matters because the reference is picked on validation
  runs of the same seeds (a lucky seed helps a configuration on validation and test alike): a procedure that holds
  only for a reference fixed in advance (Dunnett, or one t test per configuration) would not.
- **Noise** is a mixed model with configurations fixed and seeds and questions random. With per-question outcomes
  y[c, s, q] (paired by seed and by question key), the three-way ANOVA's interactions give the variance of a
  difference of two configuration means, ``2 * (v_cs / S + v_cq / Q + v_e / (S Q))``, each component floored at 0,
  with Satterthwaite's degrees of freedom. Pooling over configurations gives the seed part (k-1)(S-1) degrees of
  freedom, which is what gives 3 seeds any power. Without per-question outcomes each run is one value
  (Q = 1: ``v_cs`` only), and when that value is an accuracy over n questions the per-run variance is floored at
  the binomial p(1-p)/n: two configurations at 20/64 and 21/64 on every seed are not different.
- Configurations missing a seed the others have are ``incomplete`` (the seeds named); with one seed there is
  ``no verdict`` (add seeds); every comparison states the smallest difference the design detects with 80 % power
  (``mde``) and how many seeds would resolve the observed difference (``seeds_needed``).

Variances are pooled over configurations (one variance for every pair), not estimated pair by pair: with 3 seeds a
pair's own seed variance has 2 degrees of freedom and the intervals would be too wide to ever call anything. The
cost is heteroscedasticity: accuracies near 0 or 1 vary less, so pairs of such configurations get wider intervals
than they need (conservative), and pairs of two noisy ones are held to the pool's average. The extreme case, a
configuration that collapsed (every outcome the same), shares none of the others' seed and question effects and
would inflate the pooled variance as interaction: ``fit_sweep`` leaves it out of the variance (bench/null_sweeps.py
measures both cases). Simulated nulls with seed effects dominating (bench/null_sweeps.py, ``SEEDS``) stay at the
stated level.

Pure arithmetic over numpy and scipy.stats (imported where used: the login node imports this module, not scipy); no
torch, no files (grpo_sweep/sweeps/results.py reads the run directories). Every interval of the project is here:
the verdicts', a configuration's test figure (``test_interval``), the plots' t band (``t_quantile``).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Hashable, Mapping, Sequence

import numpy as np

from ..run.record import OUTCOME_FIELDS, test_counterpart

DIRECTIONS = ("maximize", "minimize")
REFERENCE = "reference"
# The verdict keywords (``Comparison.verdict``); ``note`` says why and what would resolve it.
VERDICTS = ("better", "worse", "indistinguishable", "incomplete", "no verdict", REFERENCE, "-")
POWER = 0.8
MAX_SEEDS = 100  # seeds_needed looks this far; beyond it the question count (not seeds) limits the design
SEED_HINT = "trainer.seed=1,2,3"


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


@functools.lru_cache(maxsize=4096)
def _range_cdf(q: float, k: int, df: float) -> float:
    from scipy.stats import studentized_range

    return float(studentized_range.cdf(q, k, df))


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


def beyond_critical(ratio, k: int, df, alpha: float = 0.05) -> np.ndarray:
    """Whether ``ratio`` (|difference| / its standard error) passes the family-wise critical value
    q_{1-alpha}(k, df) / sqrt(2), elementwise over arrays of ratios and degrees of freedom, without a quantile per
    df: the critical value falls as df grows, so the quantile at inf settles every ratio below it; the studentized
    range cdf decides the ratios past it (with many, the quantile at the smallest df settles most of them first)."""
    ratio, df = np.broadcast_arrays(np.asarray(ratio, float), np.asarray(df, float))
    _check_range("beyond_critical", k, df)
    out = np.zeros(ratio.shape, bool)
    finite = np.isfinite(ratio)
    if not finite.any():
        return out
    narrowest = studentized_range_quantile(1 - alpha, k, np.inf) / math.sqrt(2)
    between = finite & (ratio > narrowest)
    if between.sum() > 8:  # a quantile (~0.1 s) settles many ratios at once; a few are cheaper by their cdf
        widest = studentized_range_quantile(1 - alpha, k, float(df[finite].min())) / math.sqrt(2)
        out[finite] = ratio[finite] > widest
        between &= ratio <= widest
    for i in zip(*np.nonzero(between)):
        out[i] = _range_cdf(math.sqrt(2) * float(ratio[i]), int(k), float(df[i])) > 1 - alpha
    return out


def _t_upper(p: float, df) -> np.ndarray:
    """Student t's ``p`` quantile for real degrees of freedom (or inf), vectorised."""
    from scipy.stats import t

    return t.ppf(p, np.asarray(df, float))


# --- the model -------------------------------------------------------------------------------------------------------

@dataclass
class Fit:
    """The noise of a balanced design y[c, s, q] (configurations x seeds x questions), pooled over configurations.

    ``var_pair``: variance of a difference of two configuration means; ``df``: its Satterthwaite degrees of freedom.
    The components say how it would change with more seeds (``var_pair_with``).
    """

    k: int
    seeds: int
    questions: int  # 1 without per-question outcomes
    var_seed: np.ndarray  # v_cs: configuration x seed (a run's own luck), per run
    var_question: np.ndarray  # v_cq: configuration x question, per question
    var_error: np.ndarray  # v_e: what is left, per outcome
    var_pair: np.ndarray
    df: np.ndarray
    floored: np.ndarray  # the binomial floor set the per-run variance

    def var_pair_with(self, seeds) -> np.ndarray:
        seeds = np.asarray(seeds, float)
        return 2 * (self.var_seed / seeds + self.var_question / self.questions
                    + self.var_error / (seeds * self.questions))


def fit(y: np.ndarray, binomial_floor: np.ndarray | float | None = None) -> Fit:
    """The variance components of ``y`` (..., k, S, Q), vectorised over leading axes (a batch of sweeps).

    With Q = 1 (one value per run) only the configuration x seed interaction is there: per-run variance
    ``MS_cs``, floored at ``binomial_floor`` (the mean p(1-p)/n of accuracies over n questions) when given;
    the floor is treated as known (infinite degrees of freedom), because it is a bound on the question-sampling
    variance, not an estimate, but once the estimate passes it the estimate's degrees of freedom are used.
    """
    y = np.asarray(y, float)
    k, n_seeds, n_questions = y.shape[-3:]
    if k < 2 or n_seeds < 2:
        raise ValueError(f"fit: {k} configurations x {n_seeds} seeds; a variance needs >= 2 of each")
    grand = y.mean((-3, -2, -1), keepdims=True)
    by_c = y.mean((-2, -1), keepdims=True)
    by_s = y.mean((-3, -1), keepdims=True)
    by_q = y.mean((-3, -2), keepdims=True)
    by_cs = y.mean(-1, keepdims=True)
    df_cs = (k - 1) * (n_seeds - 1)
    ms_cs = n_questions * ((by_cs - by_c - by_s + grand) ** 2).sum((-3, -2, -1)) / df_cs
    if n_questions == 1:
        floor = np.zeros_like(ms_cs) if binomial_floor is None else np.broadcast_to(binomial_floor, ms_cs.shape)
        floored = floor > ms_cs
        per_run = np.maximum(ms_cs, floor)
        df = np.where(floored, np.inf, float(df_cs))
        zero = np.zeros_like(ms_cs)
        return Fit(k, n_seeds, 1, per_run, zero, zero, 2 * per_run / n_seeds, df, floored)
    by_cq = y.mean(-2, keepdims=True)
    by_sq = y.mean(-3, keepdims=True)
    df_cq, df_e = (k - 1) * (n_questions - 1), (k - 1) * (n_seeds - 1) * (n_questions - 1)
    ms_cq = n_seeds * ((by_cq - by_c - by_q + grand) ** 2).sum((-3, -2, -1)) / df_cq
    ms_e = ((y - by_cs - by_cq - by_sq + by_c + by_s + by_q - grand) ** 2).sum((-3, -2, -1)) / df_e
    # E[MS_cs] = v_e + Q v_cs, E[MS_cq] = v_e + S v_cq, E[MS_e] = v_e; a component whose estimate is negative is 0,
    # and the variance is then the same linear combination of mean squares with that term dropped
    use_cs, use_cq = ms_cs > ms_e, ms_cq > ms_e
    c_cs, c_cq = use_cs.astype(float), use_cq.astype(float)
    c_e = 1.0 - c_cs - c_cq
    per_config = (c_cs * ms_cs + c_cq * ms_cq + c_e * ms_e) / (n_seeds * n_questions)
    terms = (c_cs * ms_cs) ** 2 / df_cs + (c_cq * ms_cq) ** 2 / df_cq + (c_e * ms_e) ** 2 / df_e
    total = c_cs * ms_cs + c_cq * ms_cq + c_e * ms_e
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(terms > 0, total ** 2 / terms, np.inf)
    df = np.maximum(df, 1.0)
    var_seed = np.where(use_cs, (ms_cs - ms_e) / n_questions, 0.0)
    var_question = np.where(use_cq, (ms_cq - ms_e) / n_seeds, 0.0)
    return Fit(k, n_seeds, n_questions, var_seed, var_question, ms_e, 2 * per_config, df,
               np.zeros(per_config.shape, bool))


def fit_sweep(y: np.ndarray, binomial_floor: np.ndarray | float | None = None) -> Fit:
    """``fit`` for one sweep (k, S, Q), leaving out of the variance configurations whose every outcome is the same
    (a collapsed model: all wrong, or all right): such a configuration shares none of the others' seed and question
    effects, so in the pool it would show up as interaction and widen every interval. Its own mean has no
    variance, so the pooled variance of a difference (twice one configuration's) stays conservative for its pairs.
    ``Fit.k`` stays the number of configurations compared (the Tukey family)."""
    y = np.asarray(y, float)
    if y.ndim != 3:
        raise ValueError(f"fit_sweep: y has shape {y.shape}; one sweep is (configurations, seeds, questions)")
    if y.shape[-1] > 1:
        varying = np.ptp(y.reshape(y.shape[0], -1), axis=1) > 0
        if 2 <= varying.sum() < len(varying):
            fitted = fit(y[varying], binomial_floor)
            fitted.k = y.shape[0]
            return fitted
    return fit(y, binomial_floor)


def critical(fitted: Fit, alpha: float = 0.05) -> np.ndarray:
    """Half-width of the simultaneous intervals in standard errors of a difference: q_{1-alpha}(k, df) / sqrt(2)."""
    return studentized_range_quantile(1 - alpha, fitted.k, fitted.df) / math.sqrt(2)


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
    method: str = ""  # how the intervals were made, one sentence for reports
    is_best: bool = False
    n_questions: int | None = None  # questions paired per seed (None: per-run values)
    tied: tuple = ()  # the reference's: the configurations whose validation mean equals its own
    stopped: str = ""  # hydra/sweeper=seeds: why it got no more seeds


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


def _sd(values):
    if len(values) < 2:
        return None
    m = _mean(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))


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
        by_seed.setdefault(r.seed, []).append((float(r.rank_value), float(value), n,
                                               r.outcomes if use_test else None))
    out = {}
    for seed, runs in by_seed.items():
        outcomes = None
        if all(o is not None for *_, o in runs):
            keys = set.intersection(*(set(o) for *_, o in runs))
            outcomes = {key: _mean([o[key] for *_, o in runs]) if all(_finite(o[key]) for *_, o in runs) else None
                        for key in keys}
        ns = {n for _, _, n, _ in runs}
        out[seed] = _Seed(_mean([r for r, *_ in runs]), _mean([v for _, v, *_ in runs]),
                          ns.pop() if len(ns) == 1 else None, outcomes)
    return out


def compare(groups: Mapping[str, Sequence[RunRecord]], direction: str = "maximize", alpha: float = 0.05,
            seed_hint: str = SEED_HINT) -> list[Comparison]:
    """Every configuration against the best on validation, with family-wise ``alpha`` verdicts on test.

    ``groups``: {configuration: its runs}. Returns one Comparison per configuration: complete configurations by
    validation mean (best first, the reference), then incomplete ones, then those without any result (``-``).
    ``seed_hint``: the override that would add seeds, named in the ``no verdict`` note.
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"compare: direction={direction!r}; use maximize or minimize")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"compare: alpha={alpha!r} must be strictly between 0 and 1")
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
    design = [s for s in sorted(count, key=lambda s: (str(type(s)), s if isinstance(s, (int, float)) else str(s)))
              if 2 * count[s] >= len(with_results)]
    complete = [c for c in with_results if all(s in by_config[c] for s in design)]
    sign = -1.0 if direction == "maximize" else 1.0

    rows: dict[str, Comparison] = {}
    for c in groups:
        seeds = by_config[c]
        used = [s for s in design if s in seeds] if c in complete else list(seeds)
        values = [seeds[s].value for s in used]
        rows[c] = Comparison(c, tuple(used), _mean([seeds[s].rank for s in used]), _mean(values), _sd(values),
                             missing_seeds=tuple(s for s in design if s not in seeds) if seeds else (),
                             extra_seeds=tuple(s for s in seeds if s not in design) if c in complete else ())
    complete.sort(key=lambda c: sign * rows[c].rank_mean)  # stable: ties keep the given order
    incomplete = sorted((c for c in with_results if c not in complete), key=lambda c: sign * rows[c].rank_mean)
    order = complete + incomplete + [c for c in groups if c not in with_results]
    out = [rows[c] for c in order]

    for c in incomplete:
        rows[c].verdict = "incomplete"
        rows[c].note = "missing " + ", ".join(seed_text(s) for s in rows[c].missing_seeds)
    for c in groups:
        if c not in with_results:
            rows[c].note = "no finished run with an objective"
    if not complete:
        return out
    reference = rows[complete[0]]
    reference.is_best, reference.verdict = True, REFERENCE
    reference.tied = tuple(c for c in complete[1:] if math.isclose(rows[c].rank_mean, reference.rank_mean,
                                                                    rel_tol=1e-9, abs_tol=1e-12))
    reference.note = _reference_note(reference, len(complete))
    others = complete[1:]
    if len(design) < 2:
        for c in others:
            rows[c].verdict = "no verdict"
            rows[c].note = f"one seed: run more ({seed_hint}) to tell a difference from seed noise"
        return out
    if not others:
        return out

    y, n_questions, floor = _design_matrix([by_config[c] for c in complete], design)
    fitted = fit_sweep(y, floor)
    var_pair, df = float(fitted.var_pair), float(fitted.df)
    method = _method(fitted, len(complete), alpha, use_test)
    for row in out:
        row.method = method
    means = y.mean((1, 2))
    for i, c in enumerate(complete):
        rows[c].mean, rows[c].n_questions = float(means[i]), n_questions
    if var_pair <= 0:
        for c in others:
            rows[c].delta = float(means[complete.index(c)] - means[0])
            rows[c].verdict = "no verdict"
            rows[c].note = "every run scored the same: no noise to measure a difference against"
        return out
    crit = float(critical(fitted, alpha))
    se = math.sqrt(var_pair)
    mde = (crit + float(_t_upper(POWER, df))) * se
    for c in others:
        row = rows[c]
        row.delta = float(means[complete.index(c)] - means[0])
        row.low, row.high = row.delta - crit * se, row.delta + crit * se
        row.mde = mde
        if row.low > 0 or row.high < 0:
            row.verdict = "better" if (row.low > 0) == (direction == "maximize") else "worse"
            row.note = ""
        else:
            row.verdict = "indistinguishable"
            row.seeds_needed = _seeds_needed(fitted, alpha, abs(row.delta))
            row.note = f"no difference larger than {mde:.3f} at 80% power" + _needed_text(row, len(design))
    return out


def _design_matrix(configs: list[dict], design: list) -> tuple[np.ndarray, int | None, float | None]:
    """y[c, s, q] over the questions every run answered (judged, not None), or y[c, s, 1] of per-run values; the
    number of questions paired; the binomial floor of the per-run variance (None: not an accuracy)."""
    cells = [config[s] for config in configs for s in design]
    if all(cell.outcomes is not None for cell in cells):
        keys = sorted(set.intersection(*(set(k for k, v in cell.outcomes.items() if _finite(v)) for cell in cells)))
        if len(keys) >= 2:
            y = np.array([[[config[s].outcomes[k] for k in keys] for s in design] for config in configs])
            return y, len(keys), None
    y = np.array([[[config[s].value] for s in design] for config in configs])
    floor = None
    if all(cell.n is not None and cell.n > 0 and 0.0 <= cell.value <= 1.0 for cell in cells):
        floor = _mean([cell.value * (1 - cell.value) / cell.n for cell in cells])
    return y, None, floor


def _method(fitted: Fit, k: int, alpha: float, use_test: bool) -> str:
    what = "test" if use_test else "validation objective (not every run has a test value)"
    level = f"{100 * (1 - alpha):g}%"
    if fitted.questions > 1:
        noise = (f"{fitted.seeds} seeds x {fitted.questions} questions paired by seed and question "
                 f"(mixed model, Satterthwaite df {float(fitted.df):.1f})")
    else:
        noise = f"per-run values over {fitted.seeds} seeds"
        noise += (", variance floored at the binomial p(1-p)/n of its questions" if bool(fitted.floored)
                  else f" (df {float(fitted.df):g})")
    return (f"Δ = {what} difference from the reference; {level} family-wise intervals (Tukey, all pairs of {k} "
            f"configurations, valid whichever is the reference); noise from {noise}")


def _seeds_needed(fitted: Fit, alpha: float, delta: float) -> int | None:
    """Seeds per configuration for 80 % power at a true difference ``delta``: the fewest S in S+1 .. MAX_SEEDS whose
    detectable difference (critical value + t_{0.8}) * se(S), with the estimated components and degrees of freedom
    growing with the seed part, is at most ``delta``; None beyond MAX_SEEDS (or when the question-level variance
    alone is too large: more questions, not seeds, would resolve it). The detectable difference falls with S, so a
    bisection finds it; each step asks the studentized range cdf whether the critical value fits under delta."""
    if delta <= 0:
        return None
    seeds = np.arange(fitted.seeds + 1, MAX_SEEDS + 1)
    df = np.where(np.isfinite(fitted.df), np.maximum(1.0, float(fitted.df) * (seeds - 1) / (fitted.seeds - 1)),
                  np.inf)
    room = delta / np.sqrt(fitted.var_pair_with(seeds)) - _t_upper(POWER, df)  # what the critical value may be

    def detects(i: int) -> bool:
        return room[i] > 0 and _range_cdf(math.sqrt(2) * float(room[i]), int(fitted.k), float(df[i])) >= 1 - alpha

    if not detects(len(seeds) - 1):
        return None
    low, high = -1, len(seeds) - 1  # detects(high); low does not (or is before the first)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if detects(mid) else (mid, high)
    return int(seeds[high])


def _needed_text(row: Comparison, n_seeds: int) -> str:
    if row.delta is None or row.delta == 0:
        return ""
    if row.seeds_needed is None:
        return f"; more than {MAX_SEEDS} seeds (or more questions) to resolve {signed(row.delta)}"
    return f"; ~{row.seeds_needed} seeds (now {n_seeds}) to resolve {signed(row.delta)}"


def signed(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:+.3g}" if 0 < abs(value) < 1e-2 else f"{value:+.3f}"


def ci_text(row: Comparison) -> str:
    """``[low, high]`` of the difference from the reference, ``-`` without one (the reference, no verdict)."""
    return "-" if row.low is None or row.high is None else f"[{signed(row.low)}, {signed(row.high)}]"


def _reference_note(reference: Comparison, complete: int) -> str:
    """Why it is the reference. Validation cannot pick among configurations that tie on it: the first in the sweep's
    order is then the reference, said as such (the intervals are family-wise over all pairs: the verdicts hold
    whichever of them is the reference)."""
    if not reference.tied:
        return "best on validation"
    if len(reference.tied) == complete - 1:
        return (f"all {complete} configurations tie on validation ({reference.rank_mean:.3g}): the first listed is "
                "the reference, an arbitrary pick")
    return (f"tied best on validation with {', '.join(map(str, reference.tied))}: the first listed is the reference, "
            "an arbitrary pick")


def verdict_text(row: Comparison) -> str:
    """The verdict with its note, for a table cell: ``indistinguishable (no difference larger than 0.081 ...)``."""
    return f"{row.verdict} ({row.note})" if row.note and row.verdict != "-" else row.verdict


# --- one configuration's test figure with an interval (the Optuna study's best, best.yaml) --------------------------

CONFIDENCE = 0.95
BOOTSTRAP = 4000


def test_interval(values: list[float], outcomes: list[dict] | None, n_questions: int | None,
                  bounded: bool = True, rng_seed: int = 0) -> dict:
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
            return {"mean": mean, "low": min(float(low), w_low), "high": max(float(high), w_high), "seeds": s,
                    "questions": q,
                    "method": f"{CONFIDENCE:.0%} bootstrap over {s} seed(s) x {q} questions"
                              + (" (one seed: seed noise not included)" if s == 1 else "")}
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
        return {"mean": mean, "low": None, "high": None, "seeds": s,
                "method": "one seed and no per-question outcomes: no interval"}
    two_sided = (1 + CONFIDENCE) / 2
    half = (t_quantile(two_sided, s - 1) if s >= 2 else normal_quantile(two_sided)) * math.sqrt(variance)
    low, high = mean - half, mean + half
    if bounded:
        low, high = max(0.0, low), min(1.0, high)
    return {"mean": mean, "low": low, "high": high, "seeds": s,
            "method": f"{CONFIDENCE:.0%} normal approximation: " + " + ".join(parts) + " (no per-question outcomes)"}


def wilson(p: float, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Wilson's score interval of a proportion ``p`` of ``n`` (never zero-width, inside [0, 1])."""
    z = normal_quantile((1 + confidence) / 2)
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)
