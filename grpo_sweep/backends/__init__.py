"""Backends build the model and tokenizer, apply LoRA, generate, and save/load the trained weights.

``trl``: transformers + PEFT (any machine). ``unsloth``: Unsloth's FastLanguageModel with vLLM generation
(GPU; stock transformers + PEFT through Unsloth's CPU fallback). Backends are imported lazily: naming one must
not import torch. Importing a backend is the first heavy import of a training process (unsloth must precede
trl/transformers/peft).
"""

from __future__ import annotations

import importlib

BACKENDS = {"trl": "grpo_sweep.backends.trl_backend", "unsloth": "grpo_sweep.backends.unsloth_backend"}


def get_backend(name: str):
    if name not in BACKENDS:
        raise ValueError(f"backend={name!r}; available backends: {', '.join(sorted(BACKENDS))}")
    return importlib.import_module(BACKENDS[name])
