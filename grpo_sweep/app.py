"""The Hydra task: validate, train (heavy imports happen only here), record, and return the objective."""
from __future__ import annotations

import logging
import math
import os
import time
import traceback
from typing import Any

from .run.context import from_hydra
from .sweeps.gate import check_run
from .sweeps.tables import number
from .run.redact import install_log_redaction
from .run.cost import costly_terms
from .run.results import read_run_summary, record_failure
from .run.distributed import (RankFailed, in_slurm_job_of_many_tasks, join_slurm_job, launch_here, peer_failure,
                               record_rank_failure, spawns_here)
from .run.validate import ConfigError, gpu_count, machine_world

log = logging.getLogger(__name__)
# what the end-of-run lines show for a figure the run did not measure
NA = "n/a"


def run_task(cfg: Any) -> float | None:
    install_log_redaction()
    context = from_hydra()  # the one place that asks how this run was launched
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not in_slurm_job_of_many_tasks():
        # each process would be a run of its own, with its own run directory and files
        raise SystemExit(f"grpo-sweep: launch.py was started as one of {os.environ['WORLD_SIZE']} processes (torchrun, "
                         "accelerate launch); it starts a run's processes itself: python launch.py distributed=ddp "
                         f"distributed.nproc_per_node={os.environ['WORLD_SIZE']}")
    if cfg.distributed.strategy != "none" and in_slurm_job_of_many_tasks():
        context = context.for_rank(join_slurm_job())  # SLURM started this task as one process of the run
    run_dir, overrides, multirun, worker = context.run_dir, context.overrides, context.multirun, context.optuna_worker
    try:
        # the gate once more, on the machine that trains: a compute node may lack what the login node has
        check_run(cfg, None if worker else run_dir, trains_here=True)
    except ConfigError as exc:
        if not multirun:
            # one line, not Hydra's traceback (a SystemExit is no job failure to Hydra; it stops the process)
            raise SystemExit(f"grpo-sweep: {exc}") from None
        if worker:
            raise  # an Optuna worker that cannot train any trial: the sweeper reports the failed worker
        # one refused run of a sweep is a failed run: recorded, in the table, and the others go on
        log.error("run %s refused: %s", run_dir, exc)
        if context.main:
            record_failure(run_dir, f"refused: {exc}", overrides)
        return math.nan
    if worker:
        from hydra.core.hydra_config import HydraConfig

        from .search.worker import run_worker

        return run_worker(cfg, HydraConfig.get(), context)
    previous, problem = read_run_summary(run_dir)
    if previous is not None and previous.status == "completed":
        # a sweep re-run into its own directory (to finish what was cut off) skips what is done
        print(f"grpo-sweep: {run_dir} already completed; not training it again\n{format_summary(previous.to_dict())}")
        return previous.objective
    if problem:
        log.warning("run %s: %s; training it again", run_dir, problem)
    started = time.time()
    EvaluationFailed = _NeverRaised  # until the training modules are imported
    try:
        from .backends import get_backend

        get_backend(cfg.backend.name)  # first: backend=unsloth must be imported before trl/transformers/peft
        from .run.evaluate import EvaluationFailed
        from .run.train import train  # torch, trl, transformers: only on the machine that trains
        from .tracking import open_logger

        if spawns_here(cfg):
            # torchrun's engine starts the ranks; this process waits for them and returns rank 0's summary
            summary = launch_here(cfg, context, machine_world(cfg, gpu_count())[0], open_tracker=open_logger)
        else:
            summary = train(cfg, context, open_tracker=open_logger)
    except EvaluationFailed as exc:
        # train() wrote the summary (training record, saved adapter, status failed, the error) and closed its tracker
        if not multirun:
            raise SystemExit(f"grpo-sweep: {exc}") from None
        log.error("run %s: %s", run_dir, exc)
        return math.nan
    except Exception as exc:
        # Not BaseException: submitit's requeue on preemption/timeout exits through here (SystemExit), and a
        # requeued run is not a failed one. Keep a record of the failure next to the run, so a sweep's table
        # shows it and why.
        error = f"{type(exc).__name__}: {exc}"
        if context.world_size > 1 and not context.main:
            # a SLURM task of a multi-process run: its error is the run's cause, and rank 0 (which writes the
            # run's record) only sees a peer gone at its next collective
            record_rank_failure(run_dir, context.rank, error)
        if context.main:
            if context.world_size > 1:
                error = peer_failure(run_dir, context.world_size) or error
            # keep_recorded: a rank that wrote its own fuller failure (its evaluation failed) keeps it
            record_failure(run_dir, error, overrides, traceback.format_exc(),
                           time.time() - started, keep_recorded=isinstance(exc, RankFailed))
        if not multirun:
            raise
        # In a sweep one failed run must not stop the others (Hydra's sweepers abort on a raised job) nor the
        # end-of-sweep table, which shows the failure; NaN is what Optuna records as a failed trial.
        log.error("run %s failed: %s: %s\n%s", run_dir, type(exc).__name__, exc, traceback.format_exc()[-2000:])
        return math.nan
    if summary is None:  # a rank other than 0: rank 0 reports the run
        return None
    print(format_summary(summary))
    return summary["objective"]


class _NeverRaised(Exception):
    pass


def format_summary(summary: dict) -> str:
    def v(key: str) -> str:
        return number(summary.get(key), missing=NA)

    lines = [
        f"grpo-sweep: run finished in {summary['runtime_s']:.1f} s ({summary['steps']} steps)",
        f"  reward (weighted)      {v('reward_first')} -> {v('reward')}",
    ]
    for name, final in summary["train_rewards"].items():
        first = summary["train_rewards_first"].get(name)
        lines.append(f"  rewards/{name:<14} {number(first, missing=NA)} -> {number(final, missing=NA)}")
    # only a term that weighs on the run's time (run/cost.COSTLY_SHARE: a judge, a reward model, a sandbox); the
    # cheap ones would be noise here
    for name, cost in costly_terms(summary):
        lines.append(f"  reward cost: {name} took {cost['share']:.1%} of training time "
                     f"({cost['seconds']:.1f} s in {cost['calls']} calls)")
    held = ", ".join(f"{n} {number(x, missing=NA)}" for n, x in (summary.get("test_rewards") or {}).items())
    steps = summary.get("eval_steps")
    lines.append(
        f"  validation ({summary.get('val_samples')} prompts): accuracy {v('val_accuracy_before')} -> "
        f"{v('val_accuracy')} at step {summary.get('reported_step')}"
        + (f" (chosen on {summary.get('best_metric')} among steps {steps})" if steps else "")
    )
    lines.append(
        f"  test ({summary.get('test_samples')} prompts, after training only): accuracy "
        f"{v('test_accuracy_before')} -> {v('test_accuracy')} (answer anywhere: "
        f"{v('test_accuracy_lenient_before')} -> {v('test_accuracy_lenient')})"
    )
    if summary.get("test_k"):
        k = summary["test_k"]
        lines.append(f"  test sampled ({k} per prompt): pass@{k} {v('test_pass_at_k')}, maj@{k} {v('test_maj_at_k')}")
    lines.append(f"  test rewards: {held}")
    if summary.get("base_model_sha256"):
        lines.append(f"  base model sha256 {summary['base_model_sha256'][:16]}")
    lines.append(f"  objective {summary['optimized_metric']} = {v('objective')}")
    lines.append(f"  saved to {summary['run_dir']}  (summary.json, metrics.jsonl, outcomes/, samples.jsonl, "
                 f"adapter {summary.get('adapter')})")
    return "\n".join(lines)

