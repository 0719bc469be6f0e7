"""A warm start for the tiny model: a short causal-LM pre-training on arithmetic facts written as plain text.

What it sees (``corpus``): lines of facts such as ``6 * 3 = 18. 2 + 7 = 9.`` and "restate" lines such as
``Take 6 * 3. 6 * 3 = 18.`` over every two-operand expression of single digits. Never a chat turn, a question
of the task (``What is the result of …``), the system prompt or the ``<think>``/``<answer>`` tags: whatever the
model later does in that format, GRPO taught it. Cached by content hash next to the random model it starts from.

Off by default because it does not yet do its job (measured, BENCHMARKS.md "Issue 13, first steps"): after 600
steps the model restates the right fact for 23 % of held-out chat questions (0 % from random), but in eight GRPO
settings (lr 1e-3 to 3e-3, beta 0.04 to 0.2, LoRA and full, 120 to 200 steps) it never found the ``<answer>`` tag
around that fact: a tag is sampled ~0.5 % of the time per position, and chasing ``xmlcount`` wears the restating
down. Next to try: a first reward that pays for the right number in the first sentence (then format), a longer
budget, and a smaller held-out split of 2-operand questions.
"""
from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict
from pathlib import Path

from grpo_sweep.config.schema import WarmStartConfig

from .tiny import TAG_TOKENS, TinySpec, build_cached, cache_root

# Bump when the corpus or the training loop changes in a way that must invalidate cached warm starts.
WARM_VERSION = 1
OPS = ("+", "-", "*")
INTROS = ("Take", "Consider", "Now", "Look at", "Here is", "Next:", "Then")
FILLERS = ("", " Well,", " So", " Ok.", "\n", " Let us see.\n", " Hmm.")


def facts(max_operand: int) -> list[tuple[str, int]]:
    """Every ``a op b`` with a, b in 1..max_operand and op in + - *, with its value."""
    if max_operand < 1:
        raise ValueError(f"model.tiny.warm_start.max_operand={max_operand}; need >= 1")
    return [
        (f"{a} {op} {b}", a + b if op == "+" else a - b if op == "-" else a * b)
        for a in range(1, max_operand + 1) for op in OPS for b in range(1, max_operand + 1)
    ]


def corpus_line(rng: random.Random, table: list[tuple[str, int]], restate_fraction: float) -> str:
    expression, value = rng.choice(table)
    if rng.random() < restate_fraction:
        intro, filler = rng.choice(INTROS), rng.choice(FILLERS)
        return f"{intro} {expression}{rng.choice('.?!:')}{filler} {expression} = {value}."
    others = [rng.choice(table) for _ in range(rng.randint(0, 3))]
    return " ".join(f"{e} = {v}." for e, v in others + [(expression, value)])


def warm_model_path(base: Path, warm: WarmStartConfig) -> Path:
    key = json.dumps({"v": WARM_VERSION, "base": base.name, **asdict(warm)}, sort_keys=True)
    return cache_root() / f"{base.name}-warm-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def ensure_warm_model(base: Path, spec: TinySpec) -> Path:
    """The cached warm-started model for ``spec.warm_start``, pre-trained from ``base`` on first use."""
    warm = spec.warm_start
    for name in ("steps", "batch_size"):  # steps=0 never gets here: the random model is used
        if getattr(warm, name) < 1:
            raise ValueError(f"model.tiny.warm_start.{name}={getattr(warm, name)}; need >= 1")
    if not 0.0 <= warm.restate_fraction <= 1.0:
        raise ValueError(f"model.tiny.warm_start.restate_fraction={warm.restate_fraction}; need 0..1")
    facts(warm.max_operand)  # a bad max_operand fails before any model loads
    return build_cached(warm_model_path(base, warm), lambda staging: _pretrain(base, warm, staging))


def _pretrain(base: Path, warm: WarmStartConfig, out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(base)
    tokenizer.padding_side = "right"
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    torch.manual_seed(warm.seed)
    rng = random.Random(warm.seed)
    table = facts(warm.max_operand)
    keep = torch.ones(len(tokenizer), dtype=torch.bool)
    if warm.mask_tag_tokens:
        keep[tokenizer.convert_tokens_to_ids(TAG_TOKENS)] = False
    # old vocabulary id -> column among the kept logits (the tags never occur as labels, so never need one)
    column = torch.cumsum(keep.long(), 0) - 1
    optimizer = torch.optim.AdamW(model.parameters(), lr=warm.learning_rate, weight_decay=0.0)
    model.train()
    for _ in range(warm.steps):
        batch = tokenizer(
            [corpus_line(rng, table, warm.restate_fraction) for _ in range(warm.batch_size)],
            return_tensors="pt", padding=True, add_special_tokens=False,
        )
        logits = model(**batch).logits[:, :-1][..., keep]
        labels = batch["input_ids"][:, 1:]
        labels = torch.where(batch["attention_mask"][:, 1:].bool(), column[labels], torch.full_like(labels, -100))
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
    model.eval()
    model.save_pretrained(out)
    tokenizer.padding_side = "left"
    tokenizer.save_pretrained(out)
