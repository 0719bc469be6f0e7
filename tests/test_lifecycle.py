"""Every way a run ends goes through run/lifecycle.run_one, which records it once (on stand-ins for training: what
is recorded, not how a run trains; the real runs are in test_train.py, test_distributed.py and test_search.py)."""

from __future__ import annotations

import json

import pytest

from grpo_sweep.run.context import RunContext
from grpo_sweep.run.distributed import Rank
from grpo_sweep.run.lifecycle import run_one
from grpo_sweep.run.record import RunFailed, RunSummary, training_failure
from grpo_sweep.run.results import EvaluationFailed, read_run_summary, write_summary
from grpo_sweep.run.validate import ConfigError

from .conftest import compose

TRIAL = {"number": 3, "params": {"lora.r": 8}, "worker": 0, "seed": 42, "replica": 0}


@pytest.fixture(scope="module")
def cfg():
    return compose(["model.tiny.warm_start.steps=0"])


def raising(exc: BaseException):
    def train(cfg, context, monitor=None, open_tracker=None):
        raise exc

    return train


def summary_of(run_dir) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


def test_a_run_that_raises_is_recorded_as_failed_and_the_error_goes_on(cfg, tmp_path):
    context = RunContext(tmp_path / "run", ["lora.r=8"])
    with pytest.raises(RuntimeError, match="boom"):
        run_one(cfg, context, train_fn=raising(RuntimeError("boom")))
    summary = summary_of(context.run_dir)
    assert (summary["status"], summary["error"], summary["overrides"]) == ("failed", "RuntimeError: boom", ["lora.r=8"])
    assert "RuntimeError: boom" in summary["traceback"] and summary["runtime_s"] >= 0


def test_a_refused_run_says_why_and_an_optuna_trial_keeps_its_block(cfg, tmp_path):
    def gate(cfg):
        raise ConfigError("lora.r=0: must be >= 1")

    context = RunContext(tmp_path / "run", ["lora.r=0"])
    trained = []
    with pytest.raises(ConfigError):
        run_one(cfg, context, gate=gate, trial=TRIAL, train_fn=lambda *a, **k: trained.append(1))
    assert not trained
    summary = summary_of(context.run_dir)
    assert summary["status"] == "failed" and summary["error"] == "refused: lora.r=0: must be >= 1"
    assert summary["trial"] == {**TRIAL, "state": "FAIL"}


def test_a_requeue_is_no_failure(cfg, tmp_path):
    """submitit's requeue on preemption or timeout leaves the process through SystemExit: nothing is recorded, the
    next attempt continues the run."""
    context = RunContext(tmp_path / "run")
    with pytest.raises(SystemExit):
        run_one(cfg, context, train_fn=raising(SystemExit(0)))
    assert not (context.run_dir / "summary.json").exists()


def test_a_finished_trial_is_written_with_its_state(cfg, tmp_path):
    context = RunContext(tmp_path / "run")

    def train(cfg, context, monitor=None, open_tracker=None):
        summary = RunSummary("pruned", steps=4, extra={"pruned_at_step": 4})
        write_summary(context.run_dir, summary)
        return summary

    summary = run_one(cfg, context, trial=TRIAL, train_fn=train)
    assert summary.trial == {**TRIAL, "state": "PRUNED"} and summary.get("pruned_at_step") == 4
    assert read_run_summary(context.run_dir)[0] == summary


def test_an_evaluation_failure_keeps_the_record_training_wrote(cfg, tmp_path):
    context = RunContext(tmp_path / "run")

    def train(cfg, context, monitor=None, open_tracker=None):
        summary = RunSummary("failed", steps=6, adapter="lora", failed_in="evaluation", error="evaluation ... failed")
        write_summary(context.run_dir, summary)
        raise EvaluationFailed("evaluation ... failed (the trained adapter is saved in lora)", summary)

    with pytest.raises(EvaluationFailed):
        run_one(cfg, context, trial=TRIAL, train_fn=train)
    summary = summary_of(context.run_dir)
    assert (summary["steps"], summary["adapter"], summary["failed_in"]) == (6, "lora", "evaluation")
    assert summary["trial"]["state"] == "FAIL" and "traceback" not in summary


def test_a_rank_that_fails_leaves_its_error_to_rank_0_which_names_it(cfg, tmp_path):
    """SLURM's tasks of one run: rank 1 fails first, rank 0 then sees its peer gone and records rank 1's error."""
    run = RunContext(tmp_path / "run")
    with pytest.raises(ValueError):
        run_one(cfg, run.for_rank(Rank(1, 1, 2)), train_fn=raising(ValueError("reward failed on rank 1")))
    assert not (run.run_dir / "summary.json").exists()  # rank 0 writes the run's record
    with pytest.raises(RuntimeError):
        run_one(cfg, run.for_rank(Rank(0, 0, 2)), train_fn=raising(RuntimeError("connection closed by peer")))
    assert summary_of(run.run_dir)["error"] == "rank 1 of 2 failed: ValueError: reward failed on rank 1"


def test_rank_0_names_the_rank_that_failed_on_its_own_not_one_that_lost_it(cfg, tmp_path):
    """Three SLURM tasks: rank 2 fails, rank 1 records the peer it lost; the run's error is rank 2's."""
    run = RunContext(tmp_path / "run")
    with pytest.raises(ValueError):
        run_one(cfg, run.for_rank(Rank(2, 2, 3)), train_fn=raising(ValueError("reward failed on rank 2")))
    for rank in (1, 0):
        with pytest.raises(RuntimeError):
            run_one(cfg, run.for_rank(Rank(rank, rank, 3)), train_fn=raising(RuntimeError("Connection reset by peer")))
    assert summary_of(run.run_dir)["error"] == "rank 2 of 3 failed: ValueError: reward failed on rank 2"


def test_a_rank_torchrun_started_leaves_the_record_to_the_process_that_started_it(cfg, tmp_path):
    run = RunContext(tmp_path / "run")
    with pytest.raises(RuntimeError):
        run_one(cfg, run.for_rank(Rank(0, 0, 2), parent_records=True), train_fn=raising(RuntimeError("boom")))
    assert not (run.run_dir / "summary.json").exists()
    assert not (run.run_dir / "ranks").exists()


@pytest.mark.parametrize(
    "steps, means, failures, named",
    [
        (0, {"correct": None}, {"correct": 0}, "training made 0 optimizer steps"),
        (4, {"correct": 0.5, "judge": None}, {"correct": 0, "judge": 32}, "reward_mix.judge failed on every sample"),
    ],
)
def test_a_training_that_trained_nothing_is_a_failure_named_in_one_line(steps, means, failures, named):
    why = training_failure(steps, means, failures)
    assert why.startswith(named) and "\n" not in why


def test_a_training_that_trained_is_no_failure():
    # a term with some failures that scored the rest, and a term that scores None without failing (no ground truth
    # to judge): both trained or were honest about it
    assert training_failure(4, {"correct": 0.25, "maybe": None}, {"correct": 3, "maybe": 0}) is None


def test_a_run_that_trained_nothing_ends_failed_with_its_record_and_no_objective(tmp_path):
    """More prompts a generation than train rows (the gate refuses it; train() itself is not gated): TRL finds no
    full batch and makes 0 steps. The run ends failed, says why in one line, and reports no objective."""
    from .conftest import FAST

    cfg = compose([*FAST, "trainer.per_device_train_batch_size=1024", "trainer.max_steps=1", "trainer.save_steps=1"])
    context = RunContext(tmp_path / "run", ["trainer.per_device_train_batch_size=1024"])
    with pytest.raises(RunFailed, match="^training made 0 optimizer steps") as info:
        run_one(cfg, context)
    summary = summary_of(context.run_dir)
    assert (summary["status"], summary["steps"], summary["failed_in"]) == ("failed", 0, "training")
    assert summary["objective"] is None and summary["error"] == str(info.value)
    assert info.value.summary.status == "failed"
