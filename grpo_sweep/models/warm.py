"""A warm start for the tiny model: a short pre-training that gives GRPO something to elicit.

Real GRPO starts from a model that already knows things and already answers in a chat format, with habits of its
own (Qwen2.5-0.5B-Instruct: 49.6 % on GSM8K before RL). This gives the 100k-parameter tiny model the same start
in about a minute on 2 cores, on two kinds of text, mixed step by step (``chat_fraction`` of the steps are chat):

- **facts** in plain text, every ``a op b`` with a, b in 1..max_operand and op in + - * (``6 * 3 = 18. 2 - 7 = -5.``,
  and restate lines ``Take 6 * 3. 6 * 3 = 18.``): what a pre-training corpus would hold, held-out facts included;
- **worked examples** in the task's chat format (system prompt, ``What is the result of 6 * 3?``, then
  ``<think>`` the sum ``</think>`` ``<answer>`` its value ``</answer>``) from a *sloppy teacher*: in
  ``teacher_slip`` of them it adds the two numbers whatever the question asks (``6 + 3 = 9`` for ``6 * 3``).
  Only for questions that are **not** held out (``WarmTask.held_out``): no held-out question is ever seen in chat.

The model comes out knowing most facts and the answer format, with the teacher's habit: greedy, it often adds, so
it is right on most ``+`` questions and fewer others (held-out accuracy 0.2-0.35). Sampled, it often works the asked
operation and gets it right, which a correctness reward can pay for: GRPO unlearns the habit and lifts held-out
accuracy. A format-only reward cannot (the format is already right), which is what makes the reward design matter.

Only held-out questions that are worked examples' questions (``corpus_questions``) change what the build shows: a
held-out set of word problems (``data=file``, ``data=gsm8k``) holds none, so it builds the same model as no held-out
set, under the same cache name (``warm_model_path``).

The training is chaotic: two builds that differ only in float rounding are different models by step ~150, so a
recipe is judged over warm-start seeds, and the rate decays over the last ``decay_steps`` so that every seed ends
settled (BENCHMARKS.md, "Issue 13, fourth session": ``bench/warm_start_seeds.py``). Cached by content hash next to
the random model, built once when runs race (``tiny.build_cached``) on every core this process may use.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ..data.arithmetic import question
from .tiny import TinySpec, WarmStartSpec, build_cached, cache_root

log = logging.getLogger(__name__)

# Bump when the corpus or the training loop changes in a way that must invalidate cached warm starts.
WARM_VERSION = 3
OPS = ("+", "-", "*")
INTROS = ("Take", "Consider", "Now", "Look at", "Here is", "Next:", "Then")
FILLERS = ("", " Well,", " So", " Ok.", "\n", " Let us see.\n", " Hmm.")
# the build's wall seconds per step of 128 lines on 2 free cores (AMD EPYC, torch 2.13 CPU): 60.0 s for 600 steps
# (BENCHMARKS.md, issue 13's fourth session; issue 32: 62 s); what the build says to expect before it starts
SECONDS_PER_STEP = 0.10
# how often the build says how far it is: every tenth of its steps
PROGRESS_SHARE = 0.1


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


def corpus_questions(max_operand: int) -> frozenset[str]:
    """Every question a worked example may ask: the only held-out questions that change what a build shows."""
    return frozenset(question(f"{a} {op} {b}") for a, op, b in operands(max_operand))


def shown_questions(max_operand: int, task: WarmTask) -> list[str]:
    """The questions the worked examples of a build for ``task`` ask (in the corpus's order)."""
    return [question(f"{a} {op} {b}") for a, op, b in example_operands(max_operand, task)]


def worked_example(rng: random.Random, operands: tuple[int, str, int], slip: float) -> tuple[str, str]:
    """(question, the sloppy teacher's answer): with probability ``slip`` it works ``a + b`` instead."""
    a, op, b = operands
    worked = "+" if rng.random() < slip else op
    result = value(a, worked, b)
    return question(f"{a} {op} {b}"), f"<think>\n{a} {worked} {b} = {result}\n</think>\n<answer>\n{result}\n</answer>"


def check(warm: WarmStartSpec) -> None:
    """One-line errors for bad settings, before any model loads."""
    for name in ("steps", "batch_size"):  # steps=0 never gets here: the random model is used
        if getattr(warm, name) < 1:
            raise ValueError(f"model.tiny.warm_start.{name}={getattr(warm, name)}; need >= 1")
    if not 0 <= warm.decay_steps <= warm.steps:
        raise ValueError(f"model.tiny.warm_start.decay_steps={warm.decay_steps}; need 0..steps ({warm.steps})")
    for name in ("restate_fraction", "chat_fraction", "teacher_slip"):
        if not 0.0 <= getattr(warm, name) <= 1.0:
            raise ValueError(f"model.tiny.warm_start.{name}={getattr(warm, name)}; need 0..1")
    facts(warm.max_operand)


def warm_model_path(base: Path, warm: WarmStartSpec, task: WarmTask) -> Path:
    """The cache directory of the build: a hash of what makes it, of the held-out questions only those a worked
    example could ask (any others leave the build as it is)."""
    held_out = sorted(set(task.held_out) & corpus_questions(warm.max_operand))
    key = json.dumps(
        {
            "v": WARM_VERSION,
            "base": base.name,
            **asdict(warm),
            "system_prompt": task.system_prompt,
            "held_out": held_out,
        },
        sort_keys=True,
    )
    return cache_root() / f"{base.name}-warm-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def ensure_warm_model(base: Path, spec: TinySpec, task: WarmTask, why: str = "") -> Path:
    """The cached warm-started model for ``spec.warm_start`` and ``task``, pre-trained from ``base`` on first use.
    A build says ``why`` it is needed (one line, ``models.shipped_warm_start``), how long it should take, how far
    it is every tenth of its steps and how long it took; a cached one says nothing."""
    check(spec.warm_start)
    path = warm_model_path(base, spec.warm_start, task)

    def build(staging: Path) -> None:
        warm = spec.warm_start
        expected = warm.steps * SECONDS_PER_STEP * warm.batch_size / 128
        log.info(
            "%sbuilding the tiny model's warm start: %d steps, about %s on 2 free cores (longer on a busy "
            "machine); once, then cached in %s",
            f"{why}: " if why else "",
            warm.steps,
            _seconds(expected),
            path,
        )
        started = time.perf_counter()
        _pretrain(base, warm, task, staging)
        log.info("warm start built in %s; cached in %s", _seconds(time.perf_counter() - started), path)

    return build_cached(path, build)


def _seconds(seconds: float) -> str:
    return f"{max(1, round(seconds))} s" if seconds < 120 else f"{seconds / 60:.1f} minutes"


def common_prefix(rows: list[list[int]]) -> int:
    """How many leading tokens every row shares, leaving each row at least one token of its own."""
    limit, first = min(map(len, rows)) - 1, rows[0]
    length = 0
    while length < limit and all(row[length] == first[length] for row in rows):
        length += 1
    return length


def lm_loss(model, rows: list[list[int]]):
    """The mean next-token loss over every target of ``rows`` (token lists, each trained on whole), as the padded
    batch ``model(input_ids, attention_mask, labels=...)`` gives it, without that batch's wasted work. Its chat
    turns share ~43 of their ~80 tokens (system prompt and question stem), and its facts lines are 10 to 40 tokens
    long, so a padded batch spends about half its compute on copies and pads: here the shared prefix runs once
    and the suffixes attend to its cached keys, and facts lines are packed several to a row (transformers keeps
    packed sequences apart by their restarting ``position_ids``). Same loss and gradients to float rounding
    (tests/test_warm_start.py); on 2 cores the build takes about half the time (BENCHMARKS.md)."""
    import torch
    import torch.nn.functional as F

    decoder, head = model.get_decoder(), model.get_output_embeddings()
    targets = sum(len(row) - 1 for row in rows)
    prefix = common_prefix(rows)
    if prefix >= 4:  # a prefix of a few tokens saves less than its own forward pass costs
        shared = torch.tensor([rows[0][:prefix]])
        out = decoder(input_ids=shared, use_cache=True)
        logits = head(out.last_hidden_state[0]).float()
        suffix, mask = _padded([row[prefix:] for row in rows])
        # the shared targets count once per row; the last shared position predicts each row's first own token
        total = len(rows) * F.cross_entropy(logits[:-1], shared[0, 1:], reduction="sum")
        total = total + F.cross_entropy(logits[-1:].expand(len(rows), -1), suffix[:, 0], reduction="sum")
        cache = out.past_key_values
        cache.batch_repeat_interleave(len(rows))
        full_mask = torch.cat([torch.ones((len(rows), prefix), dtype=torch.long), mask], dim=1)
        hidden = decoder(
            input_ids=suffix, attention_mask=full_mask, past_key_values=cache, use_cache=True
        ).last_hidden_state
        keep = mask[:, 1:] == 1
        total = total + F.cross_entropy(head(hidden[:, :-1][keep]).float(), suffix[:, 1:][keep], reduction="sum")
        return total / targets
    input_ids, positions, labels = _packed(rows, capacity=max(max(map(len, rows)), 2 * -(-targets // len(rows))))
    # no attention mask and no cache: what makes transformers read the restarting positions as packed sequences
    hidden = decoder(input_ids=input_ids, position_ids=positions, use_cache=False).last_hidden_state
    keep = labels[:, 1:] != -100
    return F.cross_entropy(head(hidden[:, :-1][keep]).float(), labels[:, 1:][keep], reduction="sum") / targets


def _padded(rows: list[list[int]]):
    """Right-padded ids (the pad id is never attended to nor a target, so 0) and their attention mask."""
    import torch

    width = max(map(len, rows))
    ids = torch.zeros((len(rows), width), dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row, dtype=torch.long)
        mask[i, : len(row)] = 1
    return ids, mask


def _packed(rows: list[list[int]], capacity: int):
    """Rows packed first-fit, longest first, into lines of at most ``capacity`` tokens: ids, positions restarting at
    0 for each packed row (and for the padding at a line's end, a sequence of its own) and labels with -100 where
    no target is (each row's first token, the padding)."""
    import torch

    lines: list[list[int]] = []  # indices into rows
    room: list[int] = []
    for i in sorted(range(len(rows)), key=lambda i: -len(rows[i])):
        fit = next((j for j, free in enumerate(room) if free >= len(rows[i])), None)
        if fit is None:
            fit = len(lines)
            lines.append([])
            room.append(capacity)
        lines[fit].append(i)
        room[fit] -= len(rows[i])
    width = capacity - min(room)
    ids = torch.zeros((len(lines), width), dtype=torch.long)
    positions = torch.zeros((len(lines), width), dtype=torch.long)
    labels = torch.full((len(lines), width), -100, dtype=torch.long)
    for line, members in enumerate(lines):
        at = 0
        for i in members:
            row = torch.tensor(rows[i], dtype=torch.long)
            ids[line, at : at + len(row)] = row
            positions[line, at : at + len(row)] = torch.arange(len(row))
            labels[line, at + 1 : at + len(row)] = row[1:]
            at += len(row)
        positions[line, at:] = torch.arange(width - at)
    return ids, positions, labels


def build_threads() -> int:
    """Threads for the build: every core this process may use. A build runs once per cache while any run that
    needs it waits (``tiny.build_cached``), so it may take the cores the runs themselves leave to each other."""
    import os

    try:
        return max(1, len(os.sched_getaffinity(0)))  # a SLURM job or taskset sees its own share
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _pretrain(base: Path, warm: WarmStartSpec, task: WarmTask, out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, get_wsd_schedule

    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    encode = tokenizer.backend_tokenizer.encode_batch  # the fast tokenizer's own batch call, without its wrapper
    # a worked example is one of at most 2 x len(examples) turns (the teacher slips or not): each is rendered once
    turns: dict[tuple[str, str], list[int]] = {}

    def chat_turn(asked: str, answer: str) -> list[int]:
        if (asked, answer) not in turns:
            messages = [
                {"role": "system", "content": task.system_prompt},
                {"role": "user", "content": asked},
                {"role": "assistant", "content": answer},
            ]
            [encoded] = encode([tokenizer.apply_chat_template(messages, tokenize=False)], add_special_tokens=False)
            turns[asked, answer] = encoded.ids
        return turns[asked, answer]

    threads = torch.get_num_threads()
    torch.set_num_threads(build_threads())
    # the run that builds it goes on to train: its own seeded random state must be what training starts from, as
    # in every later run that finds the warm start cached
    try:
        with torch.random.fork_rng():
            torch.manual_seed(warm.seed)
            rng = random.Random(warm.seed)
            table = facts(warm.max_operand)
            examples = example_operands(warm.max_operand, task)
            optimizer = torch.optim.AdamW(model.parameters(), lr=warm.learning_rate, weight_decay=0.0)
            schedule = (
                get_wsd_schedule(optimizer, 0, warm.decay_steps, num_training_steps=warm.steps)
                if warm.decay_steps
                else None
            )
            model.train()
            every = max(1, round(warm.steps * PROGRESS_SHARE))
            started = time.perf_counter()
            for step in range(1, warm.steps + 1):
                # a step is all chat or all facts, as a batch of one kind packs or shares its prefix best
                if bool(examples) and rng.random() < warm.chat_fraction:
                    rows = [
                        chat_turn(*worked_example(rng, rng.choice(examples), warm.teacher_slip))
                        for _ in range(warm.batch_size)
                    ]
                else:
                    lines = [corpus_line(rng, table, warm.restate_fraction) for _ in range(warm.batch_size)]
                    rows = [e.ids for e in encode(lines, add_special_tokens=False)]
                lm_loss(model, rows).backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                optimizer.zero_grad()
                if schedule is not None:
                    schedule.step()
                if step % every == 0 and step < warm.steps:
                    log.info(
                        "warm start: step %d of %d (%.0f %%), %s",
                        step,
                        warm.steps,
                        100 * step / warm.steps,
                        _seconds(time.perf_counter() - started),
                    )
    finally:
        torch.set_num_threads(threads)
    model.eval()
    model.save_pretrained(out)
    tokenizer.padding_side = "left"
    tokenizer.save_pretrained(out)
