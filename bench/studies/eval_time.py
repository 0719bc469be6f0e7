"""How long each GPU recipe's held-out evaluations take, estimated from their token counts, on the engine that
generates them (``grpo_sweep.backends.decoding.evaluation_engine``) and on rank 0's HF ``generate``.

    python -m bench.studies.eval_time      # -> bench/results/eval_time.json (+ .md); composes configs, runs nothing

An estimate, not a measurement (no GPU lent here); the assumptions are stated in the output:
- the prompts each run generates for: validation at step 0, every ``trainer.eval.every_steps`` and the last step;
  test greedy on the reported weights and on the weights before training, and ``k`` samples a question.
- HF ``generate`` decodes a batch until its longest row ends (greedy GSM8K answers that loop reach the cap), so a
  batch of ``trainer.eval.batch_size`` costs ``max_new_tokens`` decoding steps of ``HF_STEP_S`` (7-8B bf16 on one
  H100-class GPU at batch 32-64, HF's own cache and sampling in Python: ~30 ms; 0.5B ~15 ms).
- vLLM generates every prompt's own length (``MEAN_COMPLETION`` tokens on GSM8K with a reasoning block) at
  ``VLLM_TOKENS_S`` a GPU (the recipes' own assumption: 5,000 tokens/s for 7-8B, 20,000 for 0.5B), on every GPU the
  engine has (the server's data-parallel copies; a colocated or Unsloth engine: rank 0's one).
"""

from __future__ import annotations

import math

from bench._common import command, compose, machine, parser, record, write
from grpo_sweep.backends.decoding import evaluation_engine

RECIPES = (
    "experiment=gsm8k_qwen0_5b",
    "experiment=walkthrough_llama8b",
    "experiment=qwen7b_server_1node",
    "experiment=qwen7b_server_2nodes",
)
# GSM8K (openai/gsm8k main): its test split; validation is carved from train (data.validation_size)
GSM8K_TEST = 1319
MEAN_COMPLETION = 300
HF_STEP_S = {"small": 0.015, "large": 0.030}
VLLM_TOKENS_S = {"small": 20_000, "large": 5_000}


def _size(cfg) -> str:
    name = str(cfg.model.name_or_path)
    return "small" if "0.5B" in name or "1.5B" in name else "large"


def evaluation_prompts(cfg) -> dict:
    """Prompts generated for, by kind: greedy (validation and test) and sampled (test, k a question)."""
    data, ev, trainer = cfg.data, cfg.trainer.eval, cfg.trainer
    val = min(int(data.validation_size), int(data.max_val_samples or data.validation_size))
    test = min(GSM8K_TEST, int(data.max_test_samples or GSM8K_TEST))
    every = int(ev.every_steps or 0)
    looks = 2 if every <= 0 else 1 + trainer.max_steps // every + (1 if trainer.max_steps % every else 0)
    return {
        "validation_looks": looks,
        "validation": val * looks,
        "test_greedy": 2 * test,
        "test_sampled": int(ev.k or 0) * test,
    }


def estimate(cfg) -> dict:
    prompts = evaluation_prompts(cfg)
    greedy = prompts["validation"] + prompts["test_greedy"]
    total = greedy + prompts["test_sampled"]
    size, ev = _size(cfg), cfg.trainer.eval
    max_new = int(ev.max_new_tokens or cfg.trainer.max_completion_length)
    hf_s = math.ceil(total / int(ev.batch_size)) * max_new * HF_STEP_S[size]
    plan = evaluation_engine(cfg)
    gpus = (
        int(cfg.trainer.vllm_server.data_parallel_size)
        if cfg.trainer.use_vllm and cfg.trainer.vllm_mode == "server"
        else 1
    )
    vllm_s = total * MEAN_COMPLETION / (VLLM_TOKENS_S[size] * gpus)
    return {
        "engine": plan.name,
        "why": plan.why,
        "prompts": prompts,
        "generations": total,
        "token_bound": total * max_new,
        "hf_generate_min": round(hf_s / 60, 1),
        "vllm_min": round(vllm_s / 60, 1),
        "vllm_gpus": gpus,
        "estimated_min": round((vllm_s if plan.name == "vllm" else hf_s) / 60, 1),
    }


def main(argv: list[str] | None = None) -> None:
    parser(__doc__).parse_args(argv)
    rows = {recipe.split("=", 1)[1]: estimate(compose([recipe])) for recipe in RECIPES}
    lines = [
        "| recipe | generations (val looks x prompts + test) | tokens at most | engine | estimate | "
        "on rank 0's HF generate |",
        "|---|---|---|---|---|---|",
    ]
    for name, row in rows.items():
        p = row["prompts"]
        lines.append(
            f"| `{name}` | {row['generations']:,} ({p['validation_looks']} x "
            f"{p['validation'] // p['validation_looks']} "
            f"+ {p['test_greedy']:,} greedy + {p['test_sampled']:,} sampled) | {row['token_bound'] / 1e6:.1f} M | "
            f"{row['engine']} ({row['vllm_gpus']} GPU{'s' if row['vllm_gpus'] > 1 else ''}) | "
            f"~{row['estimated_min']} min | ~{row['hf_generate_min']} min |"
        )
    record(
        "eval_time",
        {
            "command": command("bench.studies.eval_time", argv),
            "machine": machine(),
            "recipes": rows,
            "assumptions": {
                "mean_completion_tokens": MEAN_COMPLETION,
                "hf_step_s": HF_STEP_S,
                "vllm_tokens_per_s_per_gpu": VLLM_TOKENS_S,
            },
        },
    )
    write("eval_time.md", "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
