"""Paired differences between configurations (known t values, hand-computed intervals) and what a run cost."""
from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from grpo_sweep.run.results import cost_line, cost_totals, generated_tokens, run_cost
from grpo_sweep.run.summary import RunSummary
from grpo_sweep.sweeps.stats import compare_to_best, is_seed, paired_ci, seed_means, t_quantile, verdict


@pytest.mark.parametrize("p, dof, expected", [
    (0.975, 1, 12.706), (0.975, 2, 4.303), (0.975, 3, 3.182), (0.975, 4, 2.776), (0.975, 10, 2.228),
    (0.975, 30, 2.042), (0.995, 4, 4.604), (0.95, 5, 2.015), (0.025, 4, -2.776), (0.5, 7, 0.0),
])
def test_t_quantile_matches_the_printed_table(p, dof, expected):
    assert t_quantile(p, dof) == pytest.approx(expected, abs=5e-4)


def test_t_quantile_tends_to_the_normal_and_refuses_bad_input():
    assert t_quantile(0.975, 100000) == pytest.approx(1.95996, abs=1e-4)
    with pytest.raises(ValueError, match="p=1.0"):
        t_quantile(1.0, 3)
    with pytest.raises(ValueError, match="dof=0"):
        t_quantile(0.975, 0)


def test_paired_ci_three_pairs_by_hand():
    # differences 0.2, 0.3, 0.4: mean 0.3, sd 0.1, half-width t_{0.975,2} * 0.1 / sqrt(3) = 4.3027 * 0.057735
    mean, low, high, n = paired_ci([0.5, 0.6, 0.7], [0.3, 0.3, 0.3])
    assert n == 3 and mean == pytest.approx(0.3)
    assert (low, high) == pytest.approx((0.3 - 0.248414, 0.3 + 0.248414), abs=1e-5)


def test_paired_ci_five_pairs_and_another_confidence():
    # differences 1..5: mean 3, sd sqrt(2.5), se sqrt(0.5); half-width t_{0.975,4} * se = 2.77645 * 0.707107
    a, b = [11, 12, 13, 14, 15], [10] * 5
    mean, low, high, n = paired_ci(a, b)
    assert (mean, n) == (3.0, 5) and (low, high) == pytest.approx((3 - 1.963243, 3 + 1.963243), abs=1e-5)
    _, low, high, _ = paired_ci(a, b, confidence=0.99)
    assert (low, high) == pytest.approx((3 - 4.604095 * math.sqrt(0.5), 3 + 4.604095 * math.sqrt(0.5)), abs=1e-5)


def test_paired_ci_pairs_the_order_given_not_the_sorted_values():
    # unpaired, both sets are {1, 2, 3}; paired, every difference is +1 or -2: not a shift at all
    mean, low, high, _ = paired_ci([2, 3, 1], [1, 2, 3])
    assert mean == pytest.approx(0.0) and low < 0 < high


def test_paired_ci_with_too_few_pairs_has_no_interval_and_refuses_bad_input():
    assert paired_ci([0.5], [0.25]) == (0.25, None, None, 1)
    assert paired_ci([], []) == (None, None, None, 0)
    with pytest.raises(ValueError, match="2 values against 3"):
        paired_ci([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="confidence=95"):
        paired_ci([1, 2], [1, 2], confidence=95)
    with pytest.raises(ValueError, match="nan"):
        paired_ci([1, float("nan")], [1, 2])


def test_verdict_follows_the_direction():
    assert verdict(0.05, 0.55, 3) == "better"
    assert verdict(0.05, 0.55, 3, "minimize") == "worse"
    assert verdict(-0.5, -0.1, 3) == "worse"
    assert verdict(-0.5, -0.1, 3, "minimize") == "better"
    assert verdict(-0.1, 0.2, 3) == "indistinguishable"
    assert verdict(0.0, 0.0, 4) == "indistinguishable"  # a CI of [0, 0] holds 0
    assert verdict(None, None, 1) == "indistinguishable (1 paired seed: no CI)"
    assert verdict(None, None, 0, "minimize") == "indistinguishable (0 paired seeds: no CI)"
    with pytest.raises(ValueError, match="direction='up'"):
        verdict(0.1, 0.2, 3, "up")


GROUPS = {
    "a": {1: 0.2, 2: 0.4, 3: 0.3},
    "b": {1: 0.9, 2: 0.7, 3: 0.8},
    "c": {1: 0.85, 2: 0.75, 4: 0.1},  # shares seeds 1 and 2 with b only
    "d": {},  # every run failed
}


def test_compare_to_best_maximize():
    rows = compare_to_best(GROUPS)
    assert [r.config for r in rows] == ["b", "c", "a", "d"]
    best, c, a, d = rows
    assert best.is_best and best.verdict == "reference (best)" and best.delta is None
    assert best.mean == pytest.approx(0.8)
    # a - b by seed: -0.7, -0.3, -0.5: mean -0.5, sd 0.2, half-width 4.3027 * 0.2 / sqrt(3) = 0.496828
    assert (a.delta, a.n) == (pytest.approx(-0.5), 3)
    assert (a.low, a.high) == pytest.approx((-0.996828, -0.003172), abs=1e-5)
    assert a.verdict == "worse"
    # c - b on seeds 1, 2 only: -0.05, +0.05: mean 0, half-width 12.706 * 0.0707 / sqrt(2) = 0.635
    assert (c.delta, c.n, c.verdict) == (pytest.approx(0.0, abs=1e-12), 2, "indistinguishable")
    assert (c.low, c.high) == pytest.approx((-0.635310, 0.635310), abs=1e-5)
    assert (d.mean, d.verdict) == (None, "-")


def test_compare_to_best_minimize_takes_the_lowest_as_reference():
    best, c, b, _ = compare_to_best(GROUPS, "minimize")
    assert best.config == "a" and best.verdict == "reference (best)"
    assert c.config == "c" and c.n == 2 and c.verdict == "indistinguishable"
    assert b.config == "b" and (b.low, b.high) == pytest.approx((0.003172, 0.996828), abs=1e-5)
    assert b.verdict == "worse"  # higher is worse when minimizing


def test_compare_to_best_with_one_shared_seed_says_there_is_no_ci():
    rows = compare_to_best({"x": {1: 0.9, 2: 0.8}, "y": {1: 0.1, 3: 0.2}})
    assert rows[1].config == "y" and rows[1].n == 1 and rows[1].low is None
    assert rows[1].verdict == "indistinguishable (1 paired seed: no CI)"
    with pytest.raises(ValueError, match="direction='best'"):
        compare_to_best(GROUPS, "best")


def test_seed_means_drops_missing_objectives_and_averages_a_repeated_seed():
    assert seed_means([(1, 0.5), (2, None), (1, 0.7), (3, float("nan")), (4, 1)]) == {1: pytest.approx(0.6), 4: 1.0}
    assert is_seed("trainer.seed") and is_seed("+data.seed") and is_seed("seed")
    assert not is_seed("trainer.seeds") and not is_seed("seed.value")


def rows(*pairs):
    return [{"step": s, "completions/mean_length": m} for s, m in pairs]


def test_generated_tokens_one_generation_per_step():
    history = [{"step": 0, "eval/accuracy": 0.0}] + rows((1, 32.0), (2, 30.0)) + [
        {"step": 2, "train_runtime": 1.0, "completions/mean_length": 99.0}]
    assert generated_tokens(history, 16, 1, 1) == 16 * (32 + 30)


def test_generated_tokens_with_logging_every_two_steps():
    # logging_first_step: rows at 1, 3, 5; the row at 3 averages the generations of steps 2 and 3
    assert generated_tokens(rows((1, 10.0), (3, 12.0), (5, 14.0)), 16, 1, 1) == 16 * (10 + 2 * 12 + 2 * 14)


def test_generated_tokens_when_a_generation_serves_several_steps():
    # steps_per_generation=2: one generation of 32 every 2 steps; steps without one log no length
    history = rows((1, 10.0)) + [{"step": 2, "loss": 0.1}] + rows((3, 20.0))
    assert generated_tokens(history, 32, 1, 2) == 32 * (10 + 20)
    # num_iterations=2 with 2 accumulation steps: one generation per 2 * 2 micro-batches = every 2 steps, again
    assert generated_tokens(history, 32, 2, 2, num_iterations=2) == 32 * (10 + 20)
    # 2 accumulation steps, a generation per micro-batch: 2 generations per step
    assert generated_tokens(rows((1, 10.0), (2, 20.0)), 8, 2, 1) == 8 * 2 * (10 + 20)
    assert generated_tokens([{"step": 0, "eval/accuracy": 0.0}], 8, 1, 1) is None


def test_run_cost_and_sweep_totals():
    args = SimpleNamespace(generation_batch_size=16, gradient_accumulation_steps=1, steps_per_generation=1,
                           num_iterations=1)
    timings = {"startup": 6.0, "setup": 3.0, "train": 10.0, "eval_periodic": 2.0, "save": 0.5, "eval": 1.5}
    cost = run_cost(timings, rows((1, 10.0), (3, 12.0), (5, 14.0)), args)
    assert cost == {"device_seconds": 12.0, "generated_tokens": 992, "tokens_per_s": pytest.approx(82.7)}
    nothing = {"device_seconds": None, "generated_tokens": None, "tokens_per_s": None}
    assert run_cost({"setup": 3.0}, [], args) == nothing
    summaries = [RunSummary(status="completed", **cost), RunSummary(status="completed", device_seconds=8.0, generated_tokens=8),
                 RunSummary(status="running")]
    assert cost_totals(summaries) == {"runs": 2, "of": 3, "device_seconds": 20.0, "generated_tokens": 1000,
                                      "tokens_per_s": 50.0}
    line = cost_line(summaries)
    assert line.startswith("Cost: 20.0 device-seconds (0.01 device-hours), 1,000 completion tokens generated in "
                           "training, 50 tokens per device-second; 1 of 3 runs recorded no cost")
    assert cost_line([RunSummary(status="running")]) is None


# A reward that counts the completion tokens TRL really generated in training (TRL passes trainer_state there;
# the held-out evaluation passes None), to check generated_tokens against a real run.
COUNTED: list[int] = []


def count_completion_tokens(completions, completion_ids, trainer_state=None, **kwargs):
    if trainer_state is not None:
        COUNTED.extend(len(ids) for ids in completion_ids)
    return [0.0 for _ in completions]


def test_generated_tokens_of_a_real_run_equal_what_trl_generated(tmp_path):
    from grpo_sweep.run.train import train

    from .conftest import FAST, compose

    COUNTED.clear()
    # a generation every 2 steps (steps_per_generation=2), so some logged steps generate nothing
    cfg = compose(FAST + ["trainer.steps_per_generation=2", "trainer.per_device_train_batch_size=4",
                          "+reward_mix.count.fn=tests.test_stats.count_completion_tokens"])
    summary = train(cfg, tmp_path)
    assert len(COUNTED) == 6 // 2 * 8  # 3 generations of 8 completions
    assert summary["generated_tokens"] == sum(COUNTED)
    timings = summary["timings_s"]
    assert summary["device_seconds"] == pytest.approx(timings["train"] + timings["save"] + timings["eval"], abs=2e-3)
    assert summary["tokens_per_s"] == pytest.approx(sum(COUNTED) / summary["device_seconds"], rel=1e-2)


def test_one_writer_records_every_failed_run(tmp_path):
    from grpo_sweep.run.results import read_summary, record_failure

    run = tmp_path / "0"
    run.mkdir()
    record_failure(run, "ValueError: bad", ["lora.r=3"], traceback_text="x" * 5000, runtime_s=1.23456, trial={"number": 2})
    summary = read_summary(run)
    assert summary == {"status": "failed", "error": "ValueError: bad", "overrides": ["lora.r=3"], "run_dir": str(run),
                       "traceback": "x" * 4000, "runtime_s": 1.235, "trial": {"number": 2}}
    # a run that recorded its own failure keeps it when asked; otherwise the newer record wins
    assert record_failure(run, "died", [], keep_recorded=True)["error"] == "ValueError: bad"
    assert record_failure(run, "died", [])["error"] == "died"


def test_run_files_get_the_usual_mode_not_mkstemps_0600(tmp_path):
    import os

    from grpo_sweep.run.results import write_text_atomic

    write_text_atomic(tmp_path / "runs.csv", "a,b\n")
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "runs.csv").stat().st_mode & 0o777 == 0o666 & ~umask
