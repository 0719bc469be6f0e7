"""Checks that run on the composed config before anything heavy is imported, trained or submitted.

Each failure is one line naming the key, the bad value and what would be valid, in the style of TRL's
own ``GRPOConfig.__post_init__`` messages.
"""
from __future__ import annotations

from typing import Any

from .backends import BACKENDS
from .backends.gpu_stack import BackendError, check_config
from .rewards import RewardError
from .rewards.mix import check_mix

DATA_SOURCES = ("arithmetic", "hub", "file")


class ConfigError(ValueError):
    """A config value that cannot work; the message names it."""


def validate(cfg: Any) -> None:
    trainer, optimizer = cfg.trainer, cfg.optimizer
    if cfg.backend.name not in BACKENDS:
        raise ConfigError(f"backend.name={cfg.backend.name!r}; available: {', '.join(sorted(BACKENDS))}")
    if trainer.num_generations < 2:
        raise ConfigError(
            f"trainer.num_generations={trainer.num_generations}: GRPO compares completions within a group, use >= 2"
        )
    steps_per_generation = trainer.steps_per_generation or trainer.gradient_accumulation_steps
    generation_batch = trainer.per_device_train_batch_size * steps_per_generation
    if generation_batch % trainer.num_generations:
        raise ConfigError(
            f"trainer.num_generations={trainer.num_generations} must divide the generation batch "
            f"per_device_train_batch_size x steps_per_generation = {trainer.per_device_train_batch_size} x "
            f"{steps_per_generation} = {generation_batch}"
        )
    prompt_budget = trainer.max_prompt_length or 0
    if prompt_budget + trainer.max_completion_length > cfg.model.max_seq_length:
        raise ConfigError(
            f"trainer.max_prompt_length + trainer.max_completion_length = {prompt_budget} + "
            f"{trainer.max_completion_length} exceeds model.max_seq_length={cfg.model.max_seq_length}"
        )
    if trainer.max_steps <= 0:
        raise ConfigError(f"trainer.max_steps={trainer.max_steps}: must be > 0")
    if optimizer.learning_rate <= 0:
        raise ConfigError(f"optimizer.learning_rate={optimizer.learning_rate}: must be > 0")
    if cfg.lora.enabled and cfg.lora.r <= 0:
        raise ConfigError(f"lora.r={cfg.lora.r}: LoRA rank must be > 0 (or lora=none for full fine-tuning)")
    if cfg.data.source not in DATA_SOURCES:
        raise ConfigError(f"data.source={cfg.data.source!r}; use one of: {', '.join(DATA_SOURCES)}")
    try:
        check_mix(cfg.reward_mix)
        check_config(cfg)
    except (RewardError, BackendError) as exc:
        raise ConfigError(str(exc)) from None
