"""The training progress bar's postfix: the reward, and the latest validation accuracy once one was measured."""

from __future__ import annotations

from types import SimpleNamespace

from grpo_sweep.run.evaluate import PeriodicEval
from grpo_sweep.run.record import Scores
from grpo_sweep.run.train import RewardProgress


class Bar:
    def __init__(self):
        self.postfix = None

    def set_postfix(self, postfix, refresh=True):
        self.postfix = dict(postfix)


def _show(periodic, logs):
    progress = RewardProgress(periodic)
    progress.training_bar = Bar()
    progress.on_log(None, SimpleNamespace(is_world_process_zero=True), None, logs=logs)
    return progress.training_bar.postfix


def _periodic(run_dir, results: dict) -> PeriodicEval:
    """Validation that measured ``results`` ({step: Scores})."""
    periodic = PeriodicEval(None, run_dir, 40, "val_accuracy", write=lambda row: None, save=None)
    periodic.results.update(results)
    return periodic


def test_reward_alone_before_any_evaluation(tmp_path):
    assert _show(None, {"reward": 0.25}) == {"reward": "0.250"}
    assert _show(_periodic(tmp_path, {}), {"reward": 0.25}) == {"reward": "0.250"}


def test_latest_evaluation_accuracy_is_shown(tmp_path):
    periodic = _periodic(tmp_path, {0: Scores(0.0), 40: Scores(0.375)})
    assert _show(periodic, {"reward": 0.5}) == {"reward": "0.500", "val_acc": "0.375"}


def test_a_failed_accuracy_and_logs_without_reward_show_nothing_new(tmp_path):
    periodic = _periodic(tmp_path, {0: Scores(None)})
    assert _show(periodic, {"reward": 0.5}) == {"reward": "0.500"}
    assert _show(periodic, {"loss": 1.0}) is None
