"""transformers' Trainer internals grpo-sweep uses (transformers 5.17, torch's LR schedulers).

``Trainer._load_from_checkpoint(path)`` loads a checkpoint's weights (a PEFT adapter, or the whole model) into the
trainer's model, as ``train(resume_from_checkpoint=...)`` does first; there is no public way to load them without
training, and a run whose last step is already in its checkpoint must not train another.

A torch LR scheduler keeps the rates it last set in ``_last_lr`` (what ``get_last_lr()`` returns, and what the
Trainer logs as ``learning_rate``); it has no setter. ``base_lrs`` and each group's ``initial_lr`` are public.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def restore_checkpoint(trainer: Any, checkpoint: Path) -> None:
    """The checkpoint's weights into ``trainer``'s model and its TrainerState (the step, the log history) into
    ``trainer.state``, without training."""
    from transformers.trainer_callback import TrainerState

    trainer._load_from_checkpoint(str(checkpoint))
    trainer.state = TrainerState.load_from_json(str(Path(checkpoint) / "trainer_state.json"))


def scale_learning_rate(optimizer: Any, scheduler: Any, learning_rate: float) -> float:
    """Make ``learning_rate`` the scheduler's base rate from now on, the schedule's shape kept (every group scaled
    alike); returns the base rate it had."""
    before = float(scheduler.base_lrs[0])
    if before == learning_rate or before == 0:
        return before
    scale = learning_rate / before
    scheduler.base_lrs = [rate * scale for rate in scheduler.base_lrs]
    for group in optimizer.param_groups:
        group["lr"] *= scale
        if "initial_lr" in group:
            group["initial_lr"] *= scale
    scheduler._last_lr = [group["lr"] for group in optimizer.param_groups]
    return before
