"""Optuna internals grpo-sweep relies on: a trial's storage id, and a trial rebuilt from it in another process.

A trial of a multi-process run is trained by ranks the worker starts (run/distributed.launch_here); rank 0 reports
the pruning probe to the same trial, so it needs the trial in its own process: ``optuna.trial.Trial(study,
trial_id)`` over the study's storage, with the id the worker's trial holds only as ``_trial_id`` (its ``number``
is another numbering).
"""
from __future__ import annotations

from typing import Any


def trial_id(trial: Any) -> int:
    return trial._trial_id


def trial_of(study: Any, trial_id: int) -> Any:
    """The running trial ``trial_id`` of ``study`` (loaded from the same storage), to report to and prune."""
    import optuna

    return optuna.trial.Trial(study, trial_id)
