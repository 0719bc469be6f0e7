"""Reproducible benchmarks: each module re-measures numbers that BENCHMARKS.md states.

Run one from the repository root as a module, ``python -m bench.<name> [--help]``: the root is then on the import
path, so the benchmark measures this checkout's grpo_sweep (and imports bench._common) without editing sys.path.
Each writes its numbers under bench/results/. Finished one-off studies are in bench/studies/ (``python -m
bench.studies.<name>``); bench/README.md says which is which.
"""
