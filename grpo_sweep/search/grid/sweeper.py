"""The grid's sweeper (the default ``hydra/sweeper=grpo_basic``): Hydra's BasicSweeper, whose check of each batch is
the gate, over the whole sweep before Hydra writes anything (Hydra's own only composes each batch to see that it
composes, after writing the sweep's multirun.yaml); it hands the plan to the launcher, so each run is composed once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ...adapters.hydra import BasicSweeperConf, sweep_jobs
from ...reading.stats import DEFAULT_VERDICTS

SWEEPER_TARGET = "hydra_plugins.grpo_sweep_grid.sweeper.GrpoBasicSweeper"


@dataclass
class GrpoBasicSweeperConf(BasicSweeperConf):
    _target_: str = SWEEPER_TARGET
    # how the end's verdicts estimate noise: moderated (seed-paired, borrowing strength across configurations, its
    # error promised for configurations up to 4x noisier than each other) or strict (each configuration alone)
    verdicts: str = DEFAULT_VERDICTS


class GridSweep:
    """Mixed into Hydra's BasicSweeper by the plugin class (hydra_plugins/grpo_sweep_grid): Hydra's plugin scan
    re-executes its core plugin modules, so the BasicSweeper to extend is the one after the scan
    (adapters/hydra.py)."""

    # the whole sweep passes the gate before Hydra writes its multirun.yaml (the Preflight callback leaves sweeps
    # to the sweeper)
    gates_sweep = True

    def __init__(self, verdicts: str = DEFAULT_VERDICTS, **settings: Any):
        # Hydra's BasicSweeper takes max_batch_size and params only; the end of the sweep reads verdicts back from
        # multirun.yaml
        self.verdicts = verdicts
        super().__init__(**settings)

    def sweep(self, arguments: list[str]) -> Any:
        self.plan_sweep(arguments)
        return super().sweep(arguments)

    def plan_sweep(self, arguments: list[str]) -> None:
        """Every run of the sweep through the gate, before the first batch and before anything is written (a refused
        sweep leaves no directory); the launcher, when it is one of grpo-sweep's, keeps the plan and composes
        nothing again."""
        from ...launching.gate import Refused, plan_runs, stop
        from ..base import check_verdicts

        try:
            try:
                check_verdicts(getattr(self, "verdicts", None))
            except ValueError as exc:
                raise Refused(f"{exc}; no run was started") from None
            if self.max_batch_size is not None and self.max_batch_size < 1:
                raise Refused(
                    f"hydra.sweeper.max_batch_size={self.max_batch_size}: a batch holds at least one run; "
                    "use >= 1, or null for the whole sweep in one batch"
                )
            plan_runs(
                self.launcher,
                sweep_jobs(self, arguments),
                0,
                config=self.config,
                loader=self.hydra_context.config_loader,
            )
        except Refused as exc:
            stop(exc)

    def validate_batch_is_legal(self, batch: Sequence[Sequence[str]]) -> None:
        # Hydra composes each batch here only to see that it composes, then drops it (a compose a run): plan_sweep
        # composed and checked every batch already
        pass
