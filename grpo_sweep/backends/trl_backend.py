"""The transformers + PEFT backend (``backend=trl``): runs anywhere, CPU included."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
from transformers.utils import logging as hf_logging

from .decoding import Decoding, hf_generation_config, only_token_ids
from .gpu_stack import check_device

log = logging.getLogger(__name__)
hf_logging.disable_progress_bar()  # "Loading weights" bars for a 100k-parameter model are noise

ADAPTER_DIR = "lora"
FULL_MODEL_DIR = "model"


class ModelConfigError(ValueError):
    """The model config asks for something this machine or model cannot do."""


def model_source(model_cfg: Any, data_cfg: Any) -> str:
    """Where to load the base model from: the cached tiny build (its warm start told the data's system prompt and
    held-out questions), or ``name_or_path``."""
    if model_cfg.tiny is not None:
        from grpo_sweep.data import held_out_questions
        from grpo_sweep.models import ensure_model
        from grpo_sweep.models.tiny import TinySpec

        spec = TinySpec.from_config(model_cfg.tiny, model_cfg.max_seq_length)
        held_out = held_out_questions(data_cfg) if spec.warm_start.steps else ()
        return str(ensure_model(spec, data_cfg.system_prompt, held_out))
    return model_cfg.name_or_path


def torch_dtype(name: str) -> torch.dtype:
    if name == "auto":
        if torch.cuda.is_available() and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32
    # any other name was refused by the gate (models.check_model)
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def load_tokenizer(source: str, trust_remote_code: bool = False):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"  # decoder-only generation pads on the left
    return tokenizer


def inference_device() -> str:
    """Where a finished run's model generates: the GPU when there is one (training places the model through the
    Trainer; a loaded run has no Trainer, and an 8B model generating on the CPU of a GPU machine takes hours)."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def load_base_model(model_cfg: Any, source: str, device: str | None = None, dtype: str | None = None):
    """``device``: load straight onto it (a device_map, which 4-bit weights need in place of ``.to``); ``dtype``:
    in place of model.dtype."""
    from transformers import AutoModelForCausalLM

    kwargs: dict[str, Any] = {
        "dtype": torch_dtype(dtype or model_cfg.dtype),
        "trust_remote_code": model_cfg.trust_remote_code,
    }
    if device is not None:
        kwargs["device_map"] = {"": device}
    if model_cfg.load_in_4bit:
        from transformers import BitsAndBytesConfig

        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_compute_dtype=kwargs["dtype"], bnb_4bit_quant_type="nf4"
        )
    return AutoModelForCausalLM.from_pretrained(source, **kwargs)


def linear_module_names(model) -> list[str]:
    return sorted({name.rsplit(".", 1)[-1] for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)})


def lora_targets(model, lora_cfg: Any) -> str | list[str]:
    """lora.target_modules, checked against the model's linear modules."""
    targets = lora_cfg.target_modules
    if isinstance(targets, str):
        return targets
    targets = list(targets)
    available = linear_module_names(model)
    missing = [t for t in targets if t not in available]
    if missing:
        raise ModelConfigError(
            f"lora.target_modules: {missing} not in the model; its linear modules are {available} "
            "(or use lora.target_modules=all-linear)"
        )
    return targets


def apply_lora(model, lora_cfg: Any):
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(
        r=lora_cfg.r,
        lora_alpha=lora_cfg.alpha,
        lora_dropout=lora_cfg.dropout,
        target_modules=lora_targets(model, lora_cfg),
        bias=lora_cfg.bias,
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, config)


def training_dtype(cfg: Any) -> str:
    """model.dtype, except ``auto`` for a full fine-tune without DeepSpeed: float32, the optimizer's master weights
    (auto would pick bf16 on a GPU, whose small updates round to zero; the gate refuses bf16 said outright there)."""
    from ..config.checks import updates_weights_in_place

    if cfg.model.dtype == "auto" and updates_weights_in_place(cfg):
        return "float32"
    return cfg.model.dtype


def load(cfg: Any):
    """(model, tokenizer) ready for GRPOTrainer: base model, with a LoRA adapter when lora.enabled."""
    check_device(cfg, torch.cuda.is_available())  # e.g. trainer.use_vllm (TRL's vLLM) on a CPU machine
    source = model_source(cfg.model, cfg.data)
    tokenizer = load_tokenizer(source, cfg.model.trust_remote_code)
    model = load_base_model(cfg.model, source, dtype=training_dtype(cfg))
    if cfg.lora.enabled:
        model = apply_lora(model, cfg.lora)
    return model, tokenizer


def save(model, tokenizer, run_dir: Path) -> Path:
    """Save the LoRA adapter (``lora/``) or the full model (``model/``) with its tokenizer."""
    out = run_dir / (ADAPTER_DIR if hasattr(model, "peft_config") else FULL_MODEL_DIR)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def load_trained(cfg: Any, run_dir: Path):
    """The trained model of a finished run, on the GPU when there is one: base + saved adapter, or the saved full
    model."""
    device = inference_device()
    adapter = run_dir / ADAPTER_DIR
    if adapter.is_dir():
        from peft import PeftModel

        source = model_source(cfg.model, cfg.data)
        # PEFT puts each LoRA layer on its base layer's device
        model = PeftModel.from_pretrained(load_base_model(cfg.model, source, device), adapter)
        return model, load_tokenizer(str(adapter))
    full = run_dir / FULL_MODEL_DIR
    if full.is_dir():
        model = load_base_model(cfg.model, str(full), device) if cfg.model.tiny is None else _load_plain(full, device)
        return model, load_tokenizer(str(full))
    raise FileNotFoundError(
        f"{run_dir} holds no trained weights ({ADAPTER_DIR}/ or {FULL_MODEL_DIR}/); did the run finish?"
    )


def _load_plain(path: Path, device: str):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path, device_map={"": device})


def chat_prompt_ids(tokenizer, prompts: list[list[dict]]) -> list[list[int]]:
    """The token ids of chat prompts, as GRPOTrainer builds them for training (the chat template tokenized without
    the tokenizer's own special tokens): a template that writes BOS itself (Llama 3) gets one BOS, where tokenizing
    the template's text the default way (what vLLM does to a text prompt) adds a second one."""
    encoded = tokenizer.apply_chat_template(prompts, add_generation_prompt=True, tokenize=True, return_dict=True)
    return [list(ids) for ids in encoded["input_ids"]]


@torch.no_grad()
def generate(model, tokenizer, prompts: list[list[dict]], decoding: Decoding, batch_size: int = 32) -> list[str]:
    """Batched chat generation with exactly ``decoding``'s settings: none from the model's generation config."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    ids = chat_prompt_ids(tokenizer, prompts)
    outputs: list[str] = []
    with only_token_ids(model) as token_ids:
        config = hf_generation_config(decoding, {**token_ids, "pad_token_id": tokenizer.pad_token_id})
        for start in range(0, len(ids), batch_size):
            # left padding (load_tokenizer): the new tokens start at the same column in every row
            batch = tokenizer.pad({"input_ids": ids[start : start + batch_size]}, return_tensors="pt").to(device)
            generated = model.generate(**batch, generation_config=config)
            new_tokens = generated[:, batch["input_ids"].shape[1] :]
            outputs.extend(tokenizer.batch_decode(new_tokens, skip_special_tokens=True))
    model.train(was_training)
    return outputs
