"""TRL internals grpo-sweep reads (trl 1.14): the trainer's buffer of the latest generation batch.

``GRPOTrainer._logs`` holds what ``log_completions`` prints: ``prompt``, ``completion`` (lists), ``rewards``
(name -> values) and ``advantages``. TRL has no public handle on it; the W&B completions table reads it here.
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
