"""Show an Optuna sweep's results, finished or running: ``python -m grpo_sweep.search.study <sweep_dir>``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grpo_sweep.search.study", description=__doc__)
    parser.add_argument("sweep_dir", type=Path)
    parser.add_argument("--no-plots", action="store_true")
    args = parser.parse_args(argv)
    from .config import StudyFileError
    from .report import study_report
    from .storage import StudyUnreadable

    try:
        print(study_report(args.sweep_dir, plots=not args.no_plots))
    except (FileNotFoundError, NotADirectoryError, StudyFileError, StudyUnreadable) as exc:
        print(f"grpo-sweep: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
