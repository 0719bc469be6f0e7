"""A reward that raises on demand, imported by path in the sweep-failure tests (also inside SLURM jobs)."""


def flaky(completions, fail=False, **kwargs):
    if fail:
        raise RuntimeError("flaky reward exploded (fail=true)")
    return [0.0 for _ in completions]
