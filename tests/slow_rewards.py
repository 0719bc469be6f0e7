"""A reward as slow as a remote judge, imported by path in tests: it sleeps SLEEP_S on every call."""

import time

SLEEP_S = 0.020


def sleeps(completions, **kwargs):
    time.sleep(SLEEP_S)
    return [0.0 for _ in completions]
