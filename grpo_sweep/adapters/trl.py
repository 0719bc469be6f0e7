"""TRL internals grpo-sweep reads or sets (trl 1.14): the trainer's buffer of the latest generation batch, and its
reward weights.

``GRPOTrainer._logs`` holds what ``log_completions`` prints: ``prompt``, ``completion`` (lists), ``rewards``
(name -> values) and ``advantages``. TRL has no public handle on it; the W&B completions table reads it here.

``GRPOTrainer.reward_weights`` is the float32 tensor (one weight a reward function) that every scoring step
multiplies the rewards by, whatever ``multi_objective_aggregation`` and ``scale_rewards`` are, and that the logged
``reward`` is weighted by; TRL reads it there each time (no copy is kept), and offers no setter. A scheduled mix
(rewards/schedule.py) sets it in place before each step.
"""
from __future__ import annotations

from typing import Any

LATEST_BATCH_KEYS = ("prompt", "completion", "rewards", "advantages")


def latest_completions(trainer: Any) -> dict | None:
    """The trainer's latest generation batch (keys ``LATEST_BATCH_KEYS``), or None before the first one."""
    logs = getattr(trainer, "_logs", None)
    if not logs or not logs.get("prompt"):
        return None
    return logs


def set_reward_weights(trainer: Any, weights: list[float]) -> None:
    """Set the weights the trainer's next scoring uses (in the order of its reward functions), in place."""
    current = trainer.reward_weights
    if len(current) != len(weights):
        raise ValueError(f"{len(weights)} reward weights for the trainer's {len(current)} reward functions")
    for i, weight in enumerate(weights):
        current[i] = float(weight)
