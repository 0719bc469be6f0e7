"""What a run tells an experiment tracker, as the run calls it. The run is handed its tracker by whoever starts it
(``train(..., open_tracker=tracking.open_logger)``), so the run package never imports a tracker; ``RunLogger``
alone, every hook a no-op, is ``logger=none`` (the run dir's metrics.jsonl and summary.json only)."""

from __future__ import annotations

from typing import Any

from .record import RunSummary


class RunLogger:
    """No tracker: every hook does nothing (the run dir's metrics.jsonl and summary.json are written anyway)."""

    def report_to(self) -> list[str]:
        """The integrations ``GRPOConfig.report_to`` names for this run (transformers' own W&B callback logs the
        per-step history into the tracker's run); none without a tracker."""
        return []

    def watch(self, trainer: Any) -> None:
        """Attach to a built GRPOTrainer (per-step metrics, completions)."""

    def log_metrics(self, row: dict) -> None:
        """A row logged outside TRL's own logging (a held-out evaluation: ``step``, ``eval/...``)."""

    def finish(self, summary: RunSummary) -> None:
        """The run ended (completed, pruned or failed); ``summary`` is its record, as summary.json holds it."""
