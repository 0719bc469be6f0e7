"""Backends build the model and tokenizer, apply LoRA, generate, and save/load the trained weights.

``trl``: transformers + PEFT (any machine). The Unsloth backend (FastLanguageModel, vLLM generation) plugs
in here under the same interface. Backends are imported lazily: naming one must not import torch.
"""
from __future__ import annotations

import importlib

BACKENDS = {"trl": "grpo_sweep.backends.hf"}


def get_backend(name: str):
    if name not in BACKENDS:
        raise ValueError(f"backend={name!r}; available backends: {', '.join(sorted(BACKENDS))}")
    return importlib.import_module(BACKENDS[name])
