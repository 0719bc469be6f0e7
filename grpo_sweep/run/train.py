"""One GRPO run: backend builds model/tokenizer → data → rewards → GRPOTrainer → evaluation → results."""
from __future__ import annotations

import contextlib
import logging
import os
import platform
import time
from importlib import metadata
from pathlib import Path
from typing import Any, Callable

from omegaconf import OmegaConf
from transformers import TrainerCallback
from transformers.trainer_callback import ProgressCallback

from ..backends import get_backend
from ..backends.gpu_stack import BackendError
from ..backends.trl import model_source
from ..models import weights_sha256
from ..data import load_splits
from .evaluate import (
    EvaluationFailed,
    Evaluator,
    PeriodicEval,
    evaluate,
    load_trainable,
    selection_metric,
    trainable_state,
)
from .cost import reward_cost, run_cost
from .files import append_jsonl, read_jsonl, write_jsonl_atomic
from .results import METRICS, SAMPLES, write_outcomes, lookup, reward_trajectory, write_summary
from .context import RunContext
from .redact import redact
from .tracker import RunLogger
from .vllm_serving import run_server, server_gpus
from .resume import last_checkpoint, record_resume, remember_config, trim_metrics
from ..config.grpo_fields import OPTIMIZER_FIELDS, TRAINER_FIELDS
from ..rewards.mix import build_mix, data_columns, describe_mix, needs_ground_truth

log = logging.getLogger(__name__)

# TRL 1.14's GRPOConfig defaults that Unsloth's GRPOConfig changes (tests check them against TRL's dataclass).
TRL_GRPO_DEFAULTS = {"epsilon": 0.2, "vllm_importance_sampling_correction": True}
GRPO_CONFIG = "grpo_config.json"
PACKAGES = (
    "grpo-sweep", "torch", "trl", "transformers", "peft", "datasets", "accelerate", "hydra-core", "math-verify",
    "unsloth", "unsloth_zoo", "vllm",
)


class MetricsJsonl(TrainerCallback):
    """Append every TRL log (one JSON object per logged step, TRL's keys) to metrics.jsonl as it happens."""

    def __init__(self, path: Path):
        self.path = path

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        append_jsonl(self.path, {"step": state.global_step, **logs})


class RewardProgress(ProgressCallback):
    """The usual progress bar, showing the current reward (and the latest held-out accuracy once a periodic
    evaluation has run) instead of printing every log dict."""

    def __init__(self, periodic: PeriodicEval | None = None):
        super().__init__()
        self.periodic = periodic

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero and self.training_bar is not None and logs and "reward" in logs:
            reward = logs["reward"]  # None when no sample of the step was scored (a judge that timed out: all None)
            postfix = {"reward": "none scored" if reward is None else f"{reward:.3f}"}
            results = self.periodic.results if self.periodic is not None else {}
            accuracy = results[max(results)].get("val_accuracy") if results else None
            if accuracy is not None:
                postfix["val_acc"] = f"{accuracy:.3f}"
            self.training_bar.set_postfix(postfix, refresh=False)


def grpo_config(cfg: Any, run_dir: Path, reward_weights: list[float], report_to: list[str] | None = None,
                server: dict | None = None):
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
        kwargs["deepspeed"] = OmegaConf.to_container(distributed.deepspeed, resolve=True) \
            if OmegaConf.is_config(distributed.deepspeed) else dict(distributed.deepspeed)
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
    extra = OmegaConf.to_container(trainer.args, resolve=True) if not isinstance(trainer.args, dict) else dict(trainer.args)
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
    staging = out.with_suffix(".json.tmp")
    staging.write_text(json.dumps(redact(args.to_dict()), indent=2, sort_keys=True, default=str) + "\n")
    staging.replace(out)
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
            len(dataset) - len(kept), len(dataset), which, max_prompt_length,
        )
    if len(kept) == 0:
        raise ValueError(
            f"every {which} prompt is longer than trainer.max_prompt_length={max_prompt_length} tokens; raise it"
        )
    return kept


def process_age_s() -> float | None:
    """Seconds since this process started (Linux /proc), or None elsewhere."""
    try:
        start_ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
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


TEST_KEYS = ("test_accuracy", "test_accuracy_lenient", "test_pass_at_k", "test_maj_at_k", "test_k", "test_rewards",
             "test_samples")


def summarize(cfg: Any, run_dir: Path, history: list[dict], evaluation: dict, runtime_s: float, steps: int, overrides: list[str],
              periodic: PeriodicEval | None = None, reported_step: int | None = None) -> dict:
    """summary.json of a run: ``evaluation`` holds the test split's figures (``test_*``, ``test_*_before``; empty
    for a run that never reached its test evaluation), ``periodic`` the validation ones."""
    train_history = [row for row in history if "reward" in row]
    reward_first, reward_final = reward_trajectory(train_history, "reward")
    per_reward = {}
    for name in cfg.reward_mix:
        first, last = reward_trajectory(train_history, f"rewards/{name}/mean")
        per_reward[name] = {"first": first, "final": last}
    summary = {
        "status": "completed",
        "optimized_metric": cfg.optimized_metric,
        "objective": None,
        **{key: evaluation.get(key) for key in TEST_KEYS},
        "test_accuracy_before": evaluation.get("test_accuracy_before"),
        "test_accuracy_lenient_before": evaluation.get("test_accuracy_lenient_before"),
        "reward": reward_final,
        "reward_first": reward_first,
        "train_rewards": {name: v["final"] for name, v in per_reward.items()},
        "train_rewards_first": {name: v["first"] for name, v in per_reward.items()},
        "reward_weights": {name: float(term.get("weight", 1.0)) for name, term in cfg.reward_mix.items()},
        "steps": steps,
        "runtime_s": round(runtime_s, 3),
        "overrides": overrides,
        "run_dir": str(run_dir),
        "versions": versions(),
    }
    if periodic is not None:
        summary.update(periodic_fields(periodic, steps if reported_step is None else reported_step))
    summary["objective"] = lookup(summary, cfg.optimized_metric)
    return summary


def term_costs(reward_funcs: list) -> dict[str, tuple[float, int]]:
    """(seconds, calls) in training of each reward the guard wraps (rewards/guard.py times them)."""
    return {fn.__name__: (fn.seconds, fn.calls) for fn in reward_funcs if hasattr(fn, "seconds")}


def periodic_fields(periodic: PeriodicEval, reported_step: int) -> dict:
    """The validation fields of summary.json: before training, at the step the run reports, the best step."""
    before = periodic.results.get(0) or {}
    reported = periodic.results.get(reported_step) or {}
    out = {
        "val_accuracy": reported.get("val_accuracy"),
        "val_accuracy_lenient": reported.get("val_accuracy_lenient"),
        "val_rewards": reported.get("val_rewards") or {},
        "val_samples": reported.get("val_samples"),
        "val_accuracy_before": before.get("val_accuracy"),
        "val_accuracy_lenient_before": before.get("val_accuracy_lenient"),
        "val_rewards_before": before.get("val_rewards") or {},
        "eval_steps": sorted(periodic.results),
        "reported_step": reported_step,
        "best_metric": periodic.metric,
        "best_step": periodic.best_step,
        "best_objective": periodic.best_value,
        "best": None,
    }
    if periodic.best_step is not None:
        result = periodic.results[periodic.best_step]
        out["best"] = {
            "step": periodic.best_step,
            "adapter": periodic.best_adapter,
            "val_accuracy": result.get("val_accuracy"),
            "val_accuracy_lenient": result.get("val_accuracy_lenient"),
            "val_rewards": result.get("val_rewards") or {},
        }
    if periodic.error:
        out["eval_error"] = periodic.error
    return out


def final_evaluations(cfg: Any, run_dir: Path, model, periodic: PeriodicEval, tester: Evaluator, step: int,
                      adapter: Path) -> tuple[int, Path, dict]:
    """After training: validation at the last step, then the weights the run reports (``trainer.eval.report``:
    the best validation step's, or the last), then the test split, once, on those weights and on the weights
    before training. Nothing here feeds back into a choice. Writes samples.jsonl, outcomes/ and a ``test/`` row
    in metrics.jsonl; returns (reported step, its adapter directory, the test figures)."""
    periodic.final(step, model, saved=adapter)
    reported = periodic.reported_step(step, cfg.trainer.eval.report)
    reported_adapter = adapter
    if reported != step:
        if periodic.best_state is not None:
            load_trainable(model, periodic.best_state)
            reported_adapter = run_dir / periodic.best_adapter
        else:  # resumed after the best step: its weights were in the process that died (best/ holds its adapter)
            log.warning("the best validation step %d's weights are not in memory after a resume: reporting step %d",
                        reported, step)
            reported = step
    if reported in periodic.outcomes:
        write_outcomes(run_dir, "val", periodic.outcomes[reported])
    if 0 in periodic.outcomes:
        write_outcomes(run_dir, "val_before", periodic.outcomes[0])

    mark = time.perf_counter()
    evaluation = tester.greedy(model)
    outcomes = {row["key"]: row for row in evaluation.pop("outcomes")}
    sampled = tester.sampled(model)
    for row in sampled.pop("outcomes", []):
        outcomes[row["key"]].update(row)
    evaluation.update(sampled)
    write_jsonl_atomic(run_dir / SAMPLES, evaluation.pop("samples"))
    write_outcomes(run_dir, "test", outcomes.values())
    seconds = time.perf_counter() - mark

    before_state = periodic.initial_state if periodic.initial_state is not None else lora_zero_state(model)
    if before_state is not None:
        now = trainable_state(model)
        load_trainable(model, before_state)
        try:
            before = tester.greedy(model)
        finally:
            load_trainable(model, now)
        write_outcomes(run_dir, "test_before", before.pop("outcomes"))
        evaluation["test_accuracy_before"] = before["test_accuracy"]
        evaluation["test_accuracy_lenient_before"] = before["test_accuracy_lenient"]
    else:
        log.warning("no weights from before training to test (a resumed full fine-tune): test_accuracy_before is not measured")
    row = {"step": step, "test/accuracy": evaluation.get("test_accuracy"),
           "test/accuracy_lenient": evaluation.get("test_accuracy_lenient"),
           "test/accuracy_before": evaluation.get("test_accuracy_before"),
           "test/pass_at_k": evaluation.get("test_pass_at_k"), "test/maj_at_k": evaluation.get("test_maj_at_k"),
           "test/runtime": round(seconds, 3)}
    periodic.write(row)
    return reported, reported_adapter, evaluation


def lora_zero_state(model) -> dict | None:
    """A LoRA's trainable weights with every ``lora_B`` zero: the model as it was before training (PEFT starts B at
    zero), for a resumed run whose start is no longer in memory. None for a full fine-tune."""
    if not hasattr(model, "peft_config"):
        return None
    state = trainable_state(model)
    return {name: (value.zero_() if "lora_B" in name else value) for name, value in state.items()}


def train(cfg: Any, run: Path | RunContext, overrides: list[str] | None = None, monitor=None,
          open_tracker: Callable[[Any, RunContext], RunLogger] | None = None) -> dict | None:
    """Train, evaluate and save one run; return its summary (None on a rank other than 0 of a multi-process run).
    ``run``: the context the task was told (``context.from_hydra``), or a bare run directory for a single run with
    ``overrides`` (the Python API, tests).

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


def _train(cfg: Any, context: RunContext, monitor, open_tracker) -> dict:
    backend = get_backend(cfg.backend.name)  # before the tracker (logger=wandb imports transformers)
    trainer_class = grpo_trainer_class(cfg.backend.name)
    import datasets

    datasets.disable_progress_bars()  # per-dataset map/filter bars drown the training bar

    started = time.perf_counter()
    timings = {"startup": startup_s()}
    context.run_dir.mkdir(parents=True, exist_ok=True)
    if open_tracker is None or not context.main:  # one tracker run a run: rank 0's
        if context.main and cfg.logger.name != "none" and cfg.logger.mode != "disabled":
            log.warning("logger=%s, but train() was given no tracker: pass open_tracker=grpo_sweep.tracking.open_logger",
                        cfg.logger.name)
        tracker = RunLogger()
    else:
        tracker = open_tracker(cfg, context)  # logger=none: a no-op
    tracker = _FinishOnce(tracker)
    try:
        with contextlib.ExitStack() as server:  # a vLLM server the run starts stops however the run ends
            return _train_tracked(cfg, context, monitor, tracker, backend, trainer_class, started, timings, server)
    except Exception as exc:
        # a run that raised still ends its tracker run (failed), so the next run in this process gets its own
        tracker.finish({"status": "failed", "error": redact(f"{type(exc).__name__}: {exc}")})
        raise


class _FinishOnce:
    """The run's tracker, finished at most once: a run that wrote its own failed summary (evaluation failed) and
    then raised is not finished again by the handler around it."""

    def __init__(self, tracker: RunLogger):
        self.tracker, self.done = tracker, False

    def __getattr__(self, name: str):
        return getattr(self.tracker, name)

    def finish(self, summary: dict) -> None:
        if self.done:
            return
        self.done = True
        try:
            self.tracker.finish(summary)
        except Exception as exc:  # noqa: BLE001  (the tracker must never hide the run's own result or error)
            if summary.get("status") != "failed":
                raise
            log.warning("could not close the %s run: %s", type(self.tracker).__name__, exc)


def _train_tracked(cfg: Any, context: RunContext, monitor, tracker: RunLogger, backend, trainer_class,
                   started: float, timings: dict, server: contextlib.ExitStack) -> dict:
    run_dir, overrides = context.run_dir, context.overrides
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
    # data first: hub data's columns are known only once loaded, and a reward missing one is refused before the model loads
    splits = load_splits(
        cfg.data, need_ground_truth=needs_ground_truth(cfg.reward_mix), need_columns=data_columns(cfg.reward_mix)
    )
    model, tokenizer = backend.load(cfg)
    source = model_source(cfg.model, cfg.data)
    base_sha256 = weights_sha256(source)
    train_set = filter_long_prompts(splits.train, tokenizer, cfg.trainer.max_prompt_length, "train")
    validation = filter_long_prompts(splits.validation, tokenizer, cfg.trainer.max_prompt_length, "validation")
    test_set = filter_long_prompts(splits.test, tokenizer, cfg.trainer.max_prompt_length, "test")
    reward_funcs, reward_weights = build_mix(cfg.reward_mix, cfg.trainer, on_error=cfg.reward_errors)
    log.info("%s", describe_mix(cfg.reward_mix))

    metrics_path = run_dir / METRICS
    # A run dir with a checkpoint is this run's earlier attempt (requeued, timed out, killed): continue it.
    resume_from = last_checkpoint(run_dir)  # every rank reads the same directory: all resume from one step
    resumes: list[dict] = []
    if resume_from and context.main:
        dropped = trim_metrics(run_dir, resume_from[1])
        resumes = record_resume(run_dir, resume_from[1], dropped)
        log.info("resuming from %s (step %d); dropped %d later metric rows", resume_from[0], resume_from[1], dropped)
    elif context.main:
        metrics_path.unlink(missing_ok=True)
        remember_config(run_dir, cfg)
    if context.world_size > 1:
        log.info("rank %d of %d (local rank %d, %d node%s) on %s%s", context.rank, context.world_size,
                 context.local_rank, context.nodes, "s" if context.nodes > 1 else "", platform.node(),
                 f", resuming at step {resume_from[1]}" if resume_from else "")
    callbacks = [MetricsJsonl(metrics_path)]
    evaluator = Evaluator(backend, tokenizer, validation, reward_funcs, cfg, run_dir, split="val")
    tester = Evaluator(backend, tokenizer, test_set, reward_funcs, cfg, run_dir, split="test")

    def write_eval_row(row: dict) -> None:
        append_jsonl(metrics_path, row)
        tracker.log_metrics(row)

    periodic = None
    if context.main:
        # rank 0 alone evaluates and keeps best/ (the others train on, and wait for it at the next step's
        # collectives): two ranks restoring or replacing best/ at once would undo each other
        periodic = PeriodicEval(
            evaluator, run_dir, cfg.trainer.eval.every_steps, selection_metric(cfg.optimized_metric),
            write=write_eval_row, save=lambda m, target: backend.save(m, tokenizer, target),
            history=read_jsonl(metrics_path) if resume_from else None,
        )
        callbacks.append(periodic)
    if monitor is not None:
        probe = validation.select(range(min(monitor.eval_samples, len(validation))))
        callbacks.append(monitor.callback(lambda m: evaluate(backend, m, tokenizer, probe, reward_funcs, cfg)))
    # trainer.vllm_mode=server: up and healthy before the trainer, whose __init__ connects to it (on rank 0)
    server_fields = server.enter_context(run_server(cfg, context, source))
    trainer = trainer_class(
        model=model,
        reward_funcs=reward_funcs,
        args=grpo_config(cfg, run_dir, reward_weights, tracker.report_to(), server_fields),
        train_dataset=train_set,
        processing_class=tokenizer,
        callbacks=callbacks,
    )
    if context.main:  # one writer: each rank's replace of the same staging file would find it gone
        write_grpo_config(run_dir, trainer.args)
    tracker.watch(trainer)
    trainer.remove_callback(ProgressCallback)
    if not cfg.trainer.disable_tqdm and not context.shares_terminal:
        trainer.add_callback(RewardProgress(periodic))
    mark = time.perf_counter()
    timings["setup"] = mark - started  # model, data, rewards, trainer
    trainer.train(resume_from_checkpoint=str(resume_from[0]) if resume_from else None)
    timings["train"] = time.perf_counter() - mark
    server.close()  # its GPUs are free for the final evaluation, which generates with the trained model itself
    if not context.main:
        return None  # rank 0 saves, evaluates and writes the run's summary
    timings["eval_periodic"] = periodic.seconds  # inside "train": the evaluations' share of it
    mark = time.perf_counter()
    adapter = backend.save(trainer.model, tokenizer, run_dir)
    timings["save"] = time.perf_counter() - mark

    def end(status: str, evaluation: dict, reported: int | None = None, reported_adapter: Path = adapter,
            **extra: Any) -> dict:
        """Write the run's summary.json, whatever its status, with every field a run that trained has (the
        training record, the adapter, costs, timings), and close the tracker with it."""
        metrics = read_jsonl(metrics_path)
        summary = summarize(cfg, run_dir, metrics, evaluation, time.perf_counter() - started,
                            trainer.state.global_step, overrides or [], periodic, reported_step=reported)
        summary.update(
            status=status,
            base_model_sha256=base_sha256,
            adapter=str(Path(reported_adapter).relative_to(run_dir)),
            resumed_from_steps=[r["from_step"] for r in resumes],
            reward_failures={fn.__name__: fn.failures for fn in reward_funcs},
            reward_cost=reward_cost(term_costs(reward_funcs), timings),
            timings_s={k: None if v is None else round(v, 3) for k, v in timings.items()},
            # where it trained: the pool pins each worker to a GPU through CUDA_VISIBLE_DEVICES
            device={"torch": str(next(trainer.model.parameters()).device),
                    "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")},
            distributed={"strategy": cfg.distributed.strategy, "world_size": context.world_size,
                         "nodes": context.nodes},
            **run_cost(timings, metrics, trainer.args, devices=context.world_size + server_gpus(cfg)),
        )
        if monitor is not None:
            summary.update(monitor.record())
        summary.update(extra)
        write_summary(run_dir, summary)
        tracker.finish(summary)
        return summary

    if monitor is not None and monitor.pruned:
        # Pruned: keep the partial record, skip the final evaluations so the worker is free at once.
        return end("pruned", {})

    mark = time.perf_counter()
    try:
        reported, reported_adapter, evaluation = final_evaluations(cfg, run_dir, trainer.model, periodic, tester,
                                                                   trainer.state.global_step, adapter)
    except Exception as exc:  # noqa: BLE001  (the adapter is saved; say what failed and keep the training record)
        error = redact(f"evaluation after training failed: {type(exc).__name__}: {exc}")  # it reaches the terminal too
        log.error("%s", error, exc_info=True)
        timings["eval"] = time.perf_counter() - mark
        end("failed", {}, error=error, failed_in="evaluation")
        raise EvaluationFailed(f"{error} (the trained adapter is saved in {adapter})") from exc
    timings["eval"] = time.perf_counter() - mark
    return end("completed", evaluation, reported, reported_adapter)
