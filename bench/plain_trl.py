"""The same training as `python launch.py` (the smoke main job), written as a plain TRL script.

    python -m bench.plain_trl SPEC.json

Run by bench/overhead.py: it reads the model directory, data and GRPOConfig that bench/overhead.py exported from
the composed config (SPEC.json), and does by hand what grpo-sweep does: seed, LoRA, train, save, evaluate.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from bench._common import parser


def main() -> None:
    cli = parser(__doc__)
    cli.add_argument("spec", type=Path, help="the spec bench/overhead.py wrote")
    spec_path = cli.parse_args().spec
    started = time.perf_counter()
    spec = json.loads(spec_path.read_text())
    import torch
    from datasets import Dataset
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer, set_seed
    from trl import GRPOConfig, GRPOTrainer

    from grpo_sweep.rewards import REWARDS

    set_seed(spec["seed"])
    torch.set_num_threads(spec["torch_threads"])
    tokenizer = AutoTokenizer.from_pretrained(spec["model_dir"])
    tokenizer.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(spec["model_dir"], dtype=torch.float32)
    model = get_peft_model(model, LoraConfig(task_type="CAUSAL_LM", **spec["lora"]))
    train = Dataset.from_list([json.loads(line) for line in open(spec["train_file"])])
    held_out = [json.loads(line) for line in open(spec["eval_file"])]
    rewards = [REWARDS[name] for name in spec["rewards"]]
    out = Path(spec["out_dir"])
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=rewards,
        args=GRPOConfig(output_dir=str(out / "checkpoints"), **spec["grpo_config"]),
        train_dataset=train,
        processing_class=tokenizer,
    )
    trainer.train()
    model.save_pretrained(out / "lora")
    tokenizer.save_pretrained(out / "lora")

    # held-out evaluation: greedy, batched, scored by the same rewards
    model.eval()
    texts = [tokenizer.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True) for r in held_out]
    completions = []
    with torch.no_grad():
        for i in range(0, len(texts), spec["eval_batch_size"]):
            batch = tokenizer(
                texts[i : i + spec["eval_batch_size"]], return_tensors="pt", padding=True, add_special_tokens=False
            )
            generated = model.generate(
                **batch, max_new_tokens=spec["max_new_tokens"], do_sample=False, pad_token_id=tokenizer.pad_token_id
            )
            completions += tokenizer.batch_decode(generated[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)
    chats = [[{"role": "assistant", "content": c}] for c in completions]
    truths = [r["ground_truth"] for r in held_out]
    scores = {fn.__name__: fn(completions=chats, ground_truth=truths) for fn in rewards}
    print(
        json.dumps(
            {
                "steps": trainer.state.global_step,
                "runtime_s": time.perf_counter() - started,
                "eval": {k: sum(v) / len(v) for k, v in scores.items()},
            }
        )
    )


if __name__ == "__main__":
    main()
