"""Rewards that fail on demand, imported by path in the sweep-failure tests (also inside SLURM jobs)."""


def flaky(completions, fail=False, **kwargs):
    if fail:
        raise RuntimeError("flaky reward exploded (fail=true)")
    return [0.0 for _ in completions]


def killer(completions, kill=False, **kwargs):
    """Kills its whole process, as the kernel's OOM killer would."""
    if kill:
        import os

        os._exit(137)
    return [0.0 for _ in completions]
