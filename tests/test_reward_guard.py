"""Rewards that raise or return garbage: named errors by default, or skipped and counted with reward_errors=skip."""

from __future__ import annotations

import math

import pytest

from grpo_sweep.rewards.guard import FAILED, ON_ERROR, RewardFailure, guarded
from grpo_sweep.rewards.mix import build_mix
from grpo_sweep.run.files import read_jsonl

from .conftest import FAST, compose


def breaks_on(bad: str):
    def reward(completions, ground_truth=None, **kwargs):
        if any(bad in c for c in completions):
            raise KeyError(bad)
        return [float(len(c) % 2) for c in completions]

    return reward


def returns(values):
    return lambda completions, **kwargs: list(values)


COMPLETIONS = ["ok", "fine", "x" * 500 + "BAD", "good"]


def test_a_raising_reward_names_itself_the_sample_and_the_completion():
    fn = guarded(breaks_on("BAD"), "my_reward")
    with pytest.raises(RewardFailure) as info:
        fn(completions=COMPLETIONS, ground_truth=["1"] * 4)
    message = str(info.value)
    assert "reward 'my_reward' raised KeyError: 'BAD' on sample 2" in message
    assert "'xxxx" in message and "…" in message and len(message) < 400  # truncated completion


def test_skip_mode_scores_none_counts_and_logs():
    logged = []
    fn = guarded(breaks_on("BAD"), "my_reward", on_error="skip")
    values = fn(completions=COMPLETIONS, ground_truth=["1"] * 4, log_metric=lambda k, v: logged.append((k, v)))
    assert values == [0.0, 0.0, None, 0.0]
    assert fn.failures == 1 and fn.samples == 4 and logged == [("reward_failures/my_reward", 1.0)]
    assert fn.__name__ == "my_reward"


@pytest.mark.parametrize("on_error", ON_ERROR)
def test_a_sample_the_reward_could_not_score_is_none_and_a_failure_in_either_mode(on_error, caplog):
    """FAILED (a judge that is down) does not stop the run, even in raise mode; it counts, and the metric is logged
    from the first failure on; the reward says why itself, the guard adds no warning."""
    logged = []
    fn = guarded(returns([FAILED, 0.5, FAILED]), "r", on_error)
    log = lambda k, v: logged.append((k, v))  # noqa: E731
    assert fn(completions=["a", "b", "c"], log_metric=log) == [None, 0.5, None]
    fn(completions=["a", "b", "c"], log_metric=log)
    assert fn.failures == 4 and fn.samples == 6  # failures == samples would be a reward that never scored
    assert logged == [("reward_failures/r", 2.0)] * 2
    quiet = guarded(returns([0.5]), "q", on_error)
    quiet(completions=["a"], log_metric=log)
    assert quiet.failures == 0 and quiet.samples == 1 and len(logged) == (3 if on_error == "skip" else 2)
    assert "reward 'r'" not in caplog.text


@pytest.mark.parametrize(
    "values, problem",
    [
        ([0.1, math.nan], "value nan for sample 1"),
        ([math.inf, 0.0], "value inf for sample 0"),
        (["0.5", 1.0], "non-numeric value '0.5' for sample 0"),
        ([True, 1.0], "non-numeric value True"),
        ([[1.0], 1.0], "non-numeric value [1.0]"),
    ],
)
def test_bad_values_are_rejected_with_the_reward_name(values, problem):
    with pytest.raises(RewardFailure, match=f"reward 'r' returned {problem}".replace("[", r"\[").replace("]", r"\]")):
        guarded(returns(values), "r")(completions=["a", "b"])
    skipping = guarded(returns(values), "r", on_error="skip")
    assert skipping(completions=["a", "b"]).count(None) == 1 and skipping.failures == 1


@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_wrong_length_is_always_an_error(on_error):
    with pytest.raises(RewardFailure, match="reward 'r' returned 1 values for 2 completions"):
        guarded(returns([1.0]), "r", on_error)(completions=["a", "b"])
    with pytest.raises(RewardFailure, match="reward 'r' returned a float for 2 completions"):
        guarded(lambda completions, **k: 1.0, "r", on_error)(completions=["a", "b"])


def test_none_and_numpy_style_values_pass():
    import numpy as np

    assert guarded(returns([None, np.float32(0.5), 1]), "r")(completions=["a", "b", "c"]) == [None, 0.5, 1.0]


def test_build_mix_guards_every_reward():
    funcs, _ = build_mix(compose().reward_mix, on_error="skip")
    assert [f.__name__ for f in funcs] == ["xmlcount", "correct"]
    assert all(hasattr(f, "failures") for f in funcs)


def test_a_run_survives_a_buggy_reward_in_skip_mode(tmp_path):
    from grpo_sweep.run.train import train

    cfg = compose(
        FAST
        + [
            "reward_errors=skip",
            "+reward_mix.buggy.fn=tests.reward_plugins.odd_length_raises",
            "+reward_mix.buggy.weight=0.5",
        ]
    )
    summary = train(cfg, tmp_path)
    assert summary["status"] == "completed" and summary["steps"] == 6
    assert summary["reward_failures"]["buggy"] > 0 and summary["reward_failures"]["xmlcount"] == 0
    rows = [r for r in read_jsonl(tmp_path / "metrics.jsonl") if "reward" in r]
    assert any(r.get("reward_failures/buggy", 0) > 0 for r in rows)
    assert all(math.isfinite(r["reward"]) for r in rows)


def test_a_run_stops_on_a_buggy_reward_by_default(tmp_path):
    from grpo_sweep.run.train import train

    cfg = compose(
        FAST + ["+reward_mix.buggy.fn=tests.reward_plugins.odd_length_raises", "+reward_mix.buggy.weight=0.5"]
    )
    with pytest.raises(
        RewardFailure, match=r"reward 'buggy' raised ValueError: cannot parse .* on sample \d+; completion"
    ):
        train(cfg, tmp_path)
