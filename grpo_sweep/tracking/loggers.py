"""What every experiment tracker is (`RunLogger`, which alone is `logger=none`: metrics.jsonl + summary.json only)
and the process's one open tracker run. Trackers build on this module; `tracking.open_logger` picks one."""
from __future__ import annotations

import logging
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


def activate(logger: RunLogger) -> RunLogger:
    """Make ``logger`` the process's open tracker run; a previous one that was never finished is closed as failed."""
    global _active
    if _active is not None:  # a previous run in this process died before finishing its tracker run
        close_failed({"status": "failed", "error": "a later run started before this one finished"})
    _active = logger
    return logger


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
