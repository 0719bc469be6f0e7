"""`python -m grpo_sweep.sweeps.report <sweep_dir>`: a sweep's report.md, runs.csv and plots again (also of a running
sweep), written by reading/report.py with the parts the strategy that ran the sweep adds (search/)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ..reading.report import ReportNotWritten, write_report
from ..reading.stats import VERDICT_MODES
from ..search import of_sweep
from ..search.base import Strategy


def report_of(results, strategy: Strategy, plots: bool = True) -> Path:
    """report.md of a sweep read by ``strategy``, with its parts."""
    return write_report(results, plots, strategy.seeds_heading() or None, strategy.plot_options(results))


def build_report(
    sweep_dir: Path, direction: str | None = None, plots: bool = True, verdicts: str | None = None
) -> Path:
    """Write report.md (and plots/) into ``sweep_dir``; return the report's path. ``verdicts``: strict or moderated
    (default: the sweep's hydra.sweeper.verdicts; a seeds sweep's design keeps the mode it ran)."""
    strategy = of_sweep(sweep_dir)
    results = strategy.read(sweep_dir, direction, verdicts=verdicts)
    path = report_of(results, strategy, plots)
    used = strategy.verdict_mode(results)
    if verdicts is not None and used != verdicts:
        print(
            f"note: --verdicts {verdicts} does not apply: this sweep's design chose its seeds with {used} verdicts "
            "(seeds.json), and its verdicts are that design's",
            file=sys.stderr,
        )
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grpo_sweep.sweeps.report", description=__doc__.splitlines()[0])
    parser.add_argument("sweep_dir", type=Path, help="a sweep (multirun) directory, or one run's directory")
    parser.add_argument(
        "--direction",
        choices=("maximize", "minimize"),
        default=None,
        help="how to rank the objective (default: the Optuna study's direction, else maximize)",
    )
    parser.add_argument("--no-plots", action="store_true", help="write report.md only")
    parser.add_argument(
        "--verdicts",
        choices=VERDICT_MODES,
        default=None,
        help="moderated: seed-paired, borrowing strength across configurations (error promised for configurations "
        "up to 4x noisier than each other); strict: each configuration's own noise alone (any noise pattern); "
        "default: the sweep's hydra.sweeper.verdicts, else moderated",
    )
    args = parser.parse_args(argv)
    if not args.sweep_dir.is_dir():
        print(f"error: sweep_dir={args.sweep_dir} is not a directory", file=sys.stderr)
        return 2
    started = time.perf_counter()
    try:
        path = build_report(args.sweep_dir, args.direction, plots=not args.no_plots, verdicts=args.verdicts)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ReportNotWritten as exc:  # a read-only sweep: reading it is still this command's job
        printed = any(item.startswith(exc.path.name) for item in exc.unwritten)
        if printed:
            print(exc.text, end="")
        print(f"note: {exc}; " + ("the report is printed above" if printed else f"report: {exc.path}"), file=sys.stderr)
        return 0
    print(f"report: {path} ({time.perf_counter() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
