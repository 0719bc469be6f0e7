"""The tracker behind `logger=`, opened for one training run.

Light on purpose: `wandb` is imported only when `logger=wandb` trains, so `logger=none` works without it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from .loggers import RunLogger, activate


def open_logger(cfg: Any, run_dir: Path, overrides: list[str]) -> RunLogger:
    """Start the tracker named by ``cfg.logger.name`` for one run; one tracker run per training run."""
    if cfg.logger.name == "none" or cfg.logger.mode == "disabled":
        return RunLogger()
    from .wandb_logger import WandbLogger

    return activate(WandbLogger(cfg, run_dir, overrides))
