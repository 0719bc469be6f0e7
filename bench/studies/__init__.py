"""Finished one-off studies: each answered one question once (bench/README.md lists them). Run one from the
repository root, ``python -m bench.studies.<name> [--help]``; they share bench._common with the benchmarks and write
under bench/results/ as they do."""
