"""Optuna internals grpo-sweep relies on: a trial's storage id, a trial rebuilt from it in another process, and a
study whose workers together never make more trials than its budget.

A trial of a multi-process run is trained by ranks the worker starts (run/distributed.launch_here); rank 0 reports
the pruning probe to the same trial, so it needs the trial in its own process: ``optuna.trial.Trial(study,
trial_id)`` over the study's storage, with the id the worker's trial holds only as ``_trial_id`` (its ``number``
is another numbering).
"""

from __future__ import annotations

from typing import Any


def trial_id(trial: Any) -> int:
    return trial._trial_id


def trial_of(study: Any, trial_id: int) -> Any:
    """The running trial ``trial_id`` of ``study`` (loaded from the same storage), to report to and prune."""
    import optuna

    return optuna.trial.Trial(study, trial_id)


class TrialBudgetSpent(Exception):
    """The study already has its ``n_trials`` trials: the worker asking for another stops."""


def load_budgeted_study(study_name: str, storage: Any, sampler: Any, pruner: Any, n_trials: int, lock_path: str):
    """``optuna.load_study`` whose ``ask`` creates a trial only while the study holds fewer than ``n_trials``, and
    raises ``TrialBudgetSpent`` after that.

    Optuna's own budget for several workers (``MaxTrialsCallback``) is checked after a trial ends and before the next
    ``ask``, in each worker alone: two workers ending trials at once both see room for one more and the study gets
    one trial more per extra worker (seen on a two-worker SLURM study: 7 trials for a budget of 6). Here the check and
    the creation happen under one file lock shared by every worker of the study (it lies in the sweep directory,
    which every node of a SLURM sweep shares). ``Study.optimize`` calls ``self.ask()`` once per trial (the guard test
    in tests/test_adapters.py checks it), which is what makes the subclass enough; ``Study``'s constructor is what
    ``load_study`` calls.

    The lock is filelock's (flock, freed by the kernel when its holder dies; a lock file where flock is missing),
    polled every 5 ms. Optuna's own NFS lock (``JournalFileOpenLock``) backs its waiters off up to a second: with
    32 workers and trials of 10 ms, 11 of them made no trial at all (bench/optuna_concurrency.py). The lock is held
    for one indexed lookup and the creation, not for a read of every trial."""
    import optuna
    from filelock import FileLock

    lock = FileLock(lock_path + ".lock")

    class BudgetedStudy(optuna.Study):
        def ask(self, fixed_distributions=None):
            with lock.acquire(poll_interval=0.005):
                if n_trials <= 0 or has_trial_number(self, n_trials - 1):
                    raise TrialBudgetSpent(f"study {self.study_name!r} has its {n_trials} trials")
                return super().ask(fixed_distributions)

    return BudgetedStudy(study_name=study_name, storage=storage, sampler=sampler, pruner=pruner)


def has_trial_number(study: Any, number: int) -> bool:
    """Whether ``study`` has a trial numbered ``number`` (numbers run 0, 1, ... in creation order): one lookup by the
    storage's index instead of a read of every trial."""
    try:
        study._storage.get_trial_id_from_study_id_trial_number(study._study_id, number)
    except KeyError:
        return False
    return True
