"""The seeds sweep (``hydra/sweeper=seeds``): a grid whose seeds go where a comparison is still open.

``sweeper.py`` runs it in rounds; ``sequential.py`` is its design (the looks, the error budget they share, the
verdicts); ``design.py`` replays the design from the runs on disk (seeds.json and the runs); ``next_seeds.py``
prints the runs the design still needs, for a seeds sweep or a grid with seeds (``python -m
grpo_sweep.sweeps.next_seeds``); ``config.py`` its settings.
"""

from __future__ import annotations

from typing import Any

from ..base import Strategy, read_json


class Seeds(Strategy):
    name = "seeds"
    sweepers = ("GRPOSeedsSweeper",)
    continues_detached = True

    def sweeper_configs(self) -> list[tuple[str, Any]]:
        from .config import GRPOSeedsSweeperConf

        return [("seeds", GRPOSeedsSweeperConf)]

    def design(self, results):
        """The design replayed from ``results`` (design.Adaptive), made once per reading; None before the sweeper
        recorded its design (a refused or dry-run sweep)."""
        from .design import SEEDS_FILE, Adaptive

        def make():
            recorded = read_json(results.sweep_dir / SEEDS_FILE)
            return Adaptive(results, recorded) if recorded is not None else None

        return results.derived("seeds design", make)

    def comparisons(self, results):
        design = self.design(results)
        return design.comparisons() if design is not None else results.compare_configurations()

    def verdict_mode(self, results) -> str:
        design = self.design(results)
        return design.settings.verdicts if design is not None else results.verdicts

    def finished(self, results) -> bool:
        design = self.design(results)
        return design is None or design.plan.done

    def seeds_heading(self) -> list[str]:
        return [
            "## Seeds where the answer was open (hydra/sweeper=seeds), per configuration, and the verdict",
            "",
            "Each configuration ran seeds until validation decided its comparison with the leader of its "
            "last look, or it reached `max_seeds`, or `max_runs` was spent (`seeds` says which). The verdict "
            "is against that look's leader, on the test split of the same seeds: `better`/`worse` when test's "
            "95% family-wise interval of Δ excludes 0 and validation's sequential test at that look (the "
            "sweep's alpha shared by its looks) agrees; at most a 5% chance of any false `better`/`worse` in "
            "the table (grpo_sweep/search/seeds/sequential.py; simulated in BENCHMARKS.md).",
        ]

    def status_line(self, results) -> str | None:
        """Called once every run so far has ended, so none of the round is on its way."""
        design = self.design(results)
        if design is None or design.plan.done:
            return None
        sweep_dir = results.sweep_dir
        return (
            f"The seeds sweep is not over: a round is due, {len(design.plan.todo)} run(s) (a detached "
            f"sweep's seeds-driver job submits it; else their commands: python -m grpo_sweep.sweeps.next_seeds "
            f"{sweep_dir}, or the sweep's command again with hydra.sweep.dir={sweep_dir})."
        )


STRATEGY = Seeds()
