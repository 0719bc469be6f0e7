"""The value checks of the config groups that need nothing but their own values, one function a group.

Each failure is one sentence naming the key, the bad value and what would be valid, in the style of TRL's own
``GRPOConfig.__post_init__``. ``run/validate.validate`` calls these, and the checks of the groups whose meaning
lives elsewhere (the reward mix in ``rewards/``, the data's columns in ``data/``, the backend in ``backends/``,
the process world in ``run/distributed.py``), once a run, on the machine that launches it.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from omegaconf import OmegaConf

from .grpo_fields import OPTIMIZER_FIELDS, TRAINER_FIELDS, check_args, check_values

# model.dtype (models.check_model), a reward model's model_args.dtype
DTYPES = ("auto", "float32", "bfloat16", "float16")
LOGGERS = ("none", "wandb")
LOGGER_MODES = ("auto", "online", "offline", "disabled")
REPORTS = ("best", "final")
# distributed strategies run through DeepSpeed (NVIDIA GPUs only), which keeps float32 master weights of bf16 ones
DEEPSPEED = ("zero2",)


class ConfigError(ValueError):
    """A config value that cannot work; the message names it."""


# A reward weight multiplies scores of about 1 that are summed in float32 and squared in their spread: a nonzero
# weight above 1e6 overflows float32 or bf16 on the way (1e39 is inf: every advantage nan, a loss of 0), one below
# 1e-6 leaves a spread under GRPO's 1e-4 in the advantage's denominator, so it learns nothing
WEIGHTS = (1e-6, 1e6)
WEIGHTS_WHY = "a weight multiplies the reward in float32/bf16; beyond these it overflows or vanishes; 0 turns it off"


# numpy's seeder (transformers.set_seed, the data's shuffles) takes 0 .. 2**32 - 1 and raises on anything else when
# the run starts, on the compute node
SEED_MAX = 2**32 - 1


def seed_error(key: str, value: Any) -> str | None:
    """Why ``value`` cannot be the seed ``key``; None when it can."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= SEED_MAX:
        return f"{key}={value!r}: a seed must be a whole number in 0..{SEED_MAX} (numpy's seeder takes no other)"
    return None


def check_seeds(cfg: Any) -> None:
    """Every ``seed`` of the run's config (trainer.seed, data.seed, the tiny model's ...), Hydra's own node aside."""

    def walk(node: Any, prefix: str) -> None:
        for key, value in node.items():
            if isinstance(value, dict):
                walk(value, f"{prefix}{key}.")
            elif key == "seed" and seed_error(f"{prefix}{key}", value):
                raise ConfigError(seed_error(f"{prefix}{key}", value))

    for group in cfg:
        if group != "hydra" and OmegaConf.is_dict(cfg[group]):
            walk(OmegaConf.to_container(cfg[group], resolve=True), f"{group}.")


def updates_weights_in_place(cfg: Any) -> bool:
    """A full fine-tune (lora=none) on backend=trl without DeepSpeed: the optimizer updates the loaded weights
    themselves, so they must be float32 (in bf16, AdamW's small steps round to zero). Unsloth's full fine-tune
    handles its own precision."""
    return not cfg.lora.enabled and cfg.backend.name == "trl" and cfg.distributed.strategy not in DEEPSPEED


def check_lora(lora: Any) -> None:
    if lora.enabled and lora.r <= 0:
        raise ConfigError(f"lora.r={lora.r}: LoRA rank must be > 0 (or lora=none for full fine-tuning)")


def _check_fields(group: Any, names: tuple[str, ...], where: str) -> None:
    """The group's GRPOConfig fields against their domains (``grpo_fields.DOMAINS``): what GRPOConfig and torch's
    optimizer would refuse, or crash on, at the first step on the compute node."""
    try:
        check_values({name: group[name] for name in names}, where)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def check_optimizer(optimizer: Any) -> None:
    _check_fields(optimizer, OPTIMIZER_FIELDS, "optimizer")


def check_logger(logger: Any) -> None:
    if logger.name not in LOGGERS:
        raise ConfigError(f"logger.name={logger.name!r}; use one of: {', '.join(LOGGERS)}")
    if logger.mode not in LOGGER_MODES:
        raise ConfigError(f"logger.mode={logger.mode!r}; use one of: {', '.join(LOGGER_MODES)}")


def check_trainer(trainer: Any, args: Mapping[str, Any], backend: str) -> None:
    """The trainer group, its evaluation and ``args`` (``trainer.args`` as plain values: what goes to TRL's
    GRPOConfig as it is, checked against that backend's GRPOConfig fields)."""
    if trainer.num_generations < 2:
        raise ConfigError(
            f"trainer.num_generations={trainer.num_generations}: GRPO compares completions within a group, use >= 2"
        )
    _check_fields(trainer, TRAINER_FIELDS, "trainer")
    if trainer.torch_threads is not None and trainer.torch_threads < 1:
        raise ConfigError(f"trainer.torch_threads={trainer.torch_threads}: must be >= 1 (null: torch's default)")
    pause = trainer.pause_at_step
    if pause is not None and not 1 <= pause <= trainer.max_steps:
        raise ConfigError(
            f"trainer.pause_at_step={pause}: must be a step in 1..trainer.max_steps={trainer.max_steps} "
            "(null: train to the end)"
        )
    ev = trainer.eval
    for key in ("batch_size", "max_new_tokens"):
        if ev[key] is not None and ev[key] < 1:
            raise ConfigError(f"trainer.eval.{key}={ev[key]}: must be >= 1")
    if ev.num_samples < 0:
        raise ConfigError(f"trainer.eval.num_samples={ev.num_samples}: must be >= 0 (0: no samples.jsonl rows)")
    if not math.isfinite(ev.temperature) or ev.temperature < 0:
        raise ConfigError(f"trainer.eval.temperature={ev.temperature}: must be a finite number >= 0")
    if ev.every_steps < 0:
        raise ConfigError(
            f"trainer.eval.every_steps={ev.every_steps}: must be >= 0 (0: evaluate only before and after training)"
        )
    if ev.k < 0:
        raise ConfigError(f"trainer.eval.k={ev.k}: must be >= 0 (0: no pass@k / maj@k sampling)")
    if ev.k > 0 and ev.temperature <= 0:
        raise ConfigError(
            f"trainer.eval.temperature={ev.temperature} with trainer.eval.k={ev.k}: k samples at temperature 0 are "
            "k copies of the greedy answer; set trainer.eval.temperature > 0 (e.g. 1.0) or trainer.eval.k=0"
        )
    if ev.report not in REPORTS:
        raise ConfigError(f"trainer.eval.report={ev.report!r}; use one of: {', '.join(REPORTS)}")
    try:
        check_args(args, backend)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
