"""Fault isolation for reward functions: check what a reward returns, and decide what a failure costs.

``on_error="raise"`` (default): a reward that raises stops the run with an error naming the reward, the sample
index and the (truncated) completion; ``"skip"``: that sample gets ``None`` from that reward (TRL skips it),
and the failures are counted (``failures`` on the wrapper, and TRL's ``log_metric`` as
``reward_failures/<name>``: failures per batch, averaged over the logging interval).
Either way a wrong-length list is an error, and so is a NaN/inf/non-numeric value in ``raise`` mode
(``skip`` mode turns it into ``None`` and counts it). A reward that could not score a sample for a reason of its
own (a judge that is down, a reply with no score) returns ``FAILED`` for it: ``None`` to TRL and a failure
counted in either mode, so ``failures`` is the one count of "this reward failed on this completion"; the reward
says why itself. ``samples`` counts the completions scored over the same calls as ``failures`` (training and
evaluations alike): ``failures == samples > 0`` is a reward that never scored one.

Each wrapper also times what its reward costs in training: ``seconds`` (wall time inside the call, the per-sample
retry of a failing batch included) and ``calls`` (batches scored), summed over the calls TRL makes. The
evaluations call the same wrappers without a trainer state (run/evaluate.py); those calls are not counted, so the
figures compare with the training time alone (train.reward_cost).
"""

from __future__ import annotations

import functools
import logging
import math
import numbers
import threading
import time

from ._text import completion_text

log = logging.getLogger(__name__)

ON_ERROR = ("raise", "skip")
SHOWN_CHARS = 200


class RewardFailure(RuntimeError):
    """A reward raised or returned something TRL cannot use; the message names the reward and the sample."""


def _shown(completion) -> str:
    text = completion_text(completion)
    return repr(text[:SHOWN_CHARS] + ("…" if len(text) > SHOWN_CHARS else ""))


def _bad_value(value) -> str | None:
    """Why ``value`` is not a usable score (None is usable: TRL skips it)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return f"non-numeric value {value!r}"
    if not math.isfinite(float(value)):
        return f"value {value!r}"
    return None


def _one_sample(kwargs: dict, n: int, i: int) -> dict:
    """The keyword arguments of sample ``i`` alone: every per-sample list sliced, the rest as they are."""
    return {k: [v[i]] if isinstance(v, (list, tuple)) and len(v) == n else v for k, v in kwargs.items()}


def guarded(fn, name: str, on_error: str = "raise"):
    """``fn`` checked and fault-isolated, still named ``name`` for TRL's ``rewards/<name>/mean``."""
    if on_error not in ON_ERROR:
        raise ValueError(f"reward_errors={on_error!r}; use one of: {', '.join(ON_ERROR)}")
    lock = threading.Lock()

    def call(completions, **kwargs):
        n = len(completions)
        log_metric = kwargs.get("log_metric")
        started = time.perf_counter()
        try:
            values = fn(completions=completions, **kwargs)
        except Exception as exc:  # noqa: BLE001  (find which sample, then raise or skip per on_error)
            values = _per_sample(completions, kwargs, exc)
        finally:
            if kwargs.get("trainer_state") is not None:  # TRL's training call, not an evaluation's
                elapsed = time.perf_counter() - started
                with lock:
                    call.seconds += elapsed
                    call.calls += 1
        if not isinstance(values, (list, tuple)) or len(values) != n:
            got = f"{len(values)} values" if isinstance(values, (list, tuple)) else f"a {type(values).__name__}"
            raise RewardFailure(f"reward {name!r} returned {got} for {n} completions; return one score per completion")
        values, failed, found = list(values), 0, 0
        for i, value in enumerate(values):
            if value is FAILED:  # the reward's own verdict, explained by the reward itself
                values[i], failed = None, failed + 1
                continue
            problem = "raised" if value is _RAISED else _bad_value(value)
            if problem is None:
                continue
            if on_error == "raise":
                raise RewardFailure(
                    f"reward {name!r} returned {problem} for sample {i}; completion {_shown(completions[i])}"
                )
            values[i], failed, found = None, failed + 1, found + 1
        values = [None if v is None else float(v) for v in values]
        with lock:
            call.failures += failed
            call.samples += n
            failed_before = call.failures > failed
        # in raise mode only FAILED fails without stopping the run: its metric starts with the first failure
        if callable(log_metric) and (on_error == "skip" or failed or failed_before):
            log_metric(f"reward_failures/{name}", float(failed))
        if found:
            log.warning("reward %r failed on %d of %d samples (scored None)", name, found, n)
        return values

    def _per_sample(completions, kwargs, batch_exc):
        # The batch call raised: call sample by sample to find which sample(s) break it.
        n, values = len(completions), []
        for i in range(n):
            try:
                value = fn(**_one_sample({"completions": completions, **kwargs}, n, i))
                values.append(value[0] if isinstance(value, (list, tuple)) and len(value) == 1 else value)
            except Exception as exc:  # noqa: BLE001
                if on_error == "raise":
                    raise RewardFailure(
                        f"reward {name!r} raised {type(exc).__name__}: {exc} on sample {i}; "
                        f"completion {_shown(completions[i])}"
                    ) from exc
                values.append(_RAISED)
        if on_error == "raise":  # every sample passed alone: the batch as a whole is the problem
            raise RewardFailure(
                f"reward {name!r} raised {type(batch_exc).__name__}: {batch_exc} on a batch of {n}"
            ) from batch_exc
        return values

    functools.update_wrapper(call, fn)
    call.__name__ = call.__qualname__ = name
    call.failures = call.samples = 0
    call.seconds, call.calls = 0.0, 0
    return call


class _Marker:
    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"<{self.name}>"


FAILED = _Marker("failed")
"""What a reward returns for a sample it could not score (a service down, a reply with no score): ``None`` to
TRL, counted in ``failures`` whatever ``reward_errors`` says. The reward logs why."""
_RAISED = _Marker("raised")  # a sample whose call raised, in skip mode
