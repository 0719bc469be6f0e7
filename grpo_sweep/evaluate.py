"""Held-out evaluation: generate for held-out prompts, score with every reward of the mix and with accuracy."""
from __future__ import annotations

import math
from typing import Any

from .rewards import build_reward
from .rewards.mix import terms


def _mean(values: list) -> float | None:
    kept = [v for v in values if v is not None and math.isfinite(v)]
    return sum(kept) / len(kept) if kept else None


def accuracy_reward(cfg: Any):
    """The accuracy reward, with the params the mix gives it (e.g. a custom answer tag)."""
    name = cfg.trainer.eval.accuracy_reward
    for term in terms(cfg.reward_mix):
        if term.target == name:
            return build_reward(name, name, term.params)
    return build_reward(name)


def evaluate(backend, model, tokenizer, held_out, reward_funcs: list, cfg: Any) -> dict:
    """``{"eval_accuracy", "eval_rewards": {name: mean}, "eval_samples": n, "samples": [...]}``."""
    eval_cfg = cfg.trainer.eval
    prompts = list(held_out["prompt"])
    completions_text = backend.generate(
        model,
        tokenizer,
        prompts,
        max_new_tokens=eval_cfg.max_new_tokens or cfg.trainer.max_completion_length,
        temperature=eval_cfg.temperature,
        top_p=cfg.trainer.top_p,
        batch_size=eval_cfg.batch_size,
    )
    completions = [[{"role": "assistant", "content": text}] for text in completions_text]
    columns = {name: list(held_out[name]) for name in held_out.column_names if name != "prompt"}
    completion_ids = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in completions_text]
    kwargs = dict(prompts=prompts, completions=completions, completion_ids=completion_ids, **columns)

    scores = {fn.__name__: fn(**kwargs) for fn in reward_funcs}
    accuracy = accuracy_reward(cfg)(**kwargs)
    samples = [
        {
            "prompt": prompts[i],
            "ground_truth": columns.get("ground_truth", [None] * len(prompts))[i],
            "completion": completions_text[i],
            "accuracy": accuracy[i],
            "scores": {name: values[i] for name, values in scores.items()},
        }
        for i in range(min(eval_cfg.num_samples, len(prompts)))
    ]
    return {
        "eval_accuracy": _mean(accuracy),
        "eval_rewards": {name: _mean(values) for name, values in scores.items()},
        "eval_samples": len(prompts),
        "samples": samples,
    }
