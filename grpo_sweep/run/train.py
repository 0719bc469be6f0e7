"""One GRPO run: backend builds model/tokenizer → data → rewards → GRPOTrainer → evaluation (run/evaluate.py) → the
run's record (run/record.trained_summary)."""

from __future__ import annotations

import contextlib
import logging
import os
import platform
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Callable

import psutil
from omegaconf import OmegaConf
from transformers import TrainerCallback
from transformers.trainer_callback import ProgressCallback

from ..adapters.transformers import restore_checkpoint, scale_learning_rate
from ..adapters.trl import set_reward_weights
from ..backends import get_backend
from ..backends.decoding import evaluation_engine
from ..backends.gpu_stack import BackendError
from ..backends.trl_backend import model_source
from ..config.grpo_fields import OPTIMIZER_FIELDS, TRAINER_FIELDS
from ..data import load_splits
from ..models import weights_sha256
from ..rewards.mix import build_mix, data_columns, describe_mix, needs_ground_truth, scheduled_weights, terms
from ..rewards.schedule import progress_of, weights_at
from .context import RunContext
from .cost import reward_cost, run_cost
from .evaluate import (
    Evaluator,
    PeriodicEval,
    evaluate,
    final_evaluations,
    run_engine,
    selection_metric,
    write_val_outcomes,
)
from .files import append_jsonl, read_jsonl, write_text_atomic
from .record import WEIGHT_PREFIX, RunFailed, RunSummary, TestReport, ValReport, trained_summary, training_failure
from .redact import redact
from .results import METRICS, EvaluationFailed, lookup, reward_trajectory, write_summary
from .resume import last_checkpoint, record_resume, remember_config, trim_metrics
from .sharing import sharing_record
from .tracker import RunLogger
from .vllm_serving import run_server, server_gpus

log = logging.getLogger(__name__)

# TRL 1.14's GRPOConfig defaults that Unsloth's GRPOConfig changes (tests check them against TRL's dataclass).
TRL_GRPO_DEFAULTS = {"epsilon": 0.2, "vllm_importance_sampling_correction": True}
GRPO_CONFIG = "grpo_config.json"
PACKAGES = (
    "grpo-sweep",
    "torch",
    "trl",
    "transformers",
    "peft",
    "datasets",
    "accelerate",
    "hydra-core",
    "math-verify",
    "unsloth",
    "unsloth_zoo",
    "vllm",
)


class MetricsJsonl(TrainerCallback):
    """Append every TRL log (one JSON object per logged step, TRL's keys) to metrics.jsonl as it happens."""

    def __init__(self, path: Path):
        self.path = path

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        append_jsonl(self.path, {"step": state.global_step, **logs})


class RewardSchedule(TrainerCallback):
    """A scheduled mix's weights (rewards/schedule.py): set on the trainer as each step begins, before the step's
    generation is scored, from the step's progress (on a resume, the checkpoint's step: the schedule continues),
    and logged with the step's row as ``reward_weights/<term>`` (metrics.jsonl, the progress bar, the tracker).
    A generation that serves several steps (steps_per_generation) was scored at its first step's weights."""

    def __init__(self, names: list[str], weights: list[float], schedules: list, tracker: RunLogger):
        self.names, self.weights, self.schedules, self.tracker = names, weights, schedules, tracker
        self.current = list(weights)
        self.trainer = None

    def bind(self, trainer: Any) -> None:
        self.trainer = trainer

    def on_step_begin(self, args, state, control, **kwargs):
        self.current = weights_at(self.weights, self.schedules, progress_of(state.global_step, state.max_steps))
        set_reward_weights(self.trainer, self.current)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or "reward" not in logs:
            return
        row = {f"{WEIGHT_PREFIX}{name}": round(weight, 6) for name, weight in zip(self.names, self.current)}
        logs.update(row)  # before MetricsJsonl and the progress bar, which come after it
        if state.is_world_process_zero:
            self.tracker.log_metrics({"step": state.global_step, **row})

    def shown(self) -> dict[str, str]:
        return {f"w_{n}": f"{w:.2f}" for n, w, s in zip(self.names, self.current, self.schedules) if s is not None}


class PauseAt(TrainerCallback):
    """``trainer.pause_at_step``: training stops after that step, with a checkpoint of it (its validation ran in
    PeriodicEval's on_step_end, before the save), and the run is recorded "paused"; the same run continues from
    that checkpoint. The learning-rate and reward schedules keep counting to ``trainer.max_steps``."""

    def __init__(self, step: int):
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step >= self.step:
            control.should_save = True
            control.should_training_stop = True


class LearningRateFromConfig(TrainerCallback):
    """On a resume, the learning rate is the config's: a checkpoint restores the optimizer's and the scheduler's
    rates, which a plain resume keeps (its config must be the one it started with, ``resume.check_same_run``), and
    population-based training changes between rounds (search/pbt/population.py); the schedule's shape goes on from
    the step."""

    def __init__(self, learning_rate: float):
        self.learning_rate = float(learning_rate)

    def on_train_begin(self, args, state, control, optimizer=None, lr_scheduler=None, **kwargs):
        if state.global_step == 0 or optimizer is None or lr_scheduler is None:
            return
        before = scale_learning_rate(optimizer, lr_scheduler, self.learning_rate)
        if before != self.learning_rate:
            log.info(
                "learning rate %g from the config from step %d on (the checkpoint's: %g)",
                self.learning_rate,
                state.global_step,
                before,
            )


class RewardProgress(ProgressCallback):
    """The usual progress bar, showing the current reward (and the latest held-out accuracy once a periodic
    evaluation has run) instead of printing every log dict."""

    def __init__(self, periodic: PeriodicEval | None = None, schedule: RewardSchedule | None = None):
        super().__init__()
        self.periodic = periodic
        self.schedule = schedule

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero and self.training_bar is not None and logs and "reward" in logs:
            reward = logs["reward"]  # None when no sample of the step was scored (a judge that timed out: all None)
            postfix = {"reward": "none scored" if reward is None else f"{reward:.3f}"}
            latest = self.periodic.latest() if self.periodic is not None else None
            accuracy = latest.accuracy if latest is not None else None
            if accuracy is not None:
                postfix["val_acc"] = f"{accuracy:.3f}"
            if self.schedule is not None:
                postfix.update(self.schedule.shown())
            self.training_bar.set_postfix(postfix, refresh=False)


def grpo_config(
    cfg: Any, run_dir: Path, reward_weights: list[float], report_to: list[str] | None = None, server: dict | None = None
):
    import torch
    from trl import GRPOConfig

    trainer = cfg.trainer
    kwargs = {name: cfg.optimizer[name] for name in OPTIMIZER_FIELDS}
    kwargs.update({name: trainer[name] for name in TRAINER_FIELDS})
    warmup = kwargs["warmup_steps"]
    kwargs["warmup_steps"] = int(warmup) if float(warmup).is_integer() and warmup >= 1 else float(warmup)
    cuda = torch.cuda.is_available()
    bf16 = trainer.bf16 if trainer.bf16 is not None else bool(cuda and torch.cuda.is_bf16_supported())
    distributed = cfg.distributed
    if distributed.deepspeed:
        kwargs["deepspeed"] = (
            OmegaConf.to_container(distributed.deepspeed, resolve=True)
            if OmegaConf.is_config(distributed.deepspeed)
            else dict(distributed.deepspeed)
        )
    kwargs.update(
        ddp_timeout=int(distributed.timeout_s),
        # a LoRA's or a whole model's weights all take part in every step; True costs DDP a graph walk a step
        # (trainer.args.ddp_find_unused_parameters=true for a model that leaves some out)
        ddp_find_unused_parameters=False,
        output_dir=str(run_dir / "checkpoints"),
        save_strategy="steps",
        reward_weights=reward_weights,
        bf16=bf16,
        use_cpu=not cuda,
        report_to=list(report_to or []) or "none",
        logging_first_step=True,
    )
    extra = (
        OmegaConf.to_container(trainer.args, resolve=True) if not isinstance(trainer.args, dict) else dict(trainer.args)
    )
    # Unsloth's GRPOConfig changes TRL's defaults for these (an explicit loss_type=dapo gets epsilon_high=0.28, and
    # vLLM's sampling is not importance-corrected): pass TRL's values so both backends optimize the same objective.
    # trainer.args still sets them.
    kwargs["epsilon_high"] = extra.get("epsilon", TRL_GRPO_DEFAULTS["epsilon"])  # TRL: None, i.e. epsilon
    kwargs["vllm_importance_sampling_correction"] = TRL_GRPO_DEFAULTS["vllm_importance_sampling_correction"]
    kwargs.update(extra)
    kwargs.update(server or {})  # the run's own vLLM server: where it listens (run/vllm_serving.py)
    return GRPOConfig(**kwargs)


def write_grpo_config(run_dir: Path, args) -> Path:
    """The GRPOConfig the trainer really uses (after Unsloth's and TRL's own defaults), secrets masked, as
    ``grpo_config.json``: what two runs optimized, whichever backend built them."""
    import json

    out = run_dir / GRPO_CONFIG
    write_text_atomic(out, json.dumps(redact(args.to_dict()), indent=2, sort_keys=True, default=str) + "\n")
    return out


def filter_long_prompts(dataset, tokenizer, max_prompt_length: int | None, which: str):
    """TRL 1.14 has no max_prompt_length: drop prompts longer than it (cutting a chat prompt breaks it)."""
    if not max_prompt_length:
        return dataset

    def fits(row):
        text = tokenizer.apply_chat_template(row["prompt"], tokenize=False, add_generation_prompt=True)
        return len(tokenizer(text, add_special_tokens=False)["input_ids"]) <= max_prompt_length

    kept = dataset.filter(fits)
    if len(kept) < len(dataset):
        log.warning(
            "dropped %d of %d %s prompts longer than trainer.max_prompt_length=%d",
            len(dataset) - len(kept),
            len(dataset),
            which,
            max_prompt_length,
        )
    if len(kept) == 0:
        raise ValueError(
            f"every {which} prompt is longer than trainer.max_prompt_length={max_prompt_length} tokens; raise it"
        )
    return kept


def process_age_s() -> float | None:
    """Seconds since this process started, or None where the system will not say."""
    try:
        return max(0.0, time.time() - psutil.Process().create_time())
    except psutil.Error:
        return None


# time.monotonic() when the previous run of this process ended: the local and pool launchers run several runs
# in one process, and only the first pays the interpreter start and the torch/trl imports.
_previous_run_end: float | None = None


def startup_s() -> float | None:
    """What a run waited before its set-up: the process start and imports, or the gap since the previous run."""
    if _previous_run_end is not None:
        return time.monotonic() - _previous_run_end
    return process_age_s()


def versions() -> dict:
    out = {"python": platform.python_version()}
    for package in PACKAGES:
        try:
            out[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            pass
    return out


def training_record(
    cfg: Any, run_dir: Path, history: list[dict], runtime_s: float, steps: int, overrides: list[str]
) -> dict:
    """What training did, for the run's summary: the reward's and each term's first and last fifth of the logged
    steps, the steps, the time, what ran it."""
    train_history = [row for row in history if "reward" in row]
    reward_first, reward_final = reward_trajectory(train_history, "reward")
    per_reward = {name: reward_trajectory(train_history, f"rewards/{name}/mean") for name in cfg.reward_mix}
    return dict(
        reward=reward_final,
        reward_first=reward_first,
        train_rewards={name: last for name, (_, last) in per_reward.items()},
        train_rewards_first={name: first for name, (first, _) in per_reward.items()},
        reward_weights={name: float(term.get("weight", 1.0)) for name, term in cfg.reward_mix.items()},
        reward_schedule=_schedule_record(cfg.reward_mix),
        steps=steps,
        runtime_s=round(runtime_s, 3),
        overrides=overrides,
        run_dir=str(run_dir),
        versions=versions(),
    )


def _schedule_record(mix: Any) -> dict | None:
    return {t.name: t.schedule.record() for t in terms(mix) if t.schedule is not None} or None


def term_costs(reward_funcs: list) -> dict[str, tuple[float, int]]:
    """(seconds, calls) in training of each reward the guard wraps (rewards/guard.py times them)."""
    return {fn.__name__: (fn.seconds, fn.calls) for fn in reward_funcs if hasattr(fn, "seconds")}


def train(
    cfg: Any,
    run: Path | RunContext,
    overrides: list[str] | None = None,
    monitor=None,
    open_tracker: Callable[[Any, RunContext], RunLogger] | None = None,
) -> RunSummary | None:
    """Train, evaluate and save one run; return its record (None on a rank other than 0 of a multi-process run).
    ``run``: the context the task was told (``context.from_hydra``), or a bare run directory for a single run with
    ``overrides`` (the Python API, tests). A run's whole lifecycle (what is left to check, the backend first, its
    failure recorded) is ``lifecycle.run_one``; this is its training.

    ``monitor`` (a search.pruning.TrialMonitor) evaluates a few held-out prompts every N steps, reports to an
    Optuna trial and may stop training early; a pruned run keeps its partial results with status "pruned".

    ``open_tracker(cfg, context)`` starts the run's tracker (``tracking.open_logger``, as the task and the Optuna
    worker pass it); without one the run has none, whatever ``logger=`` says.
    """
    global _previous_run_end
    try:
        context = run if isinstance(run, RunContext) else RunContext(Path(run), list(overrides or []))
        return _train(cfg, context, monitor, open_tracker)
    finally:
        _previous_run_end = time.monotonic()


def grpo_trainer_class(backend_name: str):
    """trl.GRPOTrainer as it is now, after get_backend: `import unsloth` replaces it (and GRPOConfig), and a class
    bound before it would train the first run of a process with TRL's stock trainer and later ones with Unsloth's."""
    import trl

    trainer_class = trl.GRPOTrainer
    if backend_name == "trl" and trainer_class.__name__ != "GRPOTrainer":
        # the replacement cannot be undone in this process: an earlier run of it imported unsloth
        raise BackendError(
            f"backend=trl, but this process imported unsloth for an earlier run and trl.GRPOTrainer is now "
            f"{trainer_class.__module__}.{trainer_class.__name__}; run each backend in its own process "
            "(hydra/launcher=submitit_local or slurm, or one sweep per backend)"
        )
    return trainer_class


class _Clock:
    """The run's ``timings_s``: each step's seconds, counted from the previous mark."""

    def __init__(self):
        self.started = self.last = time.perf_counter()
        self.timings: dict[str, float | None] = {"startup": startup_s()}

    def restart(self) -> None:
        self.last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.timings[name], self.last = now - self.last, now

    def runtime(self) -> float:
        return time.perf_counter() - self.started


@dataclass
class _Run:
    """What a run builds before it trains, which the steps after training read."""

    trainer: Any
    tokenizer: Any
    reward_funcs: list
    periodic: PeriodicEval | None  # rank 0's; None on the others
    tester: Evaluator
    base_sha256: str | None
    resume_from: tuple[Path, int] | None
    resumes: list[dict]


def _train(cfg: Any, context: RunContext, monitor, open_tracker) -> RunSummary | None:
    """Train with the run's tracker open, and close it with the run's record however the run ends."""
    backend = get_backend(cfg.backend.name)  # before the tracker (logger=wandb imports transformers)
    trainer_class = grpo_trainer_class(cfg.backend.name)
    import datasets

    datasets.disable_progress_bars()  # per-dataset map/filter bars drown the training bar
    clock = _Clock()
    context.run_dir.mkdir(parents=True, exist_ok=True)
    tracker = _open_tracker(cfg, context, open_tracker)
    try:
        with contextlib.ExitStack() as server:  # a vLLM server the run starts stops however the run ends
            summary = _train_tracked(cfg, context, monitor, tracker, backend, trainer_class, clock, server)
    except RunFailed as exc:
        _close_failed(tracker, exc.summary)  # the record train wrote: the training, the saved adapter, the error
        raise
    except Exception as exc:
        # a run that raised still ends its tracker run (failed), so the next run in this process gets its own
        _close_failed(tracker, RunSummary("failed", error=redact(f"{type(exc).__name__}: {exc}")))
        raise
    if summary is not None:
        tracker.finish(summary)
    return summary


def _open_tracker(cfg: Any, context: RunContext, open_tracker) -> RunLogger:
    if open_tracker is None or not context.main:  # one tracker run a run: rank 0's
        if context.main and cfg.logger.name != "none" and cfg.logger.mode != "disabled":
            log.warning(
                "logger=%s, but train() was given no tracker: pass open_tracker=grpo_sweep.tracking.open_logger",
                cfg.logger.name,
            )
        return RunLogger()
    return open_tracker(cfg, context)  # logger=none: a no-op


def _close_failed(tracker: RunLogger, summary: RunSummary) -> None:
    try:
        tracker.finish(summary)
    except Exception as exc:  # noqa: BLE001  (the tracker must never hide the run's own error)
        log.warning("could not close the %s run: %s", type(tracker).__name__, exc)


def _train_tracked(
    cfg: Any,
    context: RunContext,
    monitor,
    tracker: RunLogger,
    backend,
    trainer_class,
    clock: _Clock,
    server: contextlib.ExitStack,
) -> RunSummary | None:
    """The run's steps: prepare the process, set up, train, save, evaluate, record. Returns the record, written
    (None on a rank other than 0, which trains only); a training that did not train (``record.training_failure``)
    raises RunFailed with it, an evaluation that fails EvaluationFailed."""
    _prepare_process(cfg, context)
    run = _set_up(cfg, context, monitor, tracker, backend, trainer_class, server)
    clock.lap("setup")  # model, data, rewards, trainer
    stop = cfg.trainer.pause_at_step or cfg.trainer.max_steps
    if run.resume_from and run.resume_from[1] >= stop:
        # its last step is done (killed before its evaluation, or a paused run continued to its end): the trainer
        # would train one more step before it looks at max_steps; load the checkpoint and go on to the evaluations
        restore_checkpoint(run.trainer, run.resume_from[0])
    else:
        run.trainer.train(resume_from_checkpoint=str(run.resume_from[0]) if run.resume_from else None)
    clock.lap("train")
    if evaluation_engine(cfg).name == "hf":
        server.close()  # its GPUs are free for the final evaluation, which generates with the trained model itself
    # else the final evaluation generates through the server, which stops when the run's block ends
    if not context.main:
        return None  # rank 0 saves, evaluates and writes the run's summary
    clock.timings["eval_periodic"] = run.periodic.seconds  # inside "train": the evaluations' share of it
    clock.restart()
    adapter = backend.save(run.trainer.model, run.tokenizer, context.run_dir)
    clock.lap("save")
    if monitor is not None and monitor.pruned:
        # Pruned: keep the partial record, skip the final evaluations so the worker is free at once.
        return _record(cfg, context, run, clock, monitor, "pruned", adapter)
    failure = _training_failure(cfg, context, run)
    if failure:  # nothing to evaluate: the weights are the ones training started from, or a term taught nothing
        summary = _record(
            cfg, context, run, clock, monitor, "failed", adapter, error=failure, failed_in="training", objective=None
        )
        raise RunFailed(failure, summary)
    step = run.trainer.state.global_step
    if cfg.trainer.pause_at_step is not None and step >= cfg.trainer.pause_at_step:
        # validation at this step (PauseAt's step evaluated before its checkpoint), no test: the run goes on later
        run.periodic.final(step, run.trainer.model, saved=adapter)
        paused = run.periodic.report(step)
        # the pause step's per-question outcomes: a PBT weighs one member's lead over another against their noise
        write_val_outcomes(context.run_dir, paused)
        return _record(cfg, context, run, clock, monitor, "paused", adapter, paused)
    clock.restart()
    try:
        val, test, reported_adapter = final_evaluations(
            cfg, context.run_dir, run.trainer.model, run.periodic, run.tester, run.trainer.state.global_step, adapter
        )
    except Exception as exc:  # noqa: BLE001  (the adapter is saved; say what failed and keep the training record)
        clock.lap("eval")
        error = redact(f"evaluation after training failed: {type(exc).__name__}: {exc}")  # it reaches the terminal too
        log.error("%s", error, exc_info=True)
        summary = _record(cfg, context, run, clock, monitor, "failed", adapter, error=error, failed_in="evaluation")
        raise EvaluationFailed(f"{error} (the trained adapter is saved in {adapter})", summary) from exc
    clock.lap("eval")
    return _record(cfg, context, run, clock, monitor, "completed", reported_adapter, val, test)


def _training_failure(cfg: Any, context: RunContext, run: _Run) -> str | None:
    """``record.training_failure`` of the training that just ended: its steps, each term's training mean and
    failures."""
    history = [row for row in read_jsonl(context.run_dir / METRICS) if "reward" in row]
    means = {name: reward_trajectory(history, f"rewards/{name}/mean")[1] for name in cfg.reward_mix}
    return training_failure(run.trainer.state.global_step, means, {fn.__name__: fn.failures for fn in run.reward_funcs})


def _prepare_process(cfg: Any, context: RunContext) -> None:
    """Seed, threads and devices, before anything of the run is built."""
    if needs_ground_truth(cfg.reward_mix):
        from ..rewards.mathcheck import HELPER

        HELPER.warm()  # math-verify's helper imports sympy while the model loads
    from transformers import set_seed

    set_seed(cfg.trainer.seed)  # before the adapter is initialised, so a seed reproduces a run
    if context.world_size > 1 and "ACCELERATE_TORCH_DEVICE" not in os.environ:
        import torch

        if not torch.cuda.is_available():
            # accelerate names a CPU rank's device cpu:<rank>, and transformers 5.17 resumes a run of several
            # processes by loading the optimizer state onto that device, which torch.load cannot (it knows "cpu"):
            # every rank is on the one CPU device anyway
            os.environ["ACCELERATE_TORCH_DEVICE"] = "cpu"
    if cfg.trainer.torch_threads:
        import torch

        torch.set_num_threads(cfg.trainer.torch_threads)


def _set_up(
    cfg: Any, context: RunContext, monitor, tracker: RunLogger, backend, trainer_class, server: contextlib.ExitStack
) -> _Run:
    """Data, model, rewards, where training starts (a resume), the evaluations and the trainer."""
    # data first: hub data's columns are known only once loaded, and a reward missing one is refused before the model
    # loads
    splits = load_splits(
        cfg.data, need_ground_truth=needs_ground_truth(cfg.reward_mix), need_columns=data_columns(cfg.reward_mix)
    )
    model, tokenizer = backend.load(cfg)
    source = model_source(cfg.model, cfg.data)
    base_sha256 = weights_sha256(source)
    train_set, validation, test_set = (
        filter_long_prompts(split, tokenizer, cfg.trainer.max_prompt_length, which)
        for split, which in ((splits.train, "train"), (splits.validation, "validation"), (splits.test, "test"))
    )
    reward_funcs, reward_weights = build_mix(cfg.reward_mix, cfg.trainer, on_error=cfg.reward_errors)
    log.info("%s", describe_mix(cfg.reward_mix))
    resume_from, resumes = _resume_or_start(cfg, context)
    periodic = _periodic_eval(cfg, context, backend, tokenizer, validation, reward_funcs, tracker, resume_from)
    scheduled = scheduled_weights(cfg.reward_mix)
    schedule = RewardSchedule(*scheduled, tracker) if scheduled else None
    # the schedule first: its on_log adds the weights to the row the others write
    callbacks = [
        *([schedule] if schedule else []),
        MetricsJsonl(context.run_dir / METRICS),
        *([periodic] if periodic else []),
        LearningRateFromConfig(cfg.optimizer.learning_rate),
    ]
    if cfg.trainer.pause_at_step is not None:  # after PeriodicEval: the pause step's validation comes before its save
        callbacks.append(PauseAt(cfg.trainer.pause_at_step))
    engine = None  # the run's vLLM once the trainer holding it is built; the probe reads it when it runs
    if monitor is not None:
        probe = validation.select(range(min(monitor.eval_samples, len(validation))))
        callbacks.append(monitor.callback(lambda m: evaluate(backend, m, tokenizer, probe, reward_funcs, cfg, engine)))
    # trainer.vllm_mode=server: up and healthy before the trainer, whose __init__ connects to it (on rank 0)
    server_fields = server.enter_context(run_server(cfg, context, source))
    trainer = trainer_class(
        model=model,
        reward_funcs=reward_funcs,
        args=grpo_config(cfg, context.run_dir, reward_weights, tracker.report_to(), server_fields),
        train_dataset=train_set,
        processing_class=tokenizer,
        callbacks=callbacks,
    )
    if schedule is not None:
        schedule.bind(trainer)
    if context.main:  # one writer: every rank holds the same config, and the run dir is shared
        write_grpo_config(context.run_dir, trainer.args)
    tracker.watch(trainer)
    trainer.remove_callback(ProgressCallback)
    if not cfg.trainer.disable_tqdm and not context.shares_terminal:
        trainer.add_callback(RewardProgress(periodic, schedule))
    engine = run_engine(cfg, trainer) if context.main else None  # rank 0 evaluates: through the run's vLLM, if any
    if periodic is not None:
        periodic.evaluator.engine = engine  # the trainer, which holds the engine, is built after its callbacks
    tester = Evaluator(backend, tokenizer, test_set, reward_funcs, cfg, context.run_dir, engine)
    return _Run(trainer, tokenizer, reward_funcs, periodic, tester, base_sha256, resume_from, resumes)


def _resume_or_start(cfg: Any, context: RunContext) -> tuple[tuple[Path, int] | None, list[dict]]:
    """A run dir with a checkpoint is this run's earlier attempt (requeued, timed out, killed): continue it from
    there (its checkpoint, and the resumes recorded so far); else start afresh."""
    run_dir = context.run_dir
    resume_from = last_checkpoint(run_dir)  # every rank reads the same directory: all resume from one step
    resumes: list[dict] = []
    if resume_from and context.main:
        dropped = trim_metrics(run_dir, resume_from[1])
        resumes = record_resume(run_dir, resume_from[1], dropped)
        log.info("resuming from %s (step %d); dropped %d later metric rows", resume_from[0], resume_from[1], dropped)
    elif context.main:
        (run_dir / METRICS).unlink(missing_ok=True)
        remember_config(run_dir, cfg)
    if context.world_size > 1:
        log.info(
            "rank %d of %d (local rank %d, %d node%s) on %s%s",
            context.rank,
            context.world_size,
            context.local_rank,
            context.nodes,
            "s" if context.nodes > 1 else "",
            platform.node(),
            f", resuming at step {resume_from[1]}" if resume_from else "",
        )
    return resume_from, resumes


def _periodic_eval(
    cfg: Any, context: RunContext, backend, tokenizer, validation, reward_funcs: list, tracker: RunLogger, resume_from
) -> PeriodicEval | None:
    """Rank 0's validation during training. Rank 0 alone evaluates and keeps best/ (the others train on, and wait
    for it at the next step's collectives): two ranks restoring or replacing best/ at once would undo each other."""
    if not context.main:
        return None
    metrics_path = context.run_dir / METRICS

    def write_eval_row(row: dict) -> None:
        append_jsonl(metrics_path, row)
        tracker.log_metrics(row)

    evaluator = Evaluator(backend, tokenizer, validation, reward_funcs, cfg, context.run_dir)
    return PeriodicEval(
        evaluator,
        context.run_dir,
        cfg.trainer.eval.every_steps,
        selection_metric(cfg.optimized_metric),
        also_at=cfg.trainer.pause_at_step,
        write=write_eval_row,
        save=lambda m, target: backend.save(m, tokenizer, target),
        history=read_jsonl(metrics_path) if resume_from else None,
    )


def _shared_cost(cost: dict, sharing: dict | None) -> dict:
    """A run that shared its GPU costs its share of the GPU's time (run/sharing.py), not the whole of it: the K
    runs of a GPU then sum to the GPU's time, not K times it."""
    if sharing is None:
        return cost
    seconds = cost["device_seconds"]
    if seconds is not None:
        seconds = round(seconds * sharing["share"], 3)
        tokens = cost["generated_tokens"]
        cost = {
            **cost,
            "device_seconds": seconds,
            "tokens_per_s": round(tokens / seconds, 1) if tokens and seconds else None,
        }
    return {**cost, "gpu_sharing": sharing}


def _record(
    cfg: Any,
    context: RunContext,
    run: _Run,
    clock: _Clock,
    monitor,
    status: str,
    adapter: Path,
    val: ValReport | None = None,
    test: TestReport | None = None,
    **extra: Any,
) -> RunSummary:
    """Write the run's summary.json, whatever its status, with every field a run that trained has (the training
    record, the adapter, costs, timings); ``val`` None: validation as it stood at the last step."""
    run_dir, steps, timings = context.run_dir, run.trainer.state.global_step, clock.timings
    metrics = read_jsonl(run_dir / METRICS)
    training = training_record(cfg, run_dir, metrics, clock.runtime(), steps, context.overrides or [])
    summary = trained_summary(
        status,
        cfg.optimized_metric,
        training,
        val or run.periodic.report(steps),
        test,
        lambda figures: lookup(figures, cfg.optimized_metric),
        base_model_sha256=run.base_sha256,
        adapter=str(Path(adapter).relative_to(run_dir)),
        resumed_from_steps=[r["from_step"] for r in run.resumes],
        reward_failures={fn.__name__: fn.failures for fn in run.reward_funcs},
        reward_cost=reward_cost(term_costs(run.reward_funcs), timings),
        timings_s={k: None if v is None else round(v, 3) for k, v in timings.items()},
        # where it trained: the pool pins each worker to a GPU through CUDA_VISIBLE_DEVICES
        device={
            "torch": str(next(run.trainer.model.parameters()).device),
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        },
        distributed={"strategy": cfg.distributed.strategy, "world_size": context.world_size, "nodes": context.nodes},
        **_shared_cost(
            run_cost(timings, metrics, run.trainer.args, devices=context.world_size + server_gpus(cfg)),
            sharing_record(run_dir),
        ),
        **(monitor.record() if monitor is not None else {}),
        **extra,
    )
    write_summary(run_dir, summary)
    return summary
