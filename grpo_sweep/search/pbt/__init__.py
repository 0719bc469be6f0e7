"""Population-based training (``hparams_search=pbt``: ``hydra/sweeper=grpo_pbt`` with a preset population) over
the numbers ``hydra.sweeper.params`` names: reward weights (on their ratios), the learning rate, and any other
number a round can change (``trainer.beta``, a reward's params; run/phases.FIXED says which cannot).

One machine, synchronous or not: ``rounds.py`` drives every member's rounds, each one job on the configured
launcher, a member deciding as its round ends (synchronous: once every member has reported it, a barrier);
``lineage.py`` is pbt.jsonl, its one event vocabulary and the members' states; ``decisions.py`` who takes over whom
and the values explored; ``members.py`` a PBT's directory and a take-over on disk; ``overrides.py`` a member's and a
lineage's command lines; ``settings.py`` the settings (their defaults) and the moved keys, checked; ``config.py``
the sweeper's config; ``pb2.py`` PB2's explore (``explore=pb2``); ``sweeper.py`` the Hydra sweeper (the gate, the
best member's test, the replay, the head-to-head); ``plot.py`` draws pbt.png; ``report.py`` writes report.md and the
terminal's end. The best member's lineage is written as a replay (the weights as reward schedules,
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
