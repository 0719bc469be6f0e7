"""Experiment trackers behind `logger=`: none (metrics.jsonl + summary.json only) or wandb.

Light on purpose: `wandb` is imported only when `logger=wandb` trains, so `logger=none` works without it.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

_active: "RunLogger | None" = None


class RunLogger:
    """No tracker: every hook does nothing (the run dir's metrics.jsonl and summary.json are written anyway)."""

    def watch(self, trainer: Any) -> None:
        """Attach to a built GRPOTrainer (per-step metrics, completions)."""

    def log_metrics(self, row: dict) -> None:
        """A row logged outside TRL's own logging (a held-out evaluation: ``step``, ``eval/...``)."""

    def finish(self, summary: dict) -> None:
        """The run ended (completed or failed); ``summary`` is what summary.json holds."""


def open_logger(cfg: Any, run_dir: Path, overrides: list[str]) -> RunLogger:
    """Start the tracker named by ``cfg.logger.name`` for one run; one tracker run per training run."""
    global _active
    if _active is not None:  # a previous run in this process died before finishing its tracker run
        close_failed({"status": "failed", "error": "a later run started before this one finished"})
    if cfg.logger.name == "none" or cfg.logger.mode == "disabled":
        return RunLogger()
    from .wandb_logger import WandbLogger

    _active = WandbLogger(cfg, run_dir, overrides)
    return _active


def finished(logger: RunLogger) -> None:
    global _active
    if _active is logger:
        _active = None


def close_failed(summary: dict) -> None:
    """Finish the tracker run of a run that raised, so the next run in this process gets its own."""
    global _active
    logger, _active = _active, None
    if logger is not None:
        try:
            logger.finish(summary)
        except Exception as exc:  # the tracker must never hide the run's own error
            log.warning("could not close the %s run: %s", type(logger).__name__, exc)
