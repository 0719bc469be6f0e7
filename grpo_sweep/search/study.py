"""`python -m grpo_sweep.search.study <sweep_dir>`: an Optuna study's report, finished or running; kept at the
spelling the docs and users' scripts use. The study's code is search/optuna/ (this runs optuna/study.py)."""

import sys

from .optuna.study import main

if __name__ == "__main__":
    sys.exit(main())
