"""Issue 13 study: which warm start gives the tiny model knowledge *and* a habit that GRPO can then elicit.

    python bench/warm_start_study.py --variant word_ops4 [--steps 1500] [--save DIR]

Each variant pre-trains the random tiny model (hidden 64, 2 layers) for ``--steps`` causal-LM steps of 32 lines
(lr 6e-3): a share of steps on plain arithmetic facts (``6 * 3 = 18.``, restate lines ``Take 6 * 3. 6 * 3 = 18.``),
the rest (``--chat``) on chat turns in the asked ``<think>``/``<answer>`` layout for questions that are *not*
arithmetic. It then asks the 64 held-out 2-operand questions of the built-in task (``What is the result of 6 * 3?``,
chat template, system prompt) and prints greedy strict accuracy (the ``correct`` reward), the share in ``format``,
and over 8 samples at temperature 1 the per-sample accuracy and pass@8. Variants (what the chat turns hold):

- ``facts_only``: no chat turns (the warm start that ships, ``model.tiny.warm_start``).
- ``word_ops4`` / ``word_ops16``: ``What is the result of 6 max 3?`` -> think ``6 max 3 = 6``, answer ``6``; 4 or 16
  word operations that choose one operand (max, min, first, last, ...).
- ``symbol_ops4``: the same with ``# @ ~ &`` as operations.
- ``filler``: the same questions (16 ops), think is a filler sentence, the answer the value; facts lines restate
  the expression with filler before the value (``Take 6 * 3. Hmm. It is 18.``).
- ``fresh_ops``: a fresh two-letter operation name in every turn (``6 qk 3``), whose value is always the first
  operand: the only way to learn the think line is to copy the operation.
- ``letter_ops``: string operations with the arithmetic symbols on letters (``ab + c = abc``, ``abc - b = ac``,
  ``ab * 2 = abab``).
"""
from __future__ import annotations

import argparse
import json
import random
import string
import time

VARIANTS = ("facts_only", "word_ops4", "word_ops16", "symbol_ops4", "filler", "letter_ops", "fresh_ops")
SYSTEM = "Respond in the following format:\n<think>\n...\n</think>\n<answer>\n...\n</answer>"
INTROS = ("Take", "Consider", "Now", "Look at", "Here is", "Next:", "Then")
FILLERS = ("", " Well,", " So", " Ok.", "\n", " Let us see.\n", " Hmm.")
THINKS = ("Let me see.", "I know this.", "Easy.", "Ok.", "Hmm, let me think.", "Right.")
FIRST, LAST = (lambda a, b: a), (lambda a, b: b)
OPS4 = {"max": max, "min": min, "first": FIRST, "last": LAST}
OPS16 = {**OPS4, "left": FIRST, "right": LAST, "high": max, "low": min, "top": max, "bottom": min, "keep": FIRST,
         "then": LAST, "or": max, "and": min, "pick": FIRST, "drop": LAST}
SYMBOLS4 = {"#": max, "@": min, "~": FIRST, "&": LAST}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--variant", choices=VARIANTS, required=True)
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--chat", type=float, default=0.4, help="share of steps on chat turns")
    parser.add_argument("--restate", type=float, default=0.6, help="share of restate lines among facts lines")
    parser.add_argument("--lr", type=float, default=6e-3)
    parser.add_argument("--save")
    args = parser.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from grpo_sweep.data.arithmetic import arithmetic_splits
    from grpo_sweep.models.tiny import TinySpec, ensure_tiny_model
    from grpo_sweep.rewards import REWARDS

    torch.set_num_threads(1)
    base = ensure_tiny_model(TinySpec())
    tok = AutoTokenizer.from_pretrained(base)
    tok.padding_side = "right"
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    rng = random.Random(0)
    table = [(f"{a} {op} {b}", a + b if op == "+" else a - b if op == "-" else a * b)
             for a in range(1, 10) for op in "+-*" for b in range(1, 10)]
    ops = {"word_ops4": OPS4, "symbol_ops4": SYMBOLS4}.get(args.variant, OPS16)

    def word(n: int) -> str:
        return "".join(rng.choice(string.ascii_lowercase) for _ in range(n))

    def chat_turn() -> str:
        if args.variant == "letter_ops":
            kind = rng.randrange(3)
            if kind == 0:
                x, y = word(rng.randint(1, 3)), word(rng.randint(1, 3))
                asked, value = f"{x} + {y}", x + y
            elif kind == 1:
                x = word(rng.randint(2, 4))
                y = rng.choice(x)
                asked, value = f"{x} - {y}", x.replace(y, "", 1)
            else:
                x, n = word(rng.randint(1, 2)), rng.randint(2, 3)
                asked, value = f"{x} * {n}", x * n
        elif args.variant == "fresh_ops":
            a, b = rng.randint(1, 9), rng.randint(1, 9)
            asked, value = f"{a} {word(2)} {b}", a
        else:
            op, a, b = rng.choice(list(ops)), rng.randint(1, 9), rng.randint(1, 9)
            asked, value = f"{a} {op} {b}", ops[op](a, b)
        think = rng.choice(THINKS) if args.variant == "filler" else f"{asked} = {value}"
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"What is the result of {asked}?"},
                    {"role": "assistant", "content": f"<think>\n{think}\n</think>\n<answer>\n{value}\n</answer>"}]
        return tok.apply_chat_template(messages, tokenize=False)

    def facts_line() -> str:
        expression, value = rng.choice(table)
        if rng.random() < args.restate:
            said = f"{rng.choice(THINKS)} It is {value}." if args.variant == "filler" else f"{expression} = {value}."
            return f"{rng.choice(INTROS)} {expression}{rng.choice('.?!:')}{rng.choice(FILLERS)} {said}"
        others = [rng.choice(table) for _ in range(rng.randint(0, 3))]
        return " ".join(f"{e} = {v}." for e, v in others + [(expression, value)])

    chat_share = 0.0 if args.variant == "facts_only" else args.chat
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    torch.manual_seed(0)
    start = time.perf_counter()
    model.train()
    for _ in range(args.steps):
        chat_step = rng.random() < chat_share  # a step is all chat or all facts: no padding facts to chat length
        batch = tok([chat_turn() if chat_step else facts_line() for _ in range(32)], return_tensors="pt",
                    padding=True, add_special_tokens=False)
        labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
        model(**batch, labels=labels).loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
    train_s = time.perf_counter() - start

    model.eval()
    tok.padding_side = "left"
    _, held_out = arithmetic_splits(179, 64, 2, 2, 9, 0)
    prompts = [tok.apply_chat_template([{"role": "system", "content": SYSTEM}, {"role": "user", "content": r["question"]}],
                                       tokenize=False, add_generation_prompt=True) for r in held_out]

    def generate(n: int, sample: bool) -> tuple[list[str], list[float]]:
        batch = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.no_grad():
            out = model.generate(**batch, max_new_tokens=32, do_sample=sample, temperature=1.0, num_return_sequences=n)
        texts = tok.batch_decode(out[:, batch["input_ids"].shape[1]:], skip_special_tokens=True)
        truths = [r["ground_truth"] for r in held_out for _ in range(n)]
        return texts, REWARDS["correct"](completions=texts, ground_truth=truths)

    greedy, right = generate(1, False)
    _, sampled = generate(8, True)
    result = {
        "variant": args.variant, "steps": args.steps, "chat": chat_share, "lr": args.lr, "train_s": round(train_s, 1),
        "greedy_accuracy": sum(right) / len(right),
        "format": sum(REWARDS["format"](completions=greedy)) / len(greedy),
        "sample_accuracy": sum(sampled) / len(sampled),
        "pass_at_8": sum(max(sampled[i * 8:(i + 1) * 8]) for i in range(len(held_out))) / len(held_out),
        "greedy_examples": greedy[:3],
    }
    print(json.dumps(result))
    if args.save:
        model.save_pretrained(args.save)
        tok.save_pretrained(args.save)


if __name__ == "__main__":
    main()
