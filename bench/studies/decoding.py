"""Does an evaluation decode as the config says, whatever the model's generation_config.json holds?

    python -m bench.studies.decoding      # -> bench/results/decoding.json

The main job's warm-started tiny model, as a local directory whose generation_config.json adds what Qwen2.5-Instruct's
sets, harder (``repetition_penalty: 1.3, top_k: 2``): its greedy test accuracy before training, evaluated the way
every run evaluates now (``backends/decoding.py``), and the way it did before (``generate(do_sample=False)`` alone,
which fills the rest from that file). The README's main job reports 0.359 for the unmodified model.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from bench._common import command, compose, machine, parser, record


def old_generate(model, tokenizer, prompts, decoding, batch_size=32):
    """The evaluation's generate before this fix: only do_sample (greedy) passed, the rest from the model's file."""
    import torch

    from grpo_sweep.backends import trl_backend

    ids = trl_backend.chat_prompt_ids(tokenizer, prompts)
    out = []
    with torch.no_grad():
        for start in range(0, len(ids), batch_size):
            batch = tokenizer.pad({"input_ids": ids[start : start + batch_size]}, return_tensors="pt")
            generated = model.generate(
                **batch, max_new_tokens=decoding.max_new_tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id
            )
            out += tokenizer.batch_decode(generated[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)
    return out


def main(argv: list[str] | None = None) -> None:
    parser(__doc__).parse_args(argv)
    import types

    from transformers import AutoModelForCausalLM

    from grpo_sweep.backends import trl_backend
    from grpo_sweep.data import load_splits
    from grpo_sweep.rewards.mix import build_mix
    from grpo_sweep.run.evaluate import Evaluator

    cfg = compose([])
    source = trl_backend.model_source(cfg.model, cfg.data)
    test = load_splits(cfg.data, need_ground_truth=True).test
    rewards, _ = build_mix(cfg.reward_mix, cfg.trainer)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, extra in (
            ("as built", {}),
            ("repetition_penalty 1.3, top_k 2", {"repetition_penalty": 1.3, "top_k": 2}),
        ):
            path = Path(tmp) / name.replace(" ", "_").replace(",", "")
            shutil.copytree(source, path)
            config = json.loads((path / "generation_config.json").read_text())
            (path / "generation_config.json").write_text(json.dumps({**config, **extra}))
            model = AutoModelForCausalLM.from_pretrained(path)
            tokenizer = trl_backend.load_tokenizer(str(path))
            for how, generate in (("now", trl_backend.generate), ("before the fix", old_generate)):
                backend = types.SimpleNamespace(generate=generate)
                scores = Evaluator(backend, tokenizer, test, rewards, cfg).greedy(model).scores
                results[f"{name} / {how}"] = scores.accuracy
    record(
        "decoding",
        {
            "command": command("bench.studies.decoding", argv),
            "machine": machine(),
            "greedy_test_accuracy_before_training": results,
        },
    )


if __name__ == "__main__":
    main()
