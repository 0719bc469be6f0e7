"""User-style reward functions, imported by path in tests."""


def prefix_reward(completions, prefix="<think>", **kwargs):
    texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
    return [1.0 if t.startswith(prefix) else 0.0 for t in texts]


def no_kwargs(completions):
    return [0.0 for _ in completions]


def odd_length_raises(completions, **kwargs):
    """Raises on any completion of odd length: a reward with a bug that bites some samples."""
    texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
    for t in texts:
        if len(t) % 2:
            raise ValueError(f"cannot parse {t[:20]!r}")
    return [0.5 for _ in texts]


def leaks_secrets(completions, **kwargs):
    """A careless reward: logs a token and raises an error quoting a key."""
    import logging
    import os

    logging.getLogger("careless_reward").warning("using token %s", os.environ.get("HF_TOKEN"))
    raise RuntimeError(f"auth failed for key {os.environ.get('WANDB_API_KEY')}")
