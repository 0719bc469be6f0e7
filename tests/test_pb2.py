"""PB2's explore step (grpo_sweep/search/pbt/pb2.py): its kernel is PB2's, and its picks find a peak, spread a batch,
repeat themselves and stay in range."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from grpo_sweep.search.pbt.pb2 import INERT, fit_gp, pb2_explore, tv_se_kernel
from grpo_sweep.search.pbt.settings import Param

LR = Param("optimizer.learning_rate", 1e-4, 1e-2, log=True)


def unit_lr(value: float) -> float:
    return math.log(value / LR.low) / math.log(LR.high / LR.low)


def lr_at(unit: float) -> float:
    return LR.low * (LR.high / LR.low) ** unit


def pb2_formula(a: np.ndarray, b: np.ndarray, length_scale, epsilon: float) -> np.ndarray:
    """(1 - eps)^(|t - t'| / 2) * exp(-|x - x'|^2 / (2 l^2)) on rows (t, x...), written out (l: one, or one a key)."""
    dt = np.abs(a[:, None, 0] - b[None, :, 0])
    dx2 = (((a[:, None, 1:] - b[None, :, 1:]) / np.asarray(length_scale)) ** 2).sum(-1)
    return (1 - epsilon) ** (dt / 2) * np.exp(-dx2 / 2)


def peaked(seed: int, n: int = 21, rounds: int = 3) -> list[dict]:
    """Improvement peaking at lr = 1e-3 (the middle of the log range), a little noise."""
    rng = random.Random(seed)
    observations = []
    for i in range(n):
        lr = LR.draw(rng)
        improvement = 1 - 4 * (unit_lr(lr) - 0.5) ** 2 + rng.gauss(0, 0.05)
        observations.append({"round": i % rounds, "values": {LR.key: lr}, "improvement": improvement})
    return observations


def test_the_kernel_is_pb2s_time_varying_squared_exponential():
    rng = np.random.default_rng(0)
    # rounds as they come scaled (0..1 and the next one past it), values in the unit box
    a = np.column_stack([[0.0, 0.5, 1.0, 1.5, 1.0], rng.random((5, 2))])
    b = np.column_stack([[0.0, 1.5, 0.5, 3.0], rng.random((4, 2))])
    for length_scale, epsilon in [(0.3, 0.1), (0.05, 0.5), (0.7, 0.01)]:
        kernel = tv_se_kernel(2, length_scale=length_scale, epsilon=epsilon)
        np.testing.assert_allclose(kernel(a, b), pb2_formula(a, b, length_scale, epsilon), rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(kernel(a), pb2_formula(a, a, length_scale, epsilon), rtol=1e-9, atol=1e-12)

    # after a fit the inert length scales are still inert, so the fitted kernel is the formula at fitted values
    X = np.column_stack([np.arange(12) % 3 / 2, rng.random((12, 2))])
    gp = fit_gp(X, np.sin(6 * X[:, 1]) + X[:, 2])
    scale, se, decay, noise = gp.kernel_.k1.k1, gp.kernel_.k1.k2.k1, gp.kernel_.k1.k2.k2, gp.kernel_.k2
    assert [se.length_scale[0], *decay.length_scale[1:]] == pytest.approx([INERT] * 3, rel=1e-12)
    fitted_epsilon = 1 - math.exp(-2 / decay.length_scale[0])
    assert 0 < fitted_epsilon <= 0.5 + 1e-9
    expected = scale.constant_value * pb2_formula(a, b, se.length_scale[1:], fitted_epsilon)
    np.testing.assert_allclose(gp.kernel_(a, b), expected, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(np.diag(gp.kernel_(a)), scale.constant_value + noise.noise_level, rtol=1e-9)


def test_it_proposes_near_a_known_peak():
    distances = []
    for seed in range(5):
        values, label = pb2_explore(peaked(seed), [LR], 3, [], random.Random(seed))
        assert label.startswith("pb2 (ucb ")
        distances.append(abs(unit_lr(values[LR.key]) - 0.5))
    rng = random.Random(99)
    drawn = [abs(unit_lr(LR.draw(rng)) - 0.5) for _ in range(500)]
    assert np.mean(distances) < 0.08 < np.mean(drawn) / 2, (distances, np.mean(drawn))


def test_pending_points_push_the_next_pick_away():
    moves = []
    for seed in range(6):
        # observed only on the lower half of the range, improving towards its top: the upper half is unknown
        rng = random.Random(seed)
        observations = []
        for i in range(12):
            unit = rng.uniform(0, 0.5)
            improvement = unit + rng.gauss(0, 0.02)
            observations.append({"round": i % 3, "values": {LR.key: lr_at(unit)}, "improvement": improvement})
        first, _ = pb2_explore(observations, [LR], 3, [], random.Random(seed))
        again, _ = pb2_explore(observations, [LR], 3, [], random.Random(seed))
        second, _ = pb2_explore(observations, [LR], 3, [first], random.Random(seed))
        assert again == first
        moves.append(abs(unit_lr(second[LR.key]) - unit_lr(first[LR.key])))
    assert np.mean(moves) > 0.1 and sum(move > 0.02 for move in moves) >= 4, moves


def test_same_rng_same_values_in_range_and_whole_integers():
    params = [
        LR,
        Param("trainer.beta", 0.0, 0.2),
        Param("trainer.num_iterations", 1, 8, integer=True),
    ]
    rng = random.Random(3)
    observations = []
    for i in range(30):
        values = {p.key: p.draw(rng) for p in params}
        improvement = -((unit_lr(values[LR.key]) - 0.3) ** 2) - (values["trainer.beta"] - 0.05) ** 2
        observations.append({"round": i // 10, "values": values, "improvement": improvement})
    pending = [{p.key: p.draw(rng) for p in params}]

    picks = [pb2_explore(observations, params, 3, pending, random.Random(seed)) for seed in (7, 7, 8)]
    assert picks[0] == picks[1]
    assert picks[0][0] != picks[2][0]
    for values, _ in picks:
        assert list(values) == [p.key for p in params]
        for p in params:
            assert type(values[p.key]) is float and p.low <= values[p.key] <= p.high
        assert float(values["trainer.num_iterations"]).is_integer()


@pytest.mark.parametrize("n", [0, 1])
def test_too_few_observations_draw_afresh(n):
    params = [LR, Param("trainer.num_iterations", 1, 8, integer=True)]
    # a look with no finite improvement does not count
    failed = {"round": 0, "values": {LR.key: 1e-3, params[1].key: 2.0}, "improvement": math.nan}
    observations = peaked(0, n=n) + [failed]
    values, label = pb2_explore(observations, params, 1, [], random.Random(5))
    rng = random.Random(5)
    assert values == {p.key: p.draw(rng) for p in params}
    assert label == "pb2 (too few observations: drawn)"
