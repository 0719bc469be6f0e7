"""A warm start for the tiny model: a short pre-training that gives GRPO something to elicit.

Real GRPO starts from a model that already knows things and already answers in a chat format, with habits of its
own (Qwen2.5-0.5B-Instruct: 49.6 % on GSM8K before RL). This gives the 100k-parameter tiny model the same start
in about a minute, on two kinds of text, mixed step by step (``chat_fraction`` of the steps are chat):

- **facts** in plain text, every ``a op b`` with a, b in 1..max_operand and op in + - * (``6 * 3 = 18. 2 - 7 = -5.``,
  and restate lines ``Take 6 * 3. 6 * 3 = 18.``): what a pre-training corpus would hold, held-out facts included;
- **worked examples** in the task's chat format (system prompt, ``What is the result of 6 * 3?``, then
  ``<think>`` the sum ``</think>`` ``<answer>`` its value ``</answer>``) from a *sloppy teacher*: in
  ``teacher_slip`` of them it adds the two numbers whatever the question asks (``6 + 3 = 9`` for ``6 * 3``).
  Only for questions that are **not** held out (``WarmTask.held_out``): no held-out question is ever seen in chat.

The model comes out knowing most facts and the answer format, with the teacher's habit: greedy, it adds, so it is
right on most ``+`` questions and few others (held-out accuracy ~0.2). Sampled, it often works the asked operation
and gets it right, which a correctness reward can pay for: GRPO unlearns the habit and lifts held-out accuracy. A
format-only reward cannot (the format is already right), which is what makes the reward design matter.
Measured in BENCHMARKS.md ("Issue 13, third session"). Cached by content hash next to the random model.
"""
from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path

from grpo_sweep.config.schema import WarmStartConfig
from grpo_sweep.data.arithmetic import question

from .tiny import TinySpec, build_cached, cache_root

# Bump when the corpus or the training loop changes in a way that must invalidate cached warm starts.
WARM_VERSION = 2
OPS = ("+", "-", "*")
INTROS = ("Take", "Consider", "Now", "Look at", "Here is", "Next:", "Then")
FILLERS = ("", " Well,", " So", " Ok.", "\n", " Let us see.\n", " Hmm.")


@dataclass(frozen=True)
class WarmTask:
    """What the warm start takes from the task: the system prompt of its chat turns, and the questions its worked
    examples must never show (the held-out split)."""

    system_prompt: str
    held_out: tuple[str, ...] = ()


def value(a: int, op: str, b: int) -> int:
    return a + b if op == "+" else a - b if op == "-" else a * b


def operands(max_operand: int) -> list[tuple[int, str, int]]:
    """Every ``(a, op, b)`` with a, b in 1..max_operand and op in + - *."""
    if max_operand < 1:
        raise ValueError(f"model.tiny.warm_start.max_operand={max_operand}; need >= 1")
    return [(a, op, b) for a in range(1, max_operand + 1) for op in OPS for b in range(1, max_operand + 1)]


def facts(max_operand: int) -> list[tuple[str, int]]:
    """Every ``a op b`` of ``operands`` as text, with its value."""
    return [(f"{a} {op} {b}", value(a, op, b)) for a, op, b in operands(max_operand)]


def corpus_line(rng: random.Random, table: list[tuple[str, int]], restate_fraction: float) -> str:
    """One plain-text line of facts."""
    expression, result = rng.choice(table)
    if rng.random() < restate_fraction:
        intro, filler = rng.choice(INTROS), rng.choice(FILLERS)
        return f"{intro} {expression}{rng.choice('.?!:')}{filler} {expression} = {result}."
    others = [rng.choice(table) for _ in range(rng.randint(0, 3))]
    return " ".join(f"{e} = {v}." for e, v in others + [(expression, result)])


def example_operands(max_operand: int, task: WarmTask) -> list[tuple[int, str, int]]:
    """The ``(a, op, b)`` of every worked example: each fact whose question is not held out."""
    held_out = set(task.held_out)
    return [(a, op, b) for a, op, b in operands(max_operand) if question(f"{a} {op} {b}") not in held_out]


def worked_example(rng: random.Random, operands: tuple[int, str, int], slip: float) -> tuple[str, str]:
    """(question, the sloppy teacher's answer): with probability ``slip`` it works ``a + b`` instead."""
    a, op, b = operands
    worked = "+" if rng.random() < slip else op
    result = value(a, worked, b)
    return question(f"{a} {op} {b}"), f"<think>\n{a} {worked} {b} = {result}\n</think>\n<answer>\n{result}\n</answer>"


def check(warm: WarmStartConfig) -> None:
    """One-line errors for bad settings, before any model loads."""
    for name in ("steps", "batch_size"):  # steps=0 never gets here: the random model is used
        if getattr(warm, name) < 1:
            raise ValueError(f"model.tiny.warm_start.{name}={getattr(warm, name)}; need >= 1")
    for name in ("restate_fraction", "chat_fraction", "teacher_slip"):
        if not 0.0 <= getattr(warm, name) <= 1.0:
            raise ValueError(f"model.tiny.warm_start.{name}={getattr(warm, name)}; need 0..1")
    facts(warm.max_operand)


def warm_model_path(base: Path, warm: WarmStartConfig, task: WarmTask) -> Path:
    key = json.dumps({"v": WARM_VERSION, "base": base.name, **asdict(warm), "system_prompt": task.system_prompt,
                      "held_out": sorted(task.held_out)}, sort_keys=True)
    return cache_root() / f"{base.name}-warm-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def ensure_warm_model(base: Path, spec: TinySpec, task: WarmTask) -> Path:
    """The cached warm-started model for ``spec.warm_start`` and ``task``, pre-trained from ``base`` on first use."""
    check(spec.warm_start)
    return build_cached(warm_model_path(base, spec.warm_start, task), lambda staging: _pretrain(base, spec.warm_start, task, staging))


def _pretrain(base: Path, warm: WarmStartConfig, task: WarmTask, out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(base)
    tokenizer.padding_side = "right"
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    # the run that builds it goes on to train: its own seeded random state must be what training starts from, as
    # in every later run that finds the warm start cached
    with torch.random.fork_rng():
        torch.manual_seed(warm.seed)
        rng = random.Random(warm.seed)
        table = facts(warm.max_operand)
        examples = example_operands(warm.max_operand, task)

        def chat_turn() -> str:
            asked, answer = worked_example(rng, rng.choice(examples), warm.teacher_slip)
            messages = [{"role": "system", "content": task.system_prompt}, {"role": "user", "content": asked},
                        {"role": "assistant", "content": answer}]
            return tokenizer.apply_chat_template(messages, tokenize=False)

        optimizer = torch.optim.AdamW(model.parameters(), lr=warm.learning_rate, weight_decay=0.0)
        model.train()
        for _ in range(warm.steps):
            # a step is all chat or all facts, so short facts lines are not padded to a chat turn's length
            chat = bool(examples) and rng.random() < warm.chat_fraction
            lines = [chat_turn() if chat else corpus_line(rng, table, warm.restate_fraction) for _ in range(warm.batch_size)]
            batch = tokenizer(lines, return_tensors="pt", padding=True, add_special_tokens=False)
            labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
            model(**batch, labels=labels).loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad()
    model.eval()
    model.save_pretrained(out)
    tokenizer.padding_side = "left"
    tokenizer.save_pretrained(out)
