"""Reading a sweep back: its run directories read once (results.py), the verdicts' one engine (stats.py; its moderated
mode's prior and critical value in moderation.py) and their words (wording.py), the tables (tables.py), report.md with
runs.csv (report.py) and its plots (plots.py). It knows no strategy: what a strategy adds (its verdicts, its report's
parts) it is given (search/base.py ``Strategy``). What only the benchmarks and the tests use (the null-sweep simulator)
lives in bench/."""
