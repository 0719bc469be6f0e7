"""The Unsloth backend (``backend=unsloth``): the walkthrough's GPU path.

``FastLanguageModel.from_pretrained`` (4-bit, vLLM engine with ``fast_inference``) and ``get_peft_model``
(Unsloth gradient checkpointing), the LoRA saved with ``model.save_lora``, and generation through
``fast_generate`` with the run's LoRA request when the run has a vLLM engine; plain ``generate`` otherwise.
Without a GPU, Unsloth falls back to stock transformers + PEFT, which is what the CPU tests exercise.

Importing this module imports unsloth, and unsloth must be imported before trl/transformers/peft (it patches
them; imported later it runs unpatched, slower and with more memory). ``grpo_sweep.app`` and
``grpo_sweep.run.generate`` therefore import the backend before any training code. The module is not named
``unsloth`` so that it does not shadow the package.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from .decoding import Decoding
from .gpu_stack import (
    SKIP_CHECK_ENV,
    UNSLOTH_COMPILE_ENV,
    BackendError,
    check_cpu_fallback,
    check_device,
    check_stack,
    unsloth_compile_location,
)

log = logging.getLogger(__name__)

_IMPORTED_TOO_EARLY = [name for name in ("trl", "transformers", "peft") if name in sys.modules]

import torch  # noqa: E402  (torch before unsloth is fine; trl/transformers/peft are not)

# before `import unsloth`: a mismatched stack fails deep inside it
_LET_THROUGH = check_stack(need_vllm=False, cuda=torch.cuda.is_available())
check_cpu_fallback(torch.cuda.is_available())
_COMPILE_LOCATION = unsloth_compile_location()
if _COMPILE_LOCATION != os.environ.get(UNSLOTH_COMPILE_ENV):
    # ours, per process: nothing else can reuse it, so it goes when the process ends
    atexit.register(shutil.rmtree, _COMPILE_LOCATION, ignore_errors=True)
os.environ[UNSLOTH_COMPILE_ENV] = _COMPILE_LOCATION  # read when unsloth is imported
os.makedirs(_COMPILE_LOCATION, exist_ok=True)

import unsloth  # noqa: E402,F401  (patches trl/transformers/peft; must come before them)
from unsloth import FastLanguageModel  # noqa: E402

from . import trl_backend  # noqa: E402  (imports transformers: after unsloth)

if _IMPORTED_TOO_EARLY:
    log.warning(
        "%s imported before unsloth: Unsloth's patches may be missing; import grpo_sweep.backends.unsloth_backend "
        "first",
        ", ".join(_IMPORTED_TOO_EARLY),
    )
for problem in _LET_THROUGH:
    log.warning("unpinned GPU stack (%s=1): %s", SKIP_CHECK_ENV, problem)

# Where the model's saved adapter lies, so vLLM generation can load it as a LoRA request.
ADAPTER_ATTR = "grpo_sweep_adapter_dir"


def _dtype(name: str):
    if name == "auto":
        # on a GPU Unsloth picks bf16 or fp16 itself; its CPU fallback would pick bf16, slow on most CPUs
        return None if torch.cuda.is_available() else torch.float32
    return trl_backend.torch_dtype(name)


def _from_pretrained(cfg: Any, name: str):
    kwargs = dict(
        model_name=name,
        max_seq_length=cfg.model.max_seq_length,
        dtype=_dtype(cfg.model.dtype),
        load_in_4bit=cfg.model.load_in_4bit,  # Unsloth's default is True: always pass it
        fast_inference=cfg.backend.fast_inference,
        gpu_memory_utilization=cfg.backend.gpu_memory_utilization,
        use_gradient_checkpointing=cfg.backend.use_gradient_checkpointing,
        trust_remote_code=cfg.model.trust_remote_code,
        full_finetuning=not cfg.lora.enabled,
        random_state=cfg.backend.random_state,
    )
    if cfg.lora.enabled:
        kwargs["max_lora_rank"] = cfg.lora.r  # vLLM sizes its LoRA slots with it
    model, tokenizer = FastLanguageModel.from_pretrained(**kwargs)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"  # decoder-only generation pads on the left
    return model, tokenizer


def _get_peft_model(model, cfg: Any):
    return FastLanguageModel.get_peft_model(
        model,
        r=cfg.lora.r,
        target_modules=trl_backend.lora_targets(model, cfg.lora),
        lora_alpha=cfg.lora.alpha,
        lora_dropout=cfg.lora.dropout,
        bias=cfg.lora.bias,
        use_gradient_checkpointing=cfg.backend.use_gradient_checkpointing,
        random_state=cfg.backend.random_state,
    )


def check(cfg: Any) -> None:
    """Start-up checks on the training machine: GPU-only options need a GPU, fast_inference needs vllm."""
    check_device(cfg, torch.cuda.is_available())
    if cfg.backend.fast_inference:
        check_stack(need_vllm=True)


def load(cfg: Any):
    """(model, tokenizer) from FastLanguageModel, with Unsloth's LoRA when lora.enabled."""
    check(cfg)
    model, tokenizer = _from_pretrained(cfg, trl_backend.model_source(cfg.model, cfg.data))
    if cfg.lora.enabled:
        model = _get_peft_model(model, cfg)
    return model, tokenizer


def save(model, tokenizer, run_dir: Path) -> Path:
    """The LoRA the way Unsloth saves it (``model.save_lora``) into ``lora/``, or the full model into ``model/``."""
    if not hasattr(model, "peft_config"):
        return trl_backend.save(model, tokenizer, run_dir)
    out = run_dir / trl_backend.ADAPTER_DIR
    # save_lora is set by get_peft_model on GPUs; the CPU fallback is a plain PeftModel
    save_lora = getattr(model, "save_lora", None) or model.save_pretrained
    save_lora(str(out))
    tokenizer.save_pretrained(out)
    setattr(model, ADAPTER_ATTR, out)
    return out


def load_trained(cfg: Any, run_dir: Path):
    """A finished run's model: with fast_inference, base + vLLM engine + the LoRA as a request; else base + adapter."""
    check(cfg)
    adapter = run_dir / trl_backend.ADAPTER_DIR
    full = run_dir / trl_backend.FULL_MODEL_DIR
    if adapter.is_dir():
        base = trl_backend.model_source(cfg.model, cfg.data)  # also rebuilds the tiny base if its cache was cleared
        if cfg.backend.fast_inference:
            # the walkthrough's test: get_peft_model gives the model load_lora, fast_generate takes the request
            model, _ = _from_pretrained(cfg, base)
            model = _get_peft_model(model, cfg)
            setattr(model, ADAPTER_ATTR, adapter)
        else:
            model, _ = _from_pretrained(cfg, str(adapter))  # Unsloth loads the adapter's base, then the adapter
        return model, trl_backend.load_tokenizer(str(adapter))
    if full.is_dir():
        model, tokenizer = _from_pretrained(cfg, str(full))
        return model, tokenizer
    raise FileNotFoundError(
        f"{run_dir} holds no trained weights ({trl_backend.ADAPTER_DIR}/ or {trl_backend.FULL_MODEL_DIR}/); "
        "did the run finish?"
    )


def prepare_generation(model, tokenizer, run_dir: Path) -> None:
    """Before a held-out evaluation during training: vLLM serves a LoRA from disk, so save the current one."""
    if getattr(model, "vllm_engine", None) is None or not hasattr(model, "peft_config"):
        return
    out = run_dir / "eval_adapter"
    (getattr(model, "save_lora", None) or model.save_pretrained)(str(out))
    setattr(model, ADAPTER_ATTR, out)


def _lora_request(model):
    if not hasattr(model, "peft_config"):
        return None
    adapter = getattr(model, ADAPTER_ATTR, None)
    if adapter is None:
        raise BackendError("vLLM generation serves the saved LoRA: save the adapter (backend.save) before generating")
    return model.load_lora(str(adapter))


def generate(model, tokenizer, prompts: list[list[dict]], decoding: Decoding, batch_size: int = 32) -> list[str]:
    """Chat generation: vLLM's ``fast_generate`` with the run's LoRA when there is an engine, else ``generate``;
    either way with exactly ``decoding``'s settings."""
    if getattr(model, "vllm_engine", None) is None:
        was_training = model.training
        FastLanguageModel.for_inference(model)
        try:
            return trl_backend.generate(model, tokenizer, prompts, decoding, batch_size)
        finally:
            if was_training:
                FastLanguageModel.for_training(model)
    from vllm import SamplingParams

    # token ids as in training: vLLM would tokenize a text prompt with special tokens, a second BOS for Llama 3
    ids = trl_backend.chat_prompt_ids(tokenizer, prompts)
    # vLLM batches internally (batch_size does not apply)
    outputs = model.fast_generate(
        [{"prompt_token_ids": row} for row in ids],
        sampling_params=SamplingParams(**decoding.sampling_params()),
        lora_request=_lora_request(model),
    )
    return [output.outputs[0].text for output in outputs]
