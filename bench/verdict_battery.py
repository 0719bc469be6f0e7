"""Does the verdicts' family-wise error hold where the noise is awkward, and do they see the difference they print?

    python -m bench.verdict_battery [--sweeps 2000] [--power-sweeps 2000] [--adaptive-sweeps 1000] [--quick]
                                    [--label NAME] [--json PATH] [--markdown PATH] [--engine PATH] [--jobs 2]

A battery of null sweeps (every configuration truly the same) in the regimes where a pooled or a selected
comparison goes wrong, each cell's rate of sweeps with any false ``better``/``worse`` and its Wilson 95 % interval
(pass: rate <= 0.05 and upper bound <= 0.06), for the fixed design (simulate.batch_verdicts, i.e. stats.compare
over a batch) and the adaptive one (sequential.plan + sequential.verdicts, ``hydra/sweeper=seeds``); the power at
the detectable difference the verdict prints (pass: >= 0.8); and the runs the adaptive design saves.

Its own generator (not simulate.simulate, so the battery does not share the engine's assumptions), on the logit
scale, 64 validation and 64 test questions per sweep (separate sets):

- a question's difficulty ~ N(0, ``QUESTION_SD`` = 4), drawn per sweep, shared by every configuration and seed;
- a run's (configuration c, seed s) own luck ~ N(0, sd_c), shared by its validation and test questions (the same
  trained model answers both: the validation-best reference is usually a lucky run, the selection the family-wise
  promise must survive); seeds are not shared across configurations unless ``seed_shared`` > 0 (then a seed's
  luck ~ N(0, seed_shared) is added to every configuration's run of it);
- sd_c = ``RUN_SD`` (0.35) x a multiplier: ``equal``; ``half2``/``half4``: the last k // 2 configurations at 2x/4x;
  ``one2``/``one4``: configuration 0 alone at 2x/4x (the noisy one is usually the reference);
- ``interaction``: an extra N(0, interaction) per (configuration, question), independent per split;
- each configuration's centre is calibrated (Gauss-Hermite, bisection) so its mean accuracy over questions and runs
  is exactly ``accuracy`` (0.6; 0.05 and 0.95 for the extremes) whatever its own spread: truly equal means equal
  mean accuracy. ``collapsed``: the last configuration answers nothing right (accuracy 0 in truth), the others null
  among themselves; a false call counts only between truly equal configurations (simulate.Verdicts.any_false);
- outcomes Bernoulli. At accuracy 0.6 and ``equal`` a run's test accuracy varies by ~0.048 over seeds (sd; ~40 % of
  that variance is the run's luck, the rest the Bernoulli draws on its 64 questions); a 4x configuration's by ~0.12.
- ``per_run``: the verdict sees per-run accuracies only (no per-question files: batch_verdicts(questions=False),
  the binomial floor).

Every cell draws from its own generator seeded by (``--seed``, the cell), so a cell's sweeps are the same whichever
cells run and whichever engine judges them: ``--engine /tmp/old-engine`` (a git worktree of an older commit) puts
that checkout's grpo_sweep first on the import path (PYTHONPATH alone does not: ``python -m`` puts the repository
root first), and runs the same battery on it, skipping what it lacks (the printed mde). Results go under
``--label`` (default ``new`` or ``old``, by whether the engine has stats.judge) in the JSON, beside other labels;
with two labels there the side-by-side tables are printed too.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import platform
import subprocess
import sys
import time
import zlib
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from bench._common import RESULTS, ROOT, command, machine, parser

QUESTIONS = 64
QUESTION_SD = 4.0
RUN_SD = 0.35
ALPHA = 0.05
RATE_LIMIT, UPPER_LIMIT, POWER_GOAL = 0.05, 0.06, 0.8
SPREADS = {
    "equal": (1.0, ""),
    "half2": (2.0, "half"),
    "half4": (4.0, "half"),
    "one2": (2.0, "one"),
    "one4": (4.0, "one"),
}
# past the moderated mode's declared family (moderation.SPREAD_LIMIT = 4): measured, promised by strict only
WIDE_SPREADS = {"half8": (8.0, "half"), "one8": (8.0, "one"), "half16": (16.0, "half"), "one16": (16.0, "one")}
ALL_SPREADS = {**SPREADS, **WIDE_SPREADS}
# seeds shared across configurations: run-luck correlation by seed (negative: between halves of opposite sign,
# +|rho| within a half); "ramp": loadings from 0 to sqrt(0.9), so the correlation differs from pair to pair
CORRELATIONS = (-0.3, 0.0, 0.3, 0.45, 0.6, 0.9)
SHARED_DESIGNS = ((10, 3), (3, 3), (3, 2), (20, 3), (5, 8))
WIDE_DESIGNS = ((10, 3), (3, 3), (3, 5))
SHARED_SHIFTS = ((10, 3, 0.45), (3, 3, 0.45), (10, 3, 0.9), (3, 3, -0.3))
GRID_K, GRID_S = (2, 3, 5, 10, 20), (2, 3, 5, 8)
SPECIAL_DESIGNS = ((10, 3), (3, 2), (3, 5))
POWER_K = (3, 10)
SHIFTS, SHIFT_K, SHIFT_S = (-0.10, -0.25), (3, 10), (3, 5)  # the fixed shifts old and new are both measured at
ADAPTIVE_SETTINGS = ((2, 6), (3, 8))
ADAPTIVE_K, ADAPTIVE_SPREADS, ADAPTIVE_SHIFTS = (3, 10), ("equal", "half4", "one4"), (-0.25, -0.10)
PARTS = ("fixed", "special", "shared", "wide", "power", "shifts", "adaptive")
VERDICTS = None  # --verdicts: the engine's mode for every cell (None: the engine's default)
MIN_ACCURACY = 0.02  # the lowest mean accuracy configuration 0 is planted at (where the mde is past the accuracy)
BATCH_ELEMENTS = 2_000_000  # outcomes per split held at once (a batch of sweeps)
DEFAULT_JSON = RESULTS / "verdict_battery.json"


# --- the generator ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Regime:
    """One cell's truth: k configurations x ``seeds`` seeds; ``shift``: configuration 0's true difference in mean
    accuracy from the others (0: the null)."""

    k: int
    seeds: int
    spread: str = "equal"
    accuracy: float = 0.6
    collapsed: bool = False
    interaction: float = 0.0
    seed_shared: float = 0.0
    per_run: bool = False
    shift: float = 0.0
    correlation: float = 0.0
    ramp: bool = False

    @property
    def label(self) -> str:
        """What sets the cell apart from the plain null, for the tables."""
        parts = [self.spread]
        if self.accuracy != 0.6:
            parts.append(f"accuracy {self.accuracy:g}")
        if self.collapsed:
            parts.append("one collapsed")
        if self.interaction:
            parts.append(f"interaction {self.interaction:g}")
        if self.seed_shared:
            parts.append(f"seed shared {self.seed_shared:g}")
        if self.correlation:
            parts.append(f"seeds correlated {self.correlation:+g}")
        if self.ramp:
            parts.append("seeds correlated 0..0.9 by pair")
        if self.per_run:
            parts.append("per-run values")
        if self.shift:
            parts.append(f"config 0 {self.shift:+.3f}")
        return ", ".join(parts)

    def run_sd(self) -> np.ndarray:
        """(k,) each configuration's run-luck SD on the logit scale."""
        multiplier, which = ALL_SPREADS[self.spread]
        sd = np.full(self.k, RUN_SD)
        if which == "half":
            sd[self.k - self.k // 2 :] *= multiplier
        elif which == "one":
            sd[0] *= multiplier
        return sd

    def loadings(self) -> np.ndarray:
        """(k,) each configuration's loading on its seed's shared luck (run-luck correlation l_c l_c')."""
        if self.ramp:
            return np.sqrt(np.linspace(0.0, 0.9, self.k))
        load = np.full(self.k, math.sqrt(abs(self.correlation)))
        if self.correlation < 0:
            load[self.k // 2 :] *= -1
        return load

    def truth(self) -> np.ndarray:
        """(k,) each configuration's true mean accuracy (exact targets, so equal ones compare equal)."""
        truth = np.full(self.k, self.accuracy)
        truth[0] += self.shift
        if self.collapsed:
            truth[-1] = 0.0
        return truth

    def equal(self) -> np.ndarray:
        """(k,) the configurations among which any call is false: the unshifted, uncollapsed ones."""
        return self.truth() == self.accuracy

    def centres(self) -> np.ndarray:
        """(k,) logit centres giving each configuration its true mean accuracy under its own total spread."""
        spread = np.sqrt(QUESTION_SD**2 + self.run_sd() ** 2 + self.seed_shared**2 + self.interaction**2)
        truth = self.truth()
        if self.collapsed:  # it answers nothing right whatever its centre
            truth[-1] = self.accuracy
        return np.array([centre_for(float(t), float(s)) for t, s in zip(truth, spread)])


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


@functools.cache
def _hermite(nodes: int = 160) -> tuple[np.ndarray, np.ndarray]:
    x, w = np.polynomial.hermite_e.hermegauss(nodes)
    return x, w / w.sum()


def mean_accuracy(centre: float, sd: float) -> float:
    """E[sigmoid(centre + sd Z)], Z standard normal (Gauss-Hermite: exact to ~1e-10 here, and deterministic)."""
    x, w = _hermite()
    return float(w @ _sigmoid(centre + sd * x))


@functools.cache
def centre_for(accuracy: float, sd: float) -> float:
    """The logit centre whose mean accuracy under a N(0, sd) logit spread is ``accuracy`` (bisection)."""
    if not 0.0 < accuracy < 1.0:
        raise ValueError(f"verdict_battery: accuracy {accuracy} leaves (0, 1)")
    low, high = -80.0, 80.0
    for _ in range(100):
        mid = (low + high) / 2
        low, high = (mid, high) if mean_accuracy(mid, sd) < accuracy else (low, mid)
    return (low + high) / 2


def cell_rng(seed: int, *key) -> np.random.Generator:
    """A cell's own stream: the same sweeps for a cell whichever other cells run, and under either engine."""
    return np.random.default_rng([seed, zlib.crc32(repr(key).encode())])


def draw(regime: Regime, rng: np.random.Generator, sweeps: int) -> tuple[np.ndarray, np.ndarray]:
    """(validation, test) outcomes, each (sweeps, k, seeds, 64) of 0.0/1.0."""
    k, seeds = regime.k, regime.seeds
    own = rng.standard_normal((sweeps, k, seeds, 1))
    load = regime.loadings()
    if load.any():  # sd_c (l_c w_s + sqrt(1 - l_c^2) z_cs): configurations c, c' correlate at l_c l_c' by seed
        own = (
            load[None, :, None, None] * rng.standard_normal((sweeps, 1, seeds, 1))
            + np.sqrt(1 - load**2)[None, :, None, None] * own
        )
    run = regime.run_sd()[None, :, None, None] * own
    if regime.seed_shared:
        run = run + regime.seed_shared * rng.standard_normal((sweeps, 1, seeds, 1))
    base = regime.centres()[None, :, None, None] + run
    out = []
    for _split in ("validation", "test"):
        logit = base + QUESTION_SD * rng.standard_normal((sweeps, 1, 1, QUESTIONS))
        if regime.interaction:
            logit = logit + regime.interaction * rng.standard_normal((sweeps, k, 1, QUESTIONS))
        y = (rng.random(logit.shape) < _sigmoid(logit)).astype(float)
        if regime.collapsed:
            y[:, -1] = 0.0
        out.append(y)
    return out[0], out[1]


def batches(regime: Regime, sweeps: int, rng: np.random.Generator):
    """``draw`` in batches of at most BATCH_ELEMENTS outcomes a split (memory), ``sweeps`` in all."""
    size = max(1, BATCH_ELEMENTS // (regime.k * regime.seeds * QUESTIONS))
    for start in range(0, sweeps, size):
        yield draw(regime, rng, min(size, sweeps - start))


# --- the engine, whichever checkout is on the import path ------------------------------------------------------------


def use_engine(path: str | None) -> None:
    """Put another checkout's grpo_sweep first on the import path (before anything imports it)."""
    if not path:
        return
    if "grpo_sweep" in sys.modules:
        raise SystemExit("verdict_battery: grpo_sweep was imported before --engine could take effect")
    sys.path.insert(0, str(Path(path).resolve()))


def has_mde() -> bool:
    """Whether the engine prints a detectable difference (stats.judge, the new engine); the old one does not."""
    from grpo_sweep.reading import stats

    return getattr(stats, "judge", None) is not None


def engine_info() -> dict:
    """Which grpo_sweep judged: its folder, its checkout's commit (read only), and the sha256 of the verdict modules
    (the checkout may hold uncommitted changes)."""
    import grpo_sweep

    package = Path(grpo_sweep.__file__).parent
    digest = hashlib.sha256()
    for name in ("reading/stats.py", "reading/moderation.py", "search/seeds/sequential.py"):
        if (package / name).exists():  # an older checkout may lack one
            digest.update((package / name).read_bytes())
    head = subprocess.run(["git", "-C", str(package.parent), "rev-parse", "HEAD"], capture_output=True, text=True)
    return {
        "grpo_sweep": str(package),
        "commit": head.stdout.strip() or None,
        "sweeps_sha256": digest.hexdigest()[:16],
        "mde": has_mde(),
    }


def fixed_verdicts(regime: Regime, val: np.ndarray, test: np.ndarray):
    """What stats.compare decides for each sweep of the batch (simulate.batch_verdicts, in old and new alike)."""
    batch_verdicts = _simulator().batch_verdicts
    if regime.per_run:
        return batch_verdicts(val.mean(-1), test, ALPHA, questions=False, n_questions=QUESTIONS, mode=VERDICTS)
    return batch_verdicts(val, test, ALPHA, mode=VERDICTS)


@functools.cache
def _simulator():
    """grpo_sweep.search.simulate: the engine's own, or this checkout's file where an older engine (--engine) has
    none; either way it judges with the engine's stats."""
    try:
        from grpo_sweep.search import simulate
    except ImportError:
        import importlib.util

        spec = importlib.util.spec_from_file_location("simulate", ROOT / "grpo_sweep" / "search" / "simulate.py")
        simulate = sys.modules[spec.name] = importlib.util.module_from_spec(spec)  # its dataclasses look it up there
        spec.loader.exec_module(simulate)
    return simulate


def printed_mde(val: np.ndarray, test: np.ndarray) -> np.ndarray:
    """Configuration 0's printed mde per sweep where it is not the reference (the new engine's stats.judge, as
    stats.compare calls it with per-question outcomes)."""
    from grpo_sweep.reading import stats

    judged = stats.judge(test, ALPHA, rank=val, **({} if VERDICTS is None else {"mode": VERDICTS}))
    return judged.mde[judged.reference != 0, 0]


def wilson(count: int, n: int) -> tuple[float, float]:
    """The Wilson 95 % interval of ``count`` of ``n`` (not the normal one: it stays honest near a rate of 0)."""
    from scipy.stats import binomtest

    ci = binomtest(int(count), int(n)).proportion_ci(0.95, method="wilson")
    return float(ci.low), float(ci.high)


def passing_rate(n: int) -> float:
    """The largest rate whose upper Wilson bound at ``n`` sweeps is still <= UPPER_LIMIT (what a cell of n sweeps
    can show at best)."""
    count = int(RATE_LIMIT * n)
    while count >= 0 and wilson(count, n)[1] > UPPER_LIMIT:
        count -= 1
    return max(count, 0) / n


def rate_row(part: str, cell: str, regime: Regime, count: int, n: int, **extra) -> dict:
    """A null cell's row: the false-call rate, its Wilson interval, pass."""
    low, high = wilson(count, n)
    rate = count / n
    return {
        "part": part,
        "cell": cell,
        "regime": asdict(regime),
        "sweeps": n,
        "false": int(count),
        "rate": round(rate, 4),
        "low": round(low, 4),
        "high": round(high, 4),
        "pass": bool(rate <= RATE_LIMIT and high <= UPPER_LIMIT),
        **extra,
    }


def design_cell(regime: Regime) -> str:
    return f"k={regime.k} S={regime.seeds} {regime.label}"


# --- the cells -------------------------------------------------------------------------------------------------------


def fixed_cell(part: str, regime: Regime, sweeps: int, seed: int, mde: bool = False) -> dict:
    """A fixed-design cell: the any-false rate among the truly equal configurations; configuration 0's printed mde
    (``mde``); with a shift, P(configuration 0 called worse)."""
    rng = cell_rng(seed, "fixed", regime)
    equal = regime.equal()
    false = worse = 0
    mdes, sds, gaps = [], [], []
    correct, answered = np.zeros(regime.k), 0
    for val, test in batches(regime, sweeps, rng):
        correct += test.sum((0, 2, 3))
        answered += test.shape[0] * test.shape[2] * test.shape[3]
        verdicts = fixed_verdicts(regime, val, test)
        false += int(verdicts.any_false(equal).sum())
        worse += int((verdicts.calls[:, 0] == -1).sum())
        sds.append(test.mean(-1).std(2, ddof=1).mean(0))
        gaps.append(test[:, 0].mean() - test[:, equal].mean())
        if mde:
            mdes.append(printed_mde(val, test))
    extra = {
        "per_run_sd": [round(float(x), 4) for x in np.mean(sds, 0)[[0, -1]]],
        "p_worse_0": round(worse / sweeps, 4),
        "test_accuracy": [round(float(x), 4) for x in correct / answered],
    }
    if mde:
        found = np.concatenate(mdes)
        extra["mde_median"] = round(float(np.median(found)), 4) if found.size else None
        extra["mde_sweeps"] = int(found.size)
    if regime.shift:
        low, high = wilson(worse, sweeps)
        extra["power_low"], extra["power_high"] = round(low, 4), round(high, 4)
        extra["measured_delta"] = round(float(np.mean(gaps)), 4)
    return rate_row(part, design_cell(regime), regime, false, sweeps, **extra)


def adaptive_cell(part: str, regime: Regime, settings: tuple[int, int], sweeps: int, seed: int) -> dict:
    """An adaptive-design cell: the whole procedure per sweep (seeds 1..max_seeds drawn up front, the design
    replayed on validation, the verdicts on test), its any-false rate, runs used, and P(configuration 0 called
    worse); beside it the fixed design at max_seeds on the same sweeps."""
    from grpo_sweep.search.seeds.sequential import Settings, plan, verdicts

    low_seeds, high_seeds = settings
    chosen = Settings(min_seeds=low_seeds, max_seeds=high_seeds, alpha=ALPHA, **_mode())
    regime = replace(regime, seeds=high_seeds)
    truth, k = regime.truth(), regime.k
    rng = cell_rng(seed, "adaptive", regime, settings)
    false = worse = fixed_worse = fixed_false = 0
    runs = []
    for val, test in batches(regime, sweeps, rng):
        fixed = fixed_verdicts(regime, val, test)
        fixed_false += int(fixed.any_false(regime.equal()).sum())
        fixed_worse += int((fixed.calls[:, 0] == -1).sum())
        for v, t in zip(val, test):
            p = plan(k, chosen, lambda c, s: v[c, s])
            found = verdicts(p, k, chosen, lambda c, s: v[c, s], lambda c, s: t[c, s])
            runs.append(p.runs)
            false += any(x.call and truth[c] == truth[p.states[c].leader] for c, x in found.items())
            worse += bool(0 in found and found[0].call == -1)
    cell = f"k={k} seeds {low_seeds}..{high_seeds} {regime.label}"
    return rate_row(
        part,
        cell,
        regime,
        false,
        sweeps,
        settings=list(settings),
        runs_mean=round(float(np.mean(runs)), 2),
        fixed_runs=k * high_seeds,
        p_worse_0=round(worse / sweeps, 4),
        fixed_p_worse_0=round(fixed_worse / sweeps, 4),
        fixed_rate=round(fixed_false / sweeps, 4),
    )


def _mode() -> dict:
    return {} if VERDICTS is None else {"verdicts": VERDICTS}


def _call(task):
    kind, args = task
    return (fixed_cell if kind == "fixed" else adaptive_cell)(*args)


def run_cells(tasks: list, jobs: int) -> list[dict]:
    """Every task's row, in order; ``jobs`` > 1: that many single-threaded processes (forked: the engine chosen by
    --engine is already on their path)."""
    if jobs <= 1 or len(tasks) <= 1:
        return [_call(t) for t in tasks]
    import multiprocessing

    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork")) as pool:
        return list(pool.map(_call, tasks))


def special_regimes(k: int, seeds: int) -> list[Regime]:
    """The awkward cases beside the spreads: extreme accuracies, a collapsed configuration, configuration x question
    interaction, per-run values only, a seed effect shared by configurations, and some of them with a noisy one."""
    base = Regime(k, seeds)
    return [
        replace(base, accuracy=0.05),
        replace(base, accuracy=0.95),
        replace(base, accuracy=0.05, spread="one4"),
        replace(base, collapsed=True),
        replace(base, collapsed=True, spread="one4"),
        replace(base, interaction=1.0),
        replace(base, interaction=1.0, spread="half4"),
        replace(base, per_run=True),
        replace(base, per_run=True, spread="one4"),
        replace(base, seed_shared=RUN_SD),
    ]


def shared_regimes() -> list[Regime]:
    """Seeds shared across configurations, null: each correlation, the ramp, and with unequal spreads."""
    out = []
    for k, s in SHARED_DESIGNS:
        out += [Regime(k, s, correlation=rho) for rho in CORRELATIONS if rho]
        out += [Regime(k, s, ramp=True), Regime(k, s, "one4", correlation=0.6), Regime(k, s, "half4", correlation=-0.3)]
    return out


def wide_regimes() -> list[Regime]:
    """Spreads past the moderated mode's family (8x, 16x), null, with and without shared seeds."""
    return [Regime(k, s, spread) for k, s in WIDE_DESIGNS for spread in WIDE_SPREADS] + [
        Regime(k, s, "one16", correlation=0.6) for k, s in WIDE_DESIGNS
    ]


def power_regimes() -> list[Regime]:
    return [Regime(k, s, spread) for k in POWER_K for s in GRID_S for spread in SPREADS]


def power_rows(mdes: dict, args) -> list[dict]:
    """Each power cell's row: configuration 0 planted worse by the median mde printed for it in its null cell. A
    printed mde past the accuracy itself cannot be planted: there configuration 0 is planted at the largest
    difference there is (its accuracy down to MIN_ACCURACY), to show what the design does see, with no pass/fail."""

    def planted(r: Regime) -> float:
        return min(mdes[design_cell(r)], r.accuracy - MIN_ACCURACY)

    found = run_cells(
        [
            ("fixed", ("power", replace(r, shift=-planted(r)), args.power_sweeps, args.seed, True))
            for r in power_regimes()
        ],
        args.jobs,
    )
    for r, row in zip(power_regimes(), found):
        row["mde_median"], row["mde_printed_here"] = mdes[design_cell(r)], row["mde_median"]
        row["plantable"] = planted(r) == mdes[design_cell(r)]
        row["power_pass"] = bool(row["p_worse_0"] >= POWER_GOAL) if row["plantable"] else None
    return found


def cell_tasks(cells: list, args) -> list:
    """--cells: each {"part", "regime": Regime's fields, "mde" (optional), "settings": [min, max] (adaptive only)}
    as a task of run_cells, fixed cells at --sweeps and adaptive ones at --adaptive-sweeps."""
    tasks = []
    for cell in cells:
        if not isinstance(cell, dict) or not isinstance(cell.get("regime"), dict) or "part" not in cell:
            raise SystemExit(f"verdict_battery: --cells: {cell!r} is not {{'part': ..., 'regime': {{...}}}}")
        try:
            regime = Regime(**cell["regime"])
        except TypeError as exc:
            raise SystemExit(f"verdict_battery: --cells: regime {cell['regime']!r}: {exc}") from None
        if regime.spread not in ALL_SPREADS:
            raise SystemExit(f"verdict_battery: --cells: spread {regime.spread!r}; use one of {', '.join(ALL_SPREADS)}")
        if "settings" in cell:
            tasks.append(("adaptive", (cell["part"], regime, tuple(cell["settings"]), args.adaptive_sweeps, args.seed)))
        else:
            tasks.append(("fixed", (cell["part"], regime, args.sweeps, args.seed, bool(cell.get("mde")))))
    return tasks


def battery(args) -> dict:
    """Every part asked for; rows and wall seconds per part."""
    rows, walls = [], {}
    parts = args.parts
    mde_ok = has_mde()

    def timed(name, tasks):
        started = time.perf_counter()
        found = run_cells(tasks, args.jobs)
        walls[name] = round(time.perf_counter() - started, 1)
        rows.extend(found)
        print(f"[{name}: {len(found)} cells, {walls[name]} s]", flush=True)
        return found

    if "fixed" in parts:
        mde_cells = set(power_regimes()) if mde_ok and "power" in parts else set()
        grid = [Regime(k, s, spread) for k in GRID_K for s in GRID_S for spread in SPREADS]
        timed("fixed", [("fixed", ("fixed", r, args.sweeps, args.seed, r in mde_cells)) for r in grid])
    if "special" in parts:
        timed(
            "special",
            [
                ("fixed", ("special", r, args.sweeps, args.seed))
                for k, s in SPECIAL_DESIGNS
                for r in special_regimes(k, s)
            ],
        )
    for part, regimes in (("shared", shared_regimes), ("wide", wide_regimes)):
        if part in parts:
            timed(part, [("fixed", (part, r, args.sweeps, args.seed)) for r in regimes()])
    if "power" in parts and mde_ok:
        mdes = {r["cell"]: r["mde_median"] for r in rows if r.get("mde_median") is not None}
        if not mdes:  # the grid was not run: the null sweeps of the power cells alone
            found = run_cells(
                [("fixed", ("fixed", r, args.sweeps, args.seed, True)) for r in power_regimes()], args.jobs
            )
            mdes = {r["cell"]: r["mde_median"] for r in found}
        started = time.perf_counter()
        rows.extend(power_rows(mdes, args))
        walls["power"] = round(time.perf_counter() - started, 1)
        print(f"[power: {walls['power']} s]", flush=True)
    elif "power" in parts:
        print("[power at the printed mde: skipped, this engine prints no mde (no stats.judge)]")
    if "shifts" in parts:
        timed(
            "shifts",
            [
                ("fixed", ("shifts", Regime(k, s, shift=shift), args.power_sweeps, args.seed))
                for k in SHIFT_K
                for s in SHIFT_S
                for shift in SHIFTS
            ]
            + [
                ("fixed", ("shifts", Regime(k, s, shift=shift, correlation=rho), args.power_sweeps, args.seed))
                for k, s, rho in SHARED_SHIFTS
                for shift in SHIFTS
            ],
        )
    if "adaptive" in parts:
        null = [Regime(k, 0, spread) for k in ADAPTIVE_K for spread in ADAPTIVE_SPREADS]
        null += [Regime(k, 0, accuracy=0.05) for k in ADAPTIVE_K]
        saving = [Regime(k, 0, shift=shift) for k in ADAPTIVE_K for shift in ADAPTIVE_SHIFTS]
        tasks = [
            ("adaptive", (part, r, s, args.adaptive_sweeps, args.seed))
            for part, regimes in (("adaptive", null), ("saving", saving))
            for r in regimes
            for s in ADAPTIVE_SETTINGS
        ]
        # the slow (k = 10) cells first, so the two processes end together
        order = sorted(range(len(tasks)), key=lambda i: -tasks[i][1][1].k)
        started = time.perf_counter()
        found = run_cells([tasks[i] for i in order], args.jobs)
        walls["adaptive"] = round(time.perf_counter() - started, 1)
        rows.extend(row for _, row in sorted(zip(order, found)))
        print(f"[adaptive: {len(found)} cells, {walls['adaptive']} s]", flush=True)
    return {"rows": rows, "wall_s": walls}


# --- tables ----------------------------------------------------------------------------------------------------------


def _rate(row: dict) -> str:
    text = f"{row['rate']:.3f} ({row['high']:.3f})"
    return text if row["pass"] else f"**FAIL {text}**"


def _seeds_text(regime: dict) -> str:
    rho = regime.get("correlation") or 0.0
    return f"correlated {rho:+g}" if rho else "independent"


def _power_line(r: dict) -> str:
    head = f"| {r['regime']['k']} x {r['regime']['seeds']} | {r['regime']['spread']} | {r['mde_median']:.4f} | "
    verdict = {True: "yes", False: "**FAIL**", None: "n/a: the mde is past the accuracy, the largest Δ planted"}
    return head + (
        f"{r['measured_delta']:+.4f} | {r['mde_printed_here']:.4f} | {r['sweeps']} | "
        f"{r['p_worse_0']:.3f} [{r['power_low']:.3f}, {r['power_high']:.3f}] | "
        f"{verdict[r['power_pass']]} | {_rate(r)} |"
    )


def failures(rows: list[dict]) -> list[str]:
    """One line per failing cell, with its numbers."""
    out = []
    for r in rows:
        if r["part"] in ("power", "saving", "shifts"):
            if r["part"] == "power" and r["power_pass"] is False:
                out.append(
                    f"power {r['cell']}: P(worse) {r['p_worse_0']:.3f} < {POWER_GOAL} at the printed mde "
                    f"{r['mde_median']:.4f}"
                )
            if not r["pass"]:
                out.append(f"{r['part']} {r['cell']}: false among the equal {r['rate']:.4f} (upper {r['high']:.4f})")
        elif not r["pass"]:
            out.append(
                f"{r['part']} {r['cell']}: rate {r['rate']:.4f}, Wilson 95 % [{r['low']:.4f}, "
                f"{r['high']:.4f}] ({r['false']} of {r['sweeps']})"
            )
    return out


def _section(title: str, header: list[str], lines: list[str]) -> list[str]:
    """A titled markdown table with a blank line after it."""
    return [title, "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header), *lines, ""]


def tables(entry: dict) -> str:
    """The markdown tables of one engine's battery."""
    rows = entry["rows"]
    by_part = {}
    for r in rows:
        by_part.setdefault(r["part"], []).append(r)
    out = []
    if "fixed" in by_part:
        grid = _grid(by_part["fixed"])
        n = by_part["fixed"][0]["sweeps"]
        out += [
            f"Fixed design, null: P(any false better/worse) (upper Wilson 95 %), {n} sweeps a cell (pass: rate "
            f"<= {RATE_LIMIT}, upper <= {UPPER_LIMIT}, i.e. rate <= {passing_rate(n):.4f} at {n} sweeps)",
            "",
            *grid_table(lambda key: _rate(grid[key]) if key in grid else None),
            "",
        ]
    for part, title in (
        ("shared", "Fixed design, null, seeds shared across configurations (run-luck correlation by seed)"),
        ("wide", "Fixed design, null, spreads past the moderated mode's family (8x, 16x: promised by strict only)"),
    ):
        if part in by_part:
            out += _section(
                title,
                ["k x S", "regime", "sweeps", "rate", "Wilson 95 %", "pass"],
                [
                    f"| {r['regime']['k']} x {r['regime']['seeds']} | {Regime(**r['regime']).label} | "
                    f"{r['sweeps']} | {r['rate']:.4f} | [{r['low']:.4f}, {r['high']:.4f}] | "
                    f"{'yes' if r['pass'] else '**FAIL**'} |"
                    for r in by_part[part]
                ],
            )
    if "special" in by_part:
        out += _section(
            "Fixed design, null, special cells",
            ["k x S", "regime", "sweeps", "rate", "Wilson 95 %", "pass"],
            [
                f"| {r['regime']['k']} x {r['regime']['seeds']} | {Regime(**r['regime']).label} | "
                f"{r['sweeps']} | {r['rate']:.4f} | [{r['low']:.4f}, {r['high']:.4f}] | "
                f"{'yes' if r['pass'] else '**FAIL**'} |"
                for r in by_part["special"]
            ],
        )
    if "power" in by_part:
        out += _section(
            "Power at the printed detectable difference: configuration 0 planted worse by the median mde "
            "printed for it in the null sweeps",
            [
                "k x S",
                "spread",
                "printed mde (median, null)",
                "planted Δ, measured on test",
                "printed mde (median, planted)",
                "sweeps",
                "P(called worse) [Wilson 95 %]",
                "pass (>= 0.8)",
                "false among the equal",
            ],
            [_power_line(r) for r in by_part["power"]],
        )
    if "shifts" in by_part:
        out += _section(
            "Power at fixed shifts (equal spreads): P(configuration 0 called worse)",
            [
                "k x S",
                "true difference",
                "seeds",
                "measured on test",
                "sweeps",
                "P(called worse)",
                "false among the equal",
            ],
            [
                f"| {r['regime']['k']} x {r['regime']['seeds']} | {r['regime']['shift']:+.2f} | "
                f"{_seeds_text(r['regime'])} | "
                f"{r['measured_delta']:+.4f} | {r['sweeps']} | {r['p_worse_0']:.3f} | {_rate(r)} |"
                for r in by_part["shifts"]
            ],
        )
    if "adaptive" in by_part:
        n = by_part["adaptive"][0]["sweeps"]
        out += _section(
            "Adaptive design (hydra/sweeper=seeds), null: P(any false better/worse) (upper Wilson 95 %; "
            f"pass: rate <= {passing_rate(n):.4f} at {n} sweeps)",
            ["k", "seeds", "regime", "sweeps", "adaptive", "runs used (fixed: k x max)", "fixed design at max seeds"],
            [
                f"| {r['regime']['k']} | {r['settings'][0]}..{r['settings'][1]} | "
                f"{Regime(**r['regime']).label} | {r['sweeps']} | {_rate(r)} | {r['runs_mean']:.1f} "
                f"({r['fixed_runs']}) | {r['fixed_rate']:.3f} |"
                for r in by_part["adaptive"]
            ],
        )
    if "saving" in by_part:
        out += _section(
            "Runs the adaptive design saves: configuration 0 truly worse, the others equal",
            [
                "k",
                "seeds",
                "true difference",
                "runs used",
                "fixed runs",
                "saved",
                "P(worse) adaptive",
                "P(worse) fixed",
                "false among the equal",
            ],
            [
                f"| {r['regime']['k']} | {r['settings'][0]}..{r['settings'][1]} | "
                f"{r['regime']['shift']:+.2f} | {r['runs_mean']:.1f} | {r['fixed_runs']} | "
                f"{1 - r['runs_mean'] / r['fixed_runs']:.0%} | {r['p_worse_0']:.3f} | "
                f"{r['fixed_p_worse_0']:.3f} | {_rate(r)} |"
                for r in by_part["saving"]
            ],
        )
    failed = failures(rows)
    out += ["Failing cells: " + ("none" if not failed else ""), *[f"- {line}" for line in failed]]
    return "\n".join(out) + "\n"


def _grid(rows: list[dict]) -> dict:
    return {(r["regime"]["k"], r["regime"]["seeds"], r["regime"]["spread"]): r for r in rows}


def grid_table(text) -> list[str]:
    """The k x S by spread grid, ``text((k, S, spread))`` in each cell (rows where it says None are left out)."""
    out = ["| k x S | " + " | ".join(SPREADS) + " |", "|---|" + "---|" * len(SPREADS)]
    for k in GRID_K:
        for s in GRID_S:
            cells = [text((k, s, spread)) for spread in SPREADS]
            if all(c is not None for c in cells):
                out.append(f"| {k} x {s} | " + " | ".join(cells) + " |")
    return out


def _short(row: dict) -> str:
    """A cell's figure in the side-by-side tables: the rate (bold: the cell fails), or P(worse) where a
    configuration is truly worse."""
    if row["part"] in ("shifts", "saving"):
        return f"{row['p_worse_0']:.3f}" + (f" ({row['runs_mean']:.1f} runs)" if "runs_mean" in row else "")
    return f"{row['rate']:.3f}" if row["pass"] else f"**{row['rate']:.3f}**"


def side_by_side(results: dict) -> str:
    """Every label of the JSON (old, new) on the cells they share: null cells' any-false rate (upper Wilson), and
    P(configuration 0 called worse) where it is truly worse."""
    labels = list(results)
    if len(labels) < 2:
        return ""
    cells: dict = {}
    for label in labels:
        for r in results[label]["rows"]:
            cells.setdefault((r["part"], r["cell"]), {})[label] = r
    shared = {key: found for key, found in cells.items() if len(found) == len(labels)}
    if not shared:
        return ""
    names = " / ".join(labels)
    out = [
        f"Side by side, {names}: null cells P(any false) (bold: the cell fails), truly-worse cells P(configuration "
        "0 called worse)",
        "",
    ]
    grids = {
        label: _grid([r for (part, _), found in shared.items() if part == "fixed" for r in [found[label]]])
        for label in labels
    }
    if grids[labels[0]]:
        out += [
            f"Fixed design, null ({names})",
            "",
            *grid_table(
                lambda key: " / ".join(_short(grids[x][key]) for x in labels) if key in grids[labels[0]] else None
            ),
            "",
        ]
    out += [f"| part | cell | {' | '.join(labels)} |", "|---|---|" + "---|" * len(labels)]
    out += [
        f"| {part} | {cell} | " + " | ".join(_short(found[x]) for x in labels) + " |"
        for (part, cell), found in shared.items()
        if part != "fixed"
    ]
    return "\n".join(out) + "\n"


# --- the command -----------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    cli = parser(__doc__)
    cli.add_argument("--sweeps", type=int, default=2000, help="null sweeps per fixed-design cell")
    cli.add_argument("--power-sweeps", type=int, default=2000, help="sweeps per power cell")
    cli.add_argument("--adaptive-sweeps", type=int, default=1000, help="sweeps per adaptive cell")
    cli.add_argument("--quick", action="store_true", help="200 / 200 / 100 sweeps: a minute's smoke run")
    cli.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated subset of {','.join(PARTS)}")
    cli.add_argument(
        "--cells",
        type=json.loads,
        default=None,
        help="these cells alone, instead of --parts, each row printed as JSON (tests/test_verdict_battery.py): a JSON "
        'list of {"part": NAME, "regime": {Regime\'s fields}, "mde": true, "settings": [MIN, MAX] (adaptive)}',
    )
    cli.add_argument("--label", default=None, help="the key of this run in the JSON (default: new or old)")
    cli.add_argument("--json", type=Path, default=DEFAULT_JSON, help="results file (labels side by side)")
    cli.add_argument("--markdown", type=Path, default=None, help="also write the printed tables here")
    cli.add_argument("--engine", default=None, help="a checkout whose grpo_sweep to judge with (e.g. a worktree)")
    cli.add_argument("--jobs", type=int, default=2, help="processes (each single-threaded)")
    cli.add_argument("--seed", type=int, default=2026)
    cli.add_argument(
        "--verdicts", choices=("moderated", "strict"), default=None, help="the engine's mode (default: its default)"
    )
    args = cli.parse_args(argv)
    global VERDICTS
    VERDICTS = args.verdicts
    if args.quick:
        args.sweeps, args.power_sweeps, args.adaptive_sweeps = 200, 200, 100
    args.parts = [p for p in args.parts.split(",") if p]
    unknown = set(args.parts) - set(PARTS)
    if unknown:
        cli.error(f"--parts: unknown {sorted(unknown)}; use {','.join(PARTS)}")
    use_engine(args.engine)
    import scipy

    info = engine_info()
    label = args.label or args.verdicts or ("new" if info["mde"] else "old")
    print(f"engine: {info['grpo_sweep']} (sha256 {info['sweeps_sha256']}), label {label}", flush=True)
    started = time.perf_counter()
    if args.cells is not None:
        rows = run_cells(cell_tasks(args.cells, args), args.jobs)
        for row in rows:
            print(json.dumps(row))
        print(f"wall: {round(time.perf_counter() - started, 1)} s")
        return
    entry = battery(args)
    entry.update(
        {
            "command": command("bench.verdict_battery", argv),
            "engine": info,
            "label": label,
            "sweeps": args.sweeps,
            "power_sweeps": args.power_sweeps,
            "adaptive_sweeps": args.adaptive_sweeps,
            "seed": args.seed,
            "jobs": args.jobs,
            "wall_total_s": round(time.perf_counter() - started, 1),
            "generator": {"questions": QUESTIONS, "question_sd": QUESTION_SD, "run_sd": RUN_SD, "alpha": ALPHA},
            "python": platform.python_version(),
            "numpy": np.__version__,
            "scipy": scipy.__version__,
            "machine": machine("at the end"),
        }
    )
    entry["failures"] = failures(entry["rows"])
    text = tables(entry)
    results = json.loads(args.json.read_text()) if args.json.exists() else {}  # read now: another label may be new
    results[label] = entry
    both = side_by_side(results)
    print(text + ("\n" + both if both else ""))
    print(f"wall: {entry['wall_s']} (total {entry['wall_total_s']} s)")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {args.json.relative_to(ROOT) if args.json.is_relative_to(ROOT) else args.json}")
    if args.markdown:
        args.markdown.write_text(text + ("\n" + both if both else ""))


if __name__ == "__main__":
    main()
