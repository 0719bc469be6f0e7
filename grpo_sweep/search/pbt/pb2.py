"""PB2's explore step: a recipient's new values chosen by a time-varying GP bandit, not by random perturbation.

Population-Based Bandits (Parker-Holder, Nguyen, Roberts, 2020, "Provably Efficient Online Hyperparameter
Optimization with Population-Based Bandits", NeurIPS, arXiv:2002.02518), following Ray Tune's implementation
(``python/ray/tune/schedulers/pb2.py``: ``explore``, ``select_config``; ``python/ray/tune/schedulers/pb2_utils.py``:
``TV_SquaredExp``, ``normalize``, ``standardize``, ``UCB``, ``optimize_acq``):

- a GP models a round's improvement of the ranking metric as a function of the values and the round, under the
  time-varying squared-exponential kernel of TV-GP-UCB (Bogunovic et al., 2016),
  k((x, t), (x', t')) = (1 - eps)^(|t - t'| / 2) * SE(x, x');
- values are scaled to [0, 1] by their ranges (log ranges on a log scale), the round by the rounds observed, and the
  improvements standardised and clipped to [-2, 2];
- the new values maximise UCB, mean + sqrt(beta_n) * std with Ray's beta_n = 0.2 + max(0, ln(0.4 n)), where the std
  is that of the same GP also holding the values already chosen for the round (``pending``) as points with made-up
  labels (the variance does not depend on labels: GP-BUCB, Desautels et al., 2014), so a batch spreads out.

Where this differs from Ray: the std is the paper's (Ray adds the predictive variance, noise included); the pending
points keep the fitted hyperparameters (Ray refits a second GP on them); the query is at the round the values are
for (Ray's is the last observed time); the SE has a length scale per key (Ray's is one for all); the reward before
the round is not an input (the driver does not pass it); and the acquisition is maximised over candidates drawn from
the caller's rng (Ray: L-BFGS-B from numpy's global random starts).

The GP is scikit-learn's. No sklearn at import: the login node imports this module.
"""

from __future__ import annotations

import math
import random
import warnings
from typing import Sequence

import numpy as np

from .settings import Param

# Ray starts epsilon at 0.1 and caps it at 0.5 (TV_SquaredExp.K); the floor only keeps the time length finite
EPSILON_START = 0.1
EPSILON_BOUNDS = (1e-4, 0.5)
# Ray's SE is exp(-|x - x'|^2 / ell), ell started at 1 and clipped to [1e-5, 1] after the fit; sklearn's RBF is
# exp(-|x - x'|^2 / (2 l^2)), so l = sqrt(ell / 2)
LENGTH_SCALE_START = math.sqrt(0.5)
LENGTH_SCALE_BOUNDS = (math.sqrt(0.5e-5), math.sqrt(0.5))
# a length scale so long that a kernel no longer sees that column: every column here lies within a few units, and
# exp(-(1/1e12)) differs from 1 by 1e-12
INERT = 1e12
# UCB's beta_n = C1 + max(0, ln(C2 n)), n the observations (Ray's pb2_utils.UCB)
UCB_C1, UCB_C2 = 0.2, 0.4
CANDIDATES = 2000
REFINEMENTS = 500
REFINE_SD = 0.05  # in the unit box
GP_SEED = 0
GP_RESTARTS = 2


def time_length(epsilon: float) -> float:
    """The Matern(nu=0.5) length scale l_t with exp(-|t - t'| / l_t) = (1 - epsilon)^(|t - t'| / 2)."""
    return 2.0 / -math.log1p(-epsilon)


def tv_se_kernel(n_keys: int, length_scale: float = LENGTH_SCALE_START, epsilon: float = EPSILON_START):
    """PB2's kernel on rows (t, x_1..x_n), unit variance, as a product of sklearn kernels.

    sklearn kernels see every column, so each factor is given an inert length scale (fixed by equal bounds) on the
    columns that are not its own: an RBF on the x columns and a Matern(nu=0.5), exp(-d / l), on the t column.
    """
    from sklearn.gaussian_process.kernels import RBF, Matern

    fixed = (INERT, INERT)
    se = RBF([INERT] + [length_scale] * n_keys, [fixed] + [LENGTH_SCALE_BOUNDS] * n_keys)
    # epsilon's bounds are the time length's the other way round: the larger epsilon, the faster the past fades
    time_bounds = (time_length(EPSILON_BOUNDS[1]), time_length(EPSILON_BOUNDS[0]))
    decay = Matern([time_length(epsilon)] + [INERT] * n_keys, [time_bounds] + [fixed] * n_keys, nu=0.5)
    return se * decay


def fit_gp(X: np.ndarray, y: np.ndarray):
    """A GP fitted to standardised improvements: signal variance, noise, length scales and epsilon by maximum
    likelihood (restarts drawn from a fixed seed, so the same data give the same fit)."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import ConstantKernel, WhiteKernel

    # Ray's GPy model starts signal and noise variance at 1
    kernel = ConstantKernel(1.0, (1e-2, 1e2)) * tv_se_kernel(X.shape[1] - 1) + WhiteKernel(1.0, (1e-5, 1e1))
    gp = GaussianProcessRegressor(kernel, n_restarts_optimizer=GP_RESTARTS, random_state=GP_SEED)
    with warnings.catch_warnings():
        # the inert length scales sit on their bounds by design, and sklearn warns of every parameter that does
        warnings.simplefilter("ignore", ConvergenceWarning)
        return gp.fit(X, y)


def pb2_explore(
    observations: Sequence[dict],
    params: Sequence[Param],
    round_: int,
    pending: Sequence[dict[str, float]],
    rng: random.Random,
) -> tuple[dict[str, float], str]:
    """New values for ``round_``, and a label for the log.

    ``observations``: every finished (member, round), ``{"round", "values", "improvement"}`` (larger is better);
    ``pending``: the values already chosen for this round. Candidates come from ``rng`` only, so the same rng state
    gives the same answer.
    """
    usable = [o for o in observations if math.isfinite(o["improvement"])]
    if len(usable) < 2:
        return {p.key: p.draw(rng) for p in params}, "pb2 (too few observations: drawn)"

    from threadpoolctl import threadpool_limits

    # matrices of tens of rows: BLAS threads only contend with whatever else the node runs (6x slower on a busy one)
    with threadpool_limits(1):
        return _pick(usable, params, round_, pending, rng)


def _pick(usable: list[dict], params: Sequence[Param], round_: int, pending: Sequence[dict], rng: random.Random):
    """The UCB maximiser at ``round_`` among ``rng``'s candidates and their neighbourhood."""
    from sklearn.gaussian_process import GaussianProcessRegressor

    rounds = np.array([o["round"] for o in usable], dtype=float)
    # Ray scales time by the span observed; one observed round still needs a unit for the step to the next
    first, span = rounds.min(), max(rounds.max() - rounds.min(), 1.0)
    t_new = (round_ - first) / span
    X = np.column_stack([(rounds - first) / span, [[_unit(p, o["values"][p.key]) for p in params] for o in usable]])
    y = np.array([o["improvement"] for o in usable], dtype=float)
    y = np.clip((y - y.mean()) / (y.std() + 1e-8), -2.0, 2.0)

    gp = fit_gp(X, y)
    spread = gp
    if pending:
        P = np.column_stack([np.full(len(pending), t_new), [[_unit(p, v[p.key]) for p in params] for v in pending]])
        # the fitted hyperparameters, conditioned on the pending points too; their labels do not reach the variance
        made_up = np.zeros(len(P))
        spread = GaussianProcessRegressor(gp.kernel_, optimizer=None).fit(np.vstack([X, P]), np.append(y, made_up))
    noise = gp.kernel_.k2.noise_level
    kappa = math.sqrt(UCB_C1 + max(0.0, math.log(UCB_C2 * len(y))))

    def ucb(U: np.ndarray) -> np.ndarray:
        Z = np.column_stack([np.full(len(U), t_new), U])
        _, std = spread.predict(Z, return_std=True)
        # the bandit's uncertainty is the improvement's, not that of one noisy look at it
        return gp.predict(Z) + kappa * np.sqrt(np.maximum(std**2 - noise, 0.0))

    def snapped(U: np.ndarray) -> np.ndarray:
        # scored where the values will land: an integer key's candidates on its whole numbers
        return np.array([[_unit(p, p.clip(_value(p, u))) for p, u in zip(params, row)] for row in U])

    U = snapped(np.array([[rng.random() for _ in params] for _ in range(CANDIDATES)]))
    scores = ucb(U)
    best = U[int(np.argmax(scores))]
    near = np.clip(best + np.array([[rng.gauss(0.0, REFINE_SD) for _ in params] for _ in range(REFINEMENTS)]), 0, 1)
    near = snapped(near)
    near_scores = ucb(near)
    if near_scores.max() > scores.max():
        best, score = near[int(np.argmax(near_scores))], float(near_scores.max())
    else:
        score = float(scores.max())
    return {p.key: p.clip(_value(p, float(u))) for p, u in zip(params, best)}, f"pb2 (ucb {score:.3f})"


def _unit(param: Param, value: float) -> float:
    """``value`` in [0, 1] along ``param``'s range (log scale for a log key); outside it, its nearest end."""
    low, high, value = param.low, param.high, min(param.high, max(param.low, float(value)))
    if param.log:
        low, high, value = math.log(low), math.log(high), math.log(value)
    return (value - low) / (high - low) if high > low else 0.0


def _value(param: Param, unit: float) -> float:
    if param.log:
        return math.exp(math.log(param.low) + unit * (math.log(param.high) - math.log(param.low)))
    return param.low + unit * (param.high - param.low)
