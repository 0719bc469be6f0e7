"""User-style reward functions, imported by path in tests."""


def prefix_reward(completions, prefix="<think>", **kwargs):
    texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
    return [1.0 if t.startswith(prefix) else 0.0 for t in texts]


def no_kwargs(completions):
    return [0.0 for _ in completions]
