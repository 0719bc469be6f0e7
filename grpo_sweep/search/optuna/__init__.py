"""Optuna search over reward weights, num_generations, learning rate and any config value.

A Hydra sweeper (``hydra/sweeper=grpo_optuna``, used by ``hparams_search/*``; ``sweeper.py``) checks the space
(``space.py``), creates or resumes the study (``storage.py``; ``config.py``: its settings and study.json) and
launches worker jobs on the configured launcher; each worker (``worker.py``) pulls trials from the shared storage
(Optuna's distributed pattern), trains them in-process, reports a held-out metric every N steps and stops pruned
trials at once (``pruning.py``). No batch barriers: a worker starts its next trial as soon as one ends. The end of
the sweep prints the study's report (``report.py``: best.yaml, its plots; ``python -m grpo_sweep.search.study``).
"""

from __future__ import annotations

from typing import Any, Sequence

from ..base import Strategy


class Optuna(Strategy):
    name = "optuna"
    sweepers = ("GRPOOptunaSweeper",)
    # a study expects some failed trials: its own max_failures decides its exit status (``failure``)
    failed_runs_fail = False
    no_more_seeds = (
        "is an Optuna study: its sampler picks the configurations; next_seeds adds seeds to a grid or a "
        "seeds sweep (a study's replicas: hydra.sweeper.seeds_per_trial)"
    )

    def sweeper_configs(self) -> list[tuple[str, Any]]:
        from .config import GRPOOptunaSweeperConf

        return [("grpo_optuna", GRPOOptunaSweeperConf)]

    @staticmethod
    def study(sweep_dir) -> dict | None:
        from .config import StudyFileError, read_study_file

        try:
            return read_study_file(sweep_dir)
        except (FileNotFoundError, StudyFileError):  # a refused or dry-run study wrote none; before_table names one
            return None

    def read(self, sweep_dir, direction: str | None = None, also: Sequence = (), verdicts: str | None = None):
        from ...reading.results import SweepResults
        from .config import WORKER_MARKER

        info = self.study(sweep_dir) or {}
        direction = direction or str((info.get("directions") or ["maximize"])[0]).lower()
        # a worker job's own Hydra directory holds no run: its trials are under trials/
        return SweepResults.read(
            sweep_dir, direction, also, judge=self.comparisons, not_runs=(WORKER_MARKER,), verdicts=verdicts
        )

    def before_table(self, results) -> str | None:
        from .config import StudyFileError, read_study_file
        from .report import study_report
        from .storage import StudyUnreadable

        # its runs are read and shown whatever became of study.json or the database: the report names what it lacks
        try:
            read_study_file(results.sweep_dir)
            return study_report(results.sweep_dir, plots=True, results=results)
        except FileNotFoundError:
            return None
        except (StudyFileError, StudyUnreadable) as exc:
            return f"(no study report: {exc})"

    def failure(self, results) -> str | None:
        from .storage import load_study_read_only
        from .worker import study_failed

        info = self.study(results.sweep_dir)
        if info is None:
            return None
        study, _ = load_study_read_only(info["study_name"], info.get("storage"), results.sweep_dir)
        return study_failed(study, info.get("max_failures", 3))

    def plot_options(self, results) -> dict:
        # the report's plots draw sampled values on a continuous axis
        return {"scales": (self.study(results.sweep_dir) or {}).get("scales") or {}}


STRATEGY = Optuna()
