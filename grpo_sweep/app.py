"""The Hydra task: how this process was launched, then one run (run/lifecycle.run_one), its end-of-run lines, and
the objective for the sweeper."""

from __future__ import annotations

import logging
import math
import os
import sys
import traceback
from typing import Any, NoReturn

from .reading.tables import number
from .run.context import RunContext, from_hydra
from .run.cost import costly_terms
from .run.distributed import RankFailed, in_slurm_job_of_many_tasks, join_slurm_job
from .run.lifecycle import run_one
from .run.record import RunFailed, RunSummary
from .run.redact import install_log_redaction
from .run.results import read_run_summary
from .run.validate import ConfigError, check_machine
from .tracking import open_logger

log = logging.getLogger(__name__)
# what the end-of-run lines show for a figure the run did not measure
NA = "n/a"
# the exit status of a launch the user interrupted (Ctrl-C), as a shell gives a process that SIGINT ended
INTERRUPTED = 130


def run_task(cfg: Any) -> float | None:
    install_log_redaction()
    context = task_context(cfg)
    if context.optuna_worker:
        return _optuna_worker(cfg, context)
    previous, problem = read_run_summary(context.run_dir)
    if previous is not None and previous.status == "completed":
        # a sweep re-run into its own directory (to finish what was cut off) skips what is done
        print(f"grpo-sweep: {context.run_dir} already completed; not training it again\n{format_summary(previous)}")
        return previous.objective
    if problem:
        log.warning("run %s: %s; training it again", context.run_dir, problem)
    # A single run passed the gate on this machine before Hydra started it (launching/preflight.py); a sweep's run
    # passed it where the sweep was launched, and a compute node may lack what that machine has.
    gate = check_machine if context.multirun else None
    try:
        summary = run_one(cfg, context, gate=gate, open_tracker=open_logger)
    except KeyboardInterrupt:
        interrupted(context)
    except (ConfigError, RunFailed, RankFailed) as exc:  # recorded in the run's summary.json; one line, not a traceback
        if not context.multirun:
            raise SystemExit(f"grpo-sweep: {exc}") from None  # no job failure to Hydra: it stops the process
        log.error("run %s%s: %s", context.run_dir, " refused" if isinstance(exc, ConfigError) else "", exc)
        return math.nan
    except Exception as exc:  # recorded in the run's summary.json
        if not context.multirun:
            raise
        # In a sweep one failed run must not stop the others (Hydra's sweepers abort on a raised job) nor the
        # end-of-sweep table, which shows the failure; NaN is what Optuna records as a failed trial.
        log.error("run %s failed: %s: %s\n%s", context.run_dir, type(exc).__name__, exc, traceback.format_exc()[-2000:])
        return math.nan
    if summary is None:  # a rank other than 0: rank 0 reports the run
        return None
    print(format_summary(summary))
    return summary.objective


def interrupted(context: RunContext) -> NoReturn:
    """The user's Ctrl-C while a run trained: lifecycle leaves the run as it is (its checkpoints, no failure
    recorded), so that the same command in its directory goes on from its last checkpoint; the launch stops, with
    one line saying how, and the exit status of an interrupt (130)."""
    if context.multirun:
        line = (
            f"interrupted in run {context.run_dir}; the same sweep with hydra.sweep.dir={context.run_dir.parent} "
            "continues it from its last checkpoint"
        )
    else:
        line = (
            f"interrupted; the same command with hydra.run.dir={context.run_dir} continues the run from its last "
            "checkpoint"
        )
    print(f"grpo-sweep: {line}", file=sys.stderr)
    raise SystemExit(INTERRUPTED) from None


def task_context(cfg: Any) -> RunContext:
    """The context of this Hydra job (the one place that asks how the run was launched), as this process's rank
    when SLURM started it as one task of a multi-process run."""
    context = from_hydra()
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not in_slurm_job_of_many_tasks():
        # each process would be a run of its own, with its own run directory and files
        raise SystemExit(
            f"grpo-sweep: launch.py was started as one of {os.environ['WORLD_SIZE']} processes (torchrun, "
            "accelerate launch); it starts a run's processes itself: python launch.py distributed=ddp "
            f"distributed.nproc_per_node={os.environ['WORLD_SIZE']}"
        )
    if cfg.distributed.strategy != "none" and in_slurm_job_of_many_tasks():
        context = context.for_rank(join_slurm_job())  # SLURM started this task as one process of the run
    return context


def _optuna_worker(cfg: Any, context: RunContext) -> float | None:
    """A worker job of grpo-sweep's Optuna sweeper: its trials run in it (each through run_one). Its config passed
    the gate where the study was launched; this machine is checked once for all its trials."""
    from hydra.core.hydra_config import HydraConfig

    from .search.optuna.worker import run_worker

    check_machine(cfg)  # a worker that cannot train any trial: the sweeper reports the failed worker
    return run_worker(cfg, HydraConfig.get(), context)


def chosen(s: RunSummary) -> str:
    """How the reported step was chosen: the best validation step, or the last one and which step was best."""
    if s.best_step is None or s.reported_step == s.best_step:
        return f"chosen on {s.best_metric} among steps {s.eval_steps}"
    return f"the last step; step {s.best_step} was best on {s.best_metric} among steps {s.eval_steps}"


def format_summary(summary: RunSummary | dict) -> str:
    """The end-of-run lines on the terminal."""
    s = summary if isinstance(summary, RunSummary) else RunSummary.from_dict(summary)

    def v(value: Any) -> str:
        return number(value, missing=NA)

    ended = (
        "paused (trainer.pause_at_step: the same command with a later one, or null, continues it)"
        if s.status == "paused"
        else "finished"
    )
    lines = [
        f"grpo-sweep: run {ended} in {s.runtime_s:.1f} s ({s.steps} steps)",
        f"  reward (weighted)      {v(s.reward_first)} -> {v(s.reward)}",
    ]
    for name, final in s.train_rewards.items():
        lines.append(f"  rewards/{name:<14} {v(s.train_rewards_first.get(name))} -> {v(final)}")
    # only a term that weighs on the run's time (run/cost.COSTLY_SHARE: a judge, a reward model, a sandbox); the
    # cheap ones would be noise here
    for name, cost in costly_terms(s):
        lines.append(
            f"  reward cost: {name} took {cost['share']:.1%} of training time "
            f"({cost['seconds']:.1f} s in {cost['calls']} calls)"
        )
    held = ", ".join(f"{n} {v(x)}" for n, x in (s.test_rewards or {}).items())
    lines.append(
        f"  validation ({s.val_samples} prompts): accuracy {v(s.val_accuracy_before)} -> "
        f"{v(s.val_accuracy)} at step {s.reported_step}" + (f" ({chosen(s)})" if s.eval_steps else "")
    )
    if s.status == "paused":
        lines.append("  test: not measured yet (it is measured once, on the weights the run reports when it ends)")
        lines.append(f"  objective {s.optimized_metric} = {v(s.objective)} at the pause")
        lines.append(
            f"  saved to {s.run_dir}  (summary.json, metrics.jsonl, outcomes/val.jsonl, checkpoints/, "
            f"adapter {s.adapter})"
        )
        return "\n".join(lines)
    lines.append(
        f"  test ({s.test_samples} prompts, after training only): accuracy "
        f"{v(s.test_accuracy_before)} -> {v(s.test_accuracy)} (answer anywhere: "
        f"{v(s.test_accuracy_lenient_before)} -> {v(s.test_accuracy_lenient)})"
    )
    if s.test_k:
        lines.append(
            f"  test sampled ({s.test_k} per prompt): pass@{s.test_k} {v(s.test_pass_at_k)}, "
            f"maj@{s.test_k} {v(s.test_maj_at_k)}"
        )
    lines.append(f"  test rewards: {held}")
    if s.base_model_sha256:
        lines.append(f"  base model sha256 {s.base_model_sha256[:16]}")
    lines.append(f"  objective {s.optimized_metric} = {v(s.objective)}")
    lines.append(
        f"  saved to {s.run_dir}  (summary.json, metrics.jsonl, outcomes/, samples.jsonl, adapter {s.adapter})"
    )
    return "\n".join(lines)
