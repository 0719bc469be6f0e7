"""Report the objective, measured on a few validation prompts, to the trial every N steps, and stop when pruned.

The probe reads validation only (like everything that chooses); the test split is never shown to a trial before its
training ends. ``quick_eval(model)`` returns the probe's scores (``run.record.Scores``); the objective's name finds
its value among them under summary.json's names (``run.record.val_figures``).
In a replicated trial only the first replica has a monitor (search/optuna/worker.py says why)."""

from __future__ import annotations

import math
from typing import Callable

from transformers import TrainerCallback

from ...run.record import Scores, val_figures
from ...run.results import lookup, without_best


class TrialMonitor:
    """Holds what a trial reported; ``callback`` plugs it into the trainer."""

    def __init__(self, trial, metric: str, every: int, eval_samples: int, shared: bool = False):
        # None on the ranks other than 0 of a multi-process trial: they follow rank 0's decision
        self.trial = trial
        # one of several processes training the trial: rank 0 decides, every rank stops at the same step
        self.shared = shared
        # a `best.<metric>` objective is pruned on <metric>: the quick look measures the current model
        self.metric = without_best(metric)
        self.every = max(1, int(every))
        self.eval_samples = eval_samples
        self.intermediate: dict[int, float] = {}
        self.pruned_at: int | None = None

    @property
    def pruned(self) -> bool:
        return self.pruned_at is not None

    def callback(self, quick_eval: Callable[[object], Scores]) -> TrainerCallback:
        return _ReportCallback(self, quick_eval)

    def record(self) -> dict:
        return {"pruned_at_step": self.pruned_at, "intermediate": {str(k): v for k, v in self.intermediate.items()}}


class _ReportCallback(TrainerCallback):
    def __init__(self, monitor: TrialMonitor, quick_eval: Callable[[object], Scores]):
        self.monitor = monitor
        self.quick_eval = quick_eval
        # steps already probed, on every rank alike (only rank 0 fills monitor.intermediate): a guard that differed
        # between ranks would leave one rank waiting in the broadcast below
        self.probed: set[int] = set()

    def on_step_end(self, args, state, control, model=None, **kwargs):
        m, step = self.monitor, state.global_step
        if step % m.every or step >= state.max_steps or step in self.probed:
            return control
        self.probed.add(step)
        stop = False
        if m.trial is not None:
            value = lookup(val_figures(self.quick_eval(model)), m.metric)
            if value is not None and math.isfinite(value):
                m.intermediate[step] = float(value)
                m.trial.report(float(value), step)
                stop = m.trial.should_prune()
        if m.shared:
            stop = _rank_0s(stop)
        if stop:
            m.pruned_at = step
            control.should_training_stop = True
        return control


def _rank_0s(decision: bool) -> bool:
    """Rank 0's decision, on every rank (a collective: every rank calls it at the same step)."""
    import torch.distributed as dist

    box = [decision]
    dist.broadcast_object_list(box, src=0)
    return bool(box[0])
