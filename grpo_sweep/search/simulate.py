"""Sweeps made up with a known truth: how often the verdicts call a difference that is not there, and how often
they see one that is, at a noise you choose (before spending the GPU hours: how many seeds does a difference of
0.05 need?). tests/test_stats.py, tests/test_sequential.py and the verdict benchmarks (bench/verdict_battery.py,
bench/studies/null_sweeps.py, bench/studies/seed_allocation.py) measure the engine with it.

A sweep of k configurations x S seeds is evaluated on 64 validation and 64 test questions. Each question has its own
difficulty (a logit, shared by every configuration and seed of the sweep); each run (configuration, seed) has its own
luck, a logit shift shared by its validation and test questions (the same trained model answers both, which is how a
lucky seed that wins on validation also looks good on test); each seed can have an effect shared by every
configuration. Outcomes are Bernoulli. ``QUESTIONS`` is calibrated so a run's test accuracy varies by ~0.03 over
seeds at accuracy 0.6, like the built-in task's runs.

``batch_verdicts`` is ``stats.compare`` over many sweeps at once (stats.judge takes a batch; a test checks they
agree), ``adaptive_sweeps`` the seeds strategy's whole procedure (search/seeds/sequential.py), and
``uncorrected_verdicts`` the naive procedure (a paired t of each configuration against the best, no correction for
choosing the best or for the number of pairs), the baseline the benchmarks measure against.
"""

from __future__ import annotations

import functools
import math
import numbers
from dataclasses import dataclass

import numpy as np

from grpo_sweep.reading.stats import judge


@dataclass(frozen=True)
class Noise:
    """Where a sweep's noise comes from, on the logit scale (mean accuracy ``accuracy`` on test and validation)."""

    question_sd: float = 8.0  # difficulty: most questions are nearly always or never solved, as on the built-in task
    run_sd: float = 0.3  # a run's own luck (configuration x seed)
    seed_sd: float = 0.2  # a seed's luck shared by every configuration (cancels in a paired comparison)
    accuracy: float = 0.6
    questions: int = 64

    def __post_init__(self):
        for name in ("question_sd", "run_sd", "seed_sd"):
            if not getattr(self, name) >= 0:  # not >=: NaN too
                raise ValueError(f"Noise: {name}={getattr(self, name)!r} must be a standard deviation >= 0")
        if not 0.0 < self.accuracy < 1.0:
            raise ValueError(f"Noise: accuracy={self.accuracy!r} must be in (0, 1)")
        if isinstance(self.questions, bool) or not isinstance(self.questions, numbers.Integral) or self.questions < 1:
            raise ValueError(f"Noise: questions={self.questions!r} must be a whole number >= 1")


QUESTIONS = Noise()  # per-run test accuracy sd ~0.030 over seeds
# a stress case: a run's own luck is ~60 % of a run's variance (per-run sd ~0.036; ~30 % in QUESTIONS), so the
# seed part's few degrees of freedom carry the interval
SEEDS = Noise(question_sd=16.0, run_sd=1.2, seed_sd=0.3)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


@functools.cache
def _centre(noise: Noise, shift: float = 0.0, draws: int = 400_000) -> float:
    """The mean logit giving mean accuracy ``noise.accuracy + shift`` over questions and runs (bisection on a fixed
    sample, so the same noise always gets the same centre)."""
    rng = np.random.default_rng(12345)
    z = (
        noise.question_sd * rng.standard_normal(draws)
        + noise.run_sd * rng.standard_normal(draws)
        + noise.seed_sd * rng.standard_normal(draws)
    )
    target = noise.accuracy + shift
    if not 0.0 < target < 1.0:
        raise ValueError(f"simulate: accuracy {noise.accuracy} + shift {shift} leaves (0, 1)")
    low, high = -60.0, 60.0
    for _ in range(80):
        mid = (low + high) / 2
        low, high = (mid, high) if _sigmoid(mid + z).mean() < target else (low, mid)
    return (low + high) / 2


def simulate(
    rng: np.random.Generator,
    sweeps: int,
    k: int,
    seeds: int,
    noise: Noise = QUESTIONS,
    shifts: dict[int, float] | None = None,
    noisy: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """(validation, test) outcomes, each (sweeps, k, seeds, questions) of 0.0/1.0. ``shifts``: {configuration
    index: true difference in mean accuracy from the others} (0.25 lower: ``{0: -0.25}``). ``noisy``: the last
    k // 2 configurations' own run luck is this many times the others' (a noisier recipe)."""
    for name, value in (("sweeps", sweeps), ("k", k), ("seeds", seeds)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise ValueError(f"simulate: {name}={value!r} must be a whole number >= 1")
    base = _centre(noise)
    offset = np.zeros(k)
    for c, shift in (shifts or {}).items():
        offset[c] = _centre(noise, shift) - base
    run_sd = np.full(k, noise.run_sd)
    run_sd[k - k // 2 :] *= noisy
    run = run_sd[None, :, None, None] * rng.standard_normal((sweeps, k, seeds, 1))
    seed = noise.seed_sd * rng.standard_normal((sweeps, 1, seeds, 1))
    out = []
    for _ in ("validation", "test"):
        question = base + noise.question_sd * rng.standard_normal((sweeps, 1, 1, noise.questions))
        p = _sigmoid(question + run + seed + offset[None, :, None, None])
        out.append((rng.random(p.shape) < p).astype(float))
    return out[0], out[1]


def rounded_objectives(
    rng: np.random.Generator,
    sweeps: int,
    k: int,
    seeds: int,
    sd: float = 0.03,
    mean: float = 0.6,
    questions: int = 64,
    shifts: dict[int, float] | None = None,
) -> np.ndarray:
    """A null from summaries alone: objectives ~ N(mean, sd) rounded to 1/questions, (sweeps, k, seeds)."""
    offset = np.zeros(k)
    for c, shift in (shifts or {}).items():
        offset[c] = shift
    values = mean + offset[None, :, None] + sd * rng.standard_normal((sweeps, k, seeds))
    return np.clip(np.round(values * questions) / questions, 0.0, 1.0)


@dataclass
class Verdicts:
    """Per sweep and configuration: -1 worse, +1 better, 0 indistinguishable (direction maximize); the reference."""

    calls: np.ndarray  # (sweeps, k) int
    reference: np.ndarray  # (sweeps,) int

    def any_false(self, truly_equal: np.ndarray | None = None) -> np.ndarray:
        """Per sweep: did any configuration equal to the reference (``truly_equal``: (k,) bool, all by default) get
        a better/worse verdict? With the reference truly different every call against it may be right, so only
        sweeps whose reference is among the equal ones count a false call; others count the equal pairs' calls."""
        k = self.calls.shape[1]
        equal = np.ones(k, bool) if truly_equal is None else np.asarray(truly_equal, bool)
        ref_equal = equal[self.reference]
        called = (self.calls != 0) & equal[None, :]
        return ref_equal & called.any(1)


def batch_verdicts(
    rank: np.ndarray,
    test: np.ndarray,
    alpha: float = 0.05,
    questions: bool = True,
    n_questions: int | None = 64,
    mode: str | None = None,
) -> Verdicts:
    """What ``stats.compare`` decides, for a batch of complete sweeps (maximize): stats.judge over the batch.

    ``rank``: (sweeps, k, seeds[, questions]) validation outcomes or per-run values, averaged to rank;
    ``test``: (sweeps, k, seeds, questions) outcomes, or (sweeps, k, seeds) per-run values. ``questions=False``
    uses per-run test accuracies only (no per-question files), each configuration's variance floored at the
    binomial variance of ``n_questions`` (None: no floor).
    """
    if test.ndim == 3:
        test = test[..., None]
    if not questions:
        test = test.mean(-1, keepdims=True)
    floor = None
    if test.shape[-1] == 1 and n_questions:
        p = test[..., 0]
        floor = (p * (1 - p) / n_questions).mean(-1)
    # a grid's seeds are shared by design: stats.compare pairs them (in moderated mode)
    extra = {} if mode is None else {"mode": mode, "paired": True}
    judged = judge(test, alpha, rank=rank, floor=floor, **extra)
    return Verdicts(judged.call, judged.reference)


def uncorrected_verdicts(values: np.ndarray, confidence: float = 0.95) -> Verdicts:
    """The naive procedure: rank by the per-run values themselves, compare each configuration with the best mean by a
    paired t over seeds (n - 1 df), no multiplicity correction. ``values``: (sweeps, k, seeds)."""
    from grpo_sweep.reading.stats import t_quantile

    sweeps, k, seeds = values.shape
    reference = values.mean(2).argmax(1)
    best = np.take_along_axis(values, reference[:, None, None], 1)
    diff = values - best
    mean, sd = diff.mean(2), diff.std(2, ddof=1)
    half = t_quantile((1 + confidence) / 2, seeds - 1) * sd / math.sqrt(seeds)
    calls = np.sign(mean) * ((mean - half > 0) | (mean + half < 0))
    calls[np.arange(sweeps), reference] = 0
    return Verdicts(calls.astype(int), reference)


@dataclass
class Adaptive:
    """``hydra/sweeper=seeds`` (search/seeds/sequential.py) over a batch of simulated sweeps: per sweep, the runs it
    used and its calls, each (configuration, its look's leader, -1 worse / +1 better)."""

    runs: np.ndarray  # (sweeps,)
    calls: list[list[tuple[int, int, int]]]
    seeds: np.ndarray  # (sweeps, k): seeds each configuration got

    def any_false(self, truth: np.ndarray) -> np.ndarray:
        """Per sweep: a better/worse call between two configurations whose true means (``truth``, (k,)) are equal."""
        return np.array([any(truth[c] == truth[leader] for c, leader, _ in calls) for calls in self.calls])

    def called(self, c: int, call: int = -1) -> np.ndarray:
        return np.array([any(x == c and v == call for x, _, v in calls) for calls in self.calls])


def adaptive_sweeps(
    rng: np.random.Generator,
    sweeps: int,
    k: int,
    settings,
    noise: Noise = QUESTIONS,
    shifts: dict[int, float] | None = None,
    noisy: float = 1.0,
    direction: str = "maximize",
) -> Adaptive:
    """Simulate the whole adaptive procedure: every configuration's seeds 1..max_seeds drawn up front (validation and
    test sharing each run's luck; no seed effect shared across configurations), the design replayed on validation
    (sequential.plan reads only the runs it asked for), the verdicts (sequential.verdicts)."""
    from grpo_sweep.search.seeds.sequential import plan, verdicts

    val, test = simulate(rng, sweeps, k, settings.max_seeds, noise, shifts, noisy)
    runs, calls, seeds = np.zeros(sweeps, int), [], np.zeros((sweeps, k), int)
    for i in range(sweeps):
        p = plan(k, settings, lambda c, s: val[i, c, s], direction)
        runs[i] = p.runs
        seeds[i] = [state.seeds for state in p.states]
        found = verdicts(p, k, settings, lambda c, s: val[i, c, s], lambda c, s: test[i, c, s], direction)
        calls.append([(c, p.states[c].leader, v.call) for c, v in found.items() if v.call])
    return Adaptive(runs, calls, seeds)
