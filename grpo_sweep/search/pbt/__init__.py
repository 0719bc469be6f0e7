"""Population-based training (``hparams_search=pbt``: ``hydra/sweeper=grpo_pbt`` with a preset population) over
the numbers ``hydra.sweeper.params`` names: reward weights (on their ratios), the learning rate, and any other
number a round can change (``trainer.beta``, a reward's params; run/phases.FIXED says which cannot).

``sweeper.py`` drives the rounds on the login node, each member's round one job on the configured launcher;
``asynchronous.py`` the rounds of ``synchronous=false`` (a member decides as its own round ends);
``population.py`` is the population's logic and its state on disk (pbt.jsonl: the lineage; members/<m>/ their
runs); ``pb2.py`` PB2's explore (``explore=pb2``); ``plot.py`` draws pbt.png; ``report.py`` writes report.md;
``config.py`` its settings. The best member's lineage is written as a replay (the weights as reward schedules,
conf/reward_mix/best_schedule.yaml, every other moved value and seed as ``trainer.phases``) that runs as a plain
run, and its test is measured once.
"""

from __future__ import annotations

from typing import Any

from ..base import Strategy


class PBT(Strategy):
    name = "pbt"
    sweepers = ("GRPOPBTSweeper",)
    # its members changed config every round and only the best was tested: a table of configurations with verdicts
    # would compare what was never compared; the PBT's sweeper prints its own report
    has_table = False
    no_more_seeds = (
        "is a population-based training: its members change configuration every round; next_seeds "
        "adds seeds to a grid or a seeds sweep"
    )

    def sweeper_configs(self) -> list[tuple[str, Any]]:
        from .config import GRPOPBTSweeperConf

        return [("grpo_pbt", GRPOPBTSweeperConf)]


STRATEGY = PBT()
