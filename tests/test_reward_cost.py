"""What each reward term costs: its seconds in training and their share of the training time, in summary.json, at
the end of a run on the terminal (costly terms only), in W&B's summary and in the sweep report."""

from __future__ import annotations

import csv
import json
import shutil

import pytest

from grpo_sweep.app import format_summary
from grpo_sweep.reading.report import reward_cost_line
from grpo_sweep.rewards.guard import guarded
from grpo_sweep.run.cost import costly_terms, reward_cost
from grpo_sweep.run.record import RunSummary
from grpo_sweep.sweeps.report import build_report
from grpo_sweep.tracking.wandb_logger import summary_fields

from .conftest import FAST, compose
from .slow_rewards import SLEEP_S

SLOW = ["+reward_mix.slow.fn=tests.slow_rewards.sleeps", "+reward_mix.slow.weight=0.1"]


def test_the_guard_times_training_calls_and_not_evaluation_calls():
    fn = guarded(lambda completions, **kw: [1.0] * len(completions), "r")
    fn(completions=["a", "b"], trainer_state=object())  # TRL passes its state in training
    fn(completions=["a"], trainer_state=None)  # the evaluations pass none
    assert fn.calls == 1 and fn.seconds > 0


def test_share_is_of_training_time_without_the_periodic_evaluations():
    cost = reward_cost({"judge": (3.0, 10), "format": (0.01, 10)}, {"train": 14.0, "eval_periodic": 4.0})
    assert cost == {
        "judge": {"seconds": 3.0, "share": 0.3, "calls": 10},
        "format": {"seconds": 0.01, "share": 0.001, "calls": 10},
    }
    assert reward_cost({"judge": (3.0, 10)}, {"train": None})["judge"]["share"] is None
    assert [name for name, _ in costly_terms({"reward_cost": cost})] == ["judge"]


@pytest.fixture(scope="module")
def slow_run(tmp_path_factory):
    from grpo_sweep.run.train import train

    run_dir = tmp_path_factory.mktemp("slow") / "0"
    summary = train(compose(FAST + SLOW), run_dir)
    return run_dir, summary


def test_a_slow_term_shows_its_share_and_the_cheap_ones_stay_small(slow_run):
    _, summary = slow_run
    cost, timings = summary["reward_cost"], summary["timings_s"]
    assert set(cost) == set(summary["reward_weights"])  # every term, the cheap built-ins too
    slow = cost["slow"]
    # one call per generation batch, none from the evaluations (those would add per-split calls)
    assert slow["calls"] == summary["steps"], cost
    assert SLEEP_S * slow["calls"] <= slow["seconds"] < 2 * SLEEP_S * slow["calls"] + 0.05, slow
    implied = SLEEP_S * slow["calls"] / (timings["train"] - timings["eval_periodic"])
    assert 0.99 * implied <= slow["share"] < 2 * implied + 0.01, (slow, implied)  # 0.99: timings_s are rounded
    for name, term in cost.items():
        if name != "slow":
            assert term["calls"] == slow["calls"] and term["share"] * 10 < slow["share"], (name, term, slow)
    # the terminal names the slow term only when it passes the threshold; the default run's cheap terms never
    text = format_summary(summary)
    shown = [line for line in text.splitlines() if "reward cost:" in line]
    assert shown == (
        [
            f"  reward cost: slow took {slow['share']:.1%} of training time "
            f"({slow['seconds']:.1f} s in {slow['calls']} calls)"
        ]
        if slow["share"] >= 0.05
        else []
    )
    cheap = {**summary, "reward_cost": {n: c for n, c in cost.items() if n != "slow"}}
    assert "reward cost" not in format_summary(cheap)
    fields = summary_fields(summary)
    assert fields["reward_cost/slow/share"] == slow["share"] and fields["reward_cost/slow/seconds"] == slow["seconds"]


def test_the_sweep_report_shows_each_terms_share(slow_run, tmp_path):
    run_dir, summary = slow_run
    for name, share in (("0", None), ("1", 0.5)):  # the real run, and a copy whose slow term cost half the time
        run = tmp_path / name
        (run / ".hydra").mkdir(parents=True)
        (run / ".hydra/config.yaml").write_text("task_name: grpo\n")
        (run / ".hydra/overrides.yaml").write_text(f"- trainer.seed={name}\n")
        shutil.copy(run_dir / "metrics.jsonl", run / "metrics.jsonl")
        data = json.loads((run_dir / "summary.json").read_text())
        if share is not None:
            data["reward_cost"]["slow"]["share"] = share
        (run / "summary.json").write_text(json.dumps(data))
    report = build_report(tmp_path, plots=False).read_text()
    line = next(line for line in report.splitlines() if line.startswith("Reward cost"))
    mean = (summary["reward_cost"]["slow"]["share"] + 0.5) / 2
    assert f"slow {mean:.1%} (max 50.0%, 2 runs)" in line
    assert line.index("slow") < line.index("xmlcount")  # costliest first
    rows = list(csv.DictReader((tmp_path / "runs.csv").open()))
    assert sorted(float(r["reward_cost.slow.share"]) for r in rows) == sorted(
        [summary["reward_cost"]["slow"]["share"], 0.5]
    )
    assert all("reward_cost.xmlcount.share" in r for r in rows)


def test_the_report_line_is_left_out_when_no_run_recorded_a_cost():
    assert reward_cost_line([RunSummary(status="completed")]) is None
