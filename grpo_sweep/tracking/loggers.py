"""The process's one open tracker run. Trackers implement the run's ``RunLogger`` (run/tracker.py);
``tracking.open_logger`` picks one."""
from __future__ import annotations

import logging
from typing import Any

from ..run.tracker import RunLogger

log = logging.getLogger(__name__)

_active: "RunLogger | None" = None


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
