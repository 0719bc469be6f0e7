"""Workers racing for a study's last trials: how many trials Optuna's MaxTrialsCallback makes against grpo-sweep's
budget lock (adapters/optuna.load_budgeted_study), over repeats.

    python bench/optuna_budget_race.py [--repeats 10] [--workers 4] [--trials 60]

Each repeat: a fresh SQLite study, ``--workers`` processes whose trials end at once (the guard test's set-up,
tests/test_adapters.study_trials_made_by_racing_workers). Prints the trial counts of each arm.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--trials", type=int, default=60)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from tests.test_adapters import study_trials_made_by_racing_workers

    for budgeted, name in ((False, "MaxTrialsCallback"), (True, "budget lock")):
        counts = []
        for _ in range(args.repeats):
            with tempfile.TemporaryDirectory() as tmp:
                counts.append(study_trials_made_by_racing_workers(Path(tmp), args.workers, args.trials, budgeted))
        over = sum(c > args.trials for c in counts)
        print(f"{name}: {counts} ({over} of {args.repeats} over the budget of {args.trials})")


if __name__ == "__main__":
    main()
