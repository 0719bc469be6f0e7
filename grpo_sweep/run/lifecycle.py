"""One run, start to end, whoever starts it: the Hydra task (app.py), an Optuna trial (search/optuna/worker.py) and each
rank of a run over several processes (run/distributed.py) all call ``run_one``.

``run_one`` checks what is left to check here, imports the backend first (backend=unsloth must be imported before
trl, transformers or peft), trains in this process or over the ranks it starts, and returns the run's record.
Every way out of a run is recorded here, once:

- completed or pruned: training wrote summary.json; an Optuna trial's block joins it;
- refused (``gate`` raised ConfigError): summary.json says ``refused: <why>`` (rank 0's, on SLURM's tasks);
- failed after training (RunFailed: it made no optimizer step, a reward term scored nothing, its evaluation
  raised): training wrote the fuller record (what it trained, the saved adapter, the error), kept as it is;
- failed: ``results.record_failure`` (the error, its traceback, the time). On a SLURM task of a multi-process run a
  rank other than 0 leaves its error where rank 0 looks (``record_rank_failure``), and rank 0 names it as the run's
  cause (``peer_failure``); a rank that torchrun's engine started leaves the record to the process that started
  it, which sees the rank's failure as RankFailed;
- requeued (submitit's preemption or timeout leaves through SystemExit) or interrupted: no failure, nothing
  written; the next attempt continues from the run's checkpoint.

The exception then goes on to the caller, which decides what it means for its process (one line on the terminal,
NaN to a sweeper, a failed trial to Optuna).
"""

from __future__ import annotations

import time
import traceback
from dataclasses import replace
from typing import Any, Callable

from .context import RunContext
from .distributed import RankFailed, launch_here, peer_failure, record_rank_failure, spawns_here
from .phases import phases_of, run_phases
from .record import TRIAL_STATES, RunFailed, RunSummary
from .results import record_failure, write_summary
from .sharing import began, from_env, is_out_of_memory, out_of_memory_line
from .validate import ConfigError, gpu_count, machine_world


def run_one(
    cfg: Any,
    context: RunContext,
    gate: Callable[[Any], None] | None = None,
    open_tracker: Any = None,
    monitor: Callable[[int], Any] | None = None,
    trial: dict | None = None,
    train_fn: Callable | None = None,
) -> RunSummary | None:
    """Run one run and return its record (None on a rank other than 0 of a multi-process run).

    ``gate(cfg)``: what is left to check of the run on this machine (``validate.check_machine`` on a compute node,
    the whole gate for an Optuna trial, whose config is made here); None where the launch gated it here already.
    ``open_tracker``: as ``train`` takes it. ``monitor(rank)``: each rank's pruning monitor (an Optuna trial's).
    ``trial``: the Optuna trial's block for summary.json (its ``state`` is how the run ended).
    ``train_fn``: ``run.train.train`` unless a test gives a stand-in with its signature."""
    started = time.time()
    # a GPU shared with other runs (hydra.launcher.runs_per_gpu): its ledger says who trained beside whom
    share = from_env() if context.world_size == 1 and not context.parent_records else None
    if share is not None:
        began(share, context.run_dir, started)
    try:
        if gate is not None:
            gate(cfg)
        summary = _train(cfg, context, open_tracker, monitor, train_fn)
    except Exception as exc:  # not BaseException: a requeue (SystemExit) is no failure
        if share is not None and is_out_of_memory(exc):
            exc = MemoryError(out_of_memory_line(share, context.run_dir, started))
        _record_end(context, exc, time.time() - started, trial)
        raise
    finally:
        if share is not None:
            share.end(context.run_dir)
    if summary is not None and trial is not None:
        summary = _with_trial(context, summary, trial)
    return summary


def _train(
    cfg: Any, context: RunContext, open_tracker: Any, monitor: Callable[[int], Any] | None, train_fn: Callable | None
) -> RunSummary | None:
    from ..backends import get_backend

    get_backend(cfg.backend.name)  # first: backend=unsloth must be imported before trl/transformers/peft
    if spawns_here(cfg):
        # torchrun's engine starts the ranks, each runs run_one; this process waits and returns rank 0's record
        processes = machine_world(cfg, gpu_count())[0]
        return launch_here(cfg, context, processes, run_one, open_tracker=open_tracker, monitor=monitor)
    train = train_fn
    if train is None:
        from .train import train  # torch, trl, transformers: only on the machine that trains

    def run(config: Any) -> RunSummary | None:
        return train(config, context, monitor=monitor(context.rank) if monitor else None, open_tracker=open_tracker)

    if phases_of(cfg):  # trainer.phases: the config changes at given steps, each phase continuing the last
        return run_phases(cfg, context.run_dir, run, context.main)
    return run(cfg)


def _trial_block(trial: dict | None, status: str) -> dict:
    return {"trial": {**trial, "state": TRIAL_STATES[status]}} if trial is not None else {}


def _with_trial(context: RunContext, summary: RunSummary, trial: dict) -> RunSummary:
    summary = replace(summary, **_trial_block(trial, summary.status))
    write_summary(context.run_dir, summary)
    return summary


def _record_end(context: RunContext, exc: Exception, seconds: float, trial: dict | None) -> None:
    """The record of a run that raised: refused (the gate's ConfigError), failed after training (training wrote
    the fuller record), or failed."""
    if isinstance(exc, RunFailed):
        if trial is not None:
            _with_trial(context, exc.summary, trial)
        return
    if context.parent_records:  # the process that started this rank records the run (RankFailed)
        return
    if isinstance(exc, ConfigError):
        # one refused run of a sweep is a failed run: recorded, in the table, and the others go on
        if context.main:
            record_failure(context.run_dir, f"refused: {exc}", context.overrides, **_trial_block(trial, "failed"))
        return
    error = f"{type(exc).__name__}: {exc}"
    if not context.main:
        # a SLURM task of a multi-process run: its error is the run's cause, and rank 0 (which writes the run's
        # record) only sees a peer gone at its next collective
        record_rank_failure(context.run_dir, context.rank, error)
        return
    if context.world_size > 1:
        error = peer_failure(context.run_dir, context.world_size) or error
    # keep_recorded: a rank 0 that wrote its own fuller failure (its evaluation failed) keeps it
    record_failure(
        context.run_dir,
        error,
        context.overrides,
        traceback.format_exc(),
        seconds,
        keep_recorded=isinstance(exc, RankFailed),
        **_trial_block(trial, "failed"),
    )
