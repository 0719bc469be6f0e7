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


def fails_outside_training(completions, trainer_state=None, **kwargs):
    """Scores 0 in training (TRL passes its trainer_state) and raises in the held-out evaluation (no trainer state)."""
    if trainer_state is None:
        raise RuntimeError("this reward only works inside training")
    return [0.0 for _ in completions]


def fails_on_rank(completions, rank=1, **kwargs):
    """Raises in one process of a multi-process run (its RANK), scores 0 in the others."""
    import os

    if os.environ.get("RANK") == str(rank):
        raise RuntimeError(f"reward failed on rank {rank}")
    return [0.0 for _ in completions]
