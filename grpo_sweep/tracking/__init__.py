"""The tracker behind `logger=`, opened for one training run (wandb_logger.py, its set-up in wandb_setup.py), and a
sweep's verdicts as a W&B run of their own (sweep_verdicts.py).

Light on purpose: `wandb` is imported only when `logger=wandb` trains, so `logger=none` works without it.
"""

from __future__ import annotations

from typing import Any

from ..run.context import RunContext
from ..run.tracker import RunLogger


def open_logger(cfg: Any, context: RunContext) -> RunLogger:
    """Start the tracker named by ``cfg.logger.name`` for one run; one tracker run per training run."""
    if cfg.logger.name == "none" or cfg.logger.mode == "disabled":
        return RunLogger()
    from .wandb_logger import WandbLogger

    return WandbLogger(cfg, context)
