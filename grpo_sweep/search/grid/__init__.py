"""The grid: Hydra's basic sweep (the default; ``python launch.py -m reward_mix=format,correct trainer.seed=1,2,3``),
every combination of the values given, at the seeds given. Its verdicts compare the configurations over the seeds
they share (reading/stats.py). Its only state of its own is ``more_seeds/``: the runs ``next_seeds`` added, which
then follow the seeds sweeper's design (search/seeds/design.py ``GridSeeds``).
"""

from __future__ import annotations

from typing import Any

from ..base import Strategy, read_json


class Grid(Strategy):
    name = "grid"
    sweepers = ("GrpoBasicSweeper", "BasicSweeper")

    def sweeper_configs(self) -> list[tuple[str, Any]]:
        from .sweeper import GrpoBasicSweeperConf

        return [("grpo_basic", GrpoBasicSweeperConf)]

    def comparisons(self, results):
        from ..seeds.design import GRID_SEEDS_FILE, MORE_SEEDS, GridSeeds
        from ..seeds.sequential import recorded_settings

        # a grid whose added seeds were run: the design they followed decides its verdicts (asking alone changes
        # nothing)
        settings = read_json(results.sweep_dir / GRID_SEEDS_FILE)
        if settings is not None and any(run.dir.is_relative_to(results.sweep_dir / MORE_SEEDS) for run in results.runs):
            return GridSeeds(results, recorded_settings(settings)).comparisons()
        return results.compare_configurations()


STRATEGY = Grid()
