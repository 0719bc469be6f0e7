"""Workers racing for a study's last trials: how many trials Optuna's MaxTrialsCallback makes against grpo-sweep's
budget lock (adapters/optuna.load_budgeted_study), over repeats.

    python -m bench.optuna_budget_race [--repeats 10] [--workers 4] [--trials 60] [--arms callback,lock]

Each repeat: a fresh SQLite study, ``--workers`` processes whose trials end at once. Prints the trial counts of each
arm. The guard test tests/test_adapters.py::test_optuna_workers_racing_for_the_last_trials_make_exactly_the_budget
runs this command with ``--repeats 1 --arms lock`` on each new Optuna.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from bench._common import parser


def _budgeted_worker(args):
    """One worker process of the study below: trials that end at once, as a fast-failing trial does."""
    storage_url, lock_path, n_trials, budgeted = args
    import optuna

    from grpo_sweep.adapters.optuna import TrialBudgetSpent, load_budgeted_study
    from grpo_sweep.search.optuna.storage import open_storage

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    storage = open_storage(storage_url)
    if not budgeted:  # Optuna's own budget, the arm the lock is compared with
        study = optuna.load_study(study_name="s", storage=storage)
        study.optimize(
            lambda t: t.suggest_float("x", 0, 1), callbacks=[optuna.study.MaxTrialsCallback(n_trials, states=None)]
        )
        return
    study = load_budgeted_study("s", storage, None, None, n_trials, lock_path)
    try:
        study.optimize(lambda t: t.suggest_float("x", 0, 1))
    except TrialBudgetSpent:
        pass


def study_trials_made_by_racing_workers(tmp_path, workers: int, n_trials: int, budgeted: bool = True) -> int:
    """The trials a study in ``tmp_path`` (study "s" in o.db) holds after ``workers`` processes raced for its budget."""
    import multiprocessing

    import optuna

    url = f"sqlite:///{tmp_path / 'o.db'}"
    optuna.create_study(study_name="s", storage=url)
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        pool.map(_budgeted_worker, [(url, str(tmp_path / "budget"), n_trials, budgeted)] * workers)
    return len(optuna.load_study(study_name="s", storage=url).trials)


def main() -> None:
    cli = parser(__doc__)
    cli.add_argument("--repeats", type=int, default=10)
    cli.add_argument("--workers", type=int, default=4)
    cli.add_argument("--trials", type=int, default=60)
    cli.add_argument("--arms", default="callback,lock", help="comma-separated: callback (Optuna's), lock (ours)")
    args = cli.parse_args()
    arms = args.arms.split(",")
    if not arms or set(arms) - {"callback", "lock"}:
        cli.error(f"--arms: {args.arms!r}; use callback, lock or callback,lock")
    for budgeted, name in ((False, "MaxTrialsCallback"), (True, "budget lock")):
        if ("lock" if budgeted else "callback") not in arms:
            continue
        counts = []
        for _ in range(args.repeats):
            with tempfile.TemporaryDirectory() as tmp:
                counts.append(study_trials_made_by_racing_workers(Path(tmp), args.workers, args.trials, budgeted))
        over = sum(c > args.trials for c in counts)
        print(f"{name}: {counts} ({over} of {args.repeats} over the budget of {args.trials})")


if __name__ == "__main__":
    main()
