"""experiment=cpu_qwen0_5b: a real instruct model from the hub on a CPU. This machine reaches no hub, so the preset
trains here a small model of the same architecture (Qwen2ForCausalLM) from a local directory, with every setting of
the preset but the model's size, the steps and the split sizes; and the launch without the model in the cache is
refused in one line naming it (what a user without hub access sees). Its cost on the real shape:
bench/studies/cpu_small_model.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grpo_sweep.run.validate import check_machine, validate

from .conftest import compose, launch_here, run_launch

PRESET = ["experiment=cpu_qwen0_5b"]


def small_qwen2(path: Path) -> Path:
    """A Qwen2ForCausalLM a few layers deep, with the shipped tiny tokenizer (its chat template), saved as
    save_pretrained does: what model.name_or_path=<a local directory> loads."""
    import torch
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    from grpo_sweep.models import PREBUILT

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(PREBUILT)
    config = Qwen2Config(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=len(tokenizer),
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        architectures=["Qwen2ForCausalLM"],
    )
    Qwen2ForCausalLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def gsm8k_shaped(path: Path, rows: int = 40) -> Path:
    """GSM8K's columns and answer form: question, and a worked answer ending in `#### N`."""
    lines = [
        {
            "question": f"Ann has {n} apples and buys {n + 3} more. How many apples does she have now?",
            "answer": f"{n} + {n + 3} = {2 * n + 3}\n#### {2 * n + 3}",
        }
        for n in range(rows)
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_the_preset_is_a_hub_model_in_float32_that_passes_this_cpus_checks():
    cfg = compose(PRESET)
    assert cfg.model.name_or_path == "Qwen/Qwen2.5-0.5B-Instruct" and cfg.model.tiny is None
    assert (cfg.model.dtype, cfg.trainer.bf16, cfg.trainer.use_vllm, cfg.model.load_in_4bit) == (
        "float32",
        False,
        False,
        False,
    )
    assert cfg.data.source == "hub" and cfg.data.path == "openai/gsm8k"
    # one generation = 2 prompts x 4 completions, trained on as 4 micro-batches of 2: one optimizer step
    t = cfg.trainer
    assert t.per_device_train_batch_size * t.gradient_accumulation_steps == 2 * t.num_generations
    assert t.max_prompt_length + t.max_completion_length <= cfg.model.max_seq_length
    validate(cfg)
    check_machine(cfg)  # no GPU-only setting: the machine that trains is a CPU


def test_a_group_on_the_command_line_wins_over_the_presets_pick():
    cfg = compose([*PRESET, "data=file", "data.path=mine.jsonl", "reward_mix=correct"])
    assert cfg.data.source == "file" and list(cfg.reward_mix) == ["correct"]
    assert cfg.model.name_or_path == "Qwen/Qwen2.5-0.5B-Instruct" and cfg.trainer.num_generations == 4


def test_without_the_hub_the_preset_is_refused_in_one_line_naming_the_model(tmp_path):
    out = run_launch(PRESET, tmp_path, timeout=120, env={"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")})
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert out.returncode == 1 and len(lines) == 1, out.stderr[-3000:]
    assert lines[0].startswith("grpo-sweep: model.name_or_path='Qwen/Qwen2.5-0.5B-Instruct' is not in the HF cache")
    assert not (tmp_path / "grpo").exists()


@pytest.fixture(scope="module")
def preset_run(tmp_path_factory):
    """The preset's settings on a small Qwen2 model and GSM8K-shaped rows: 2 steps, 4 validation and 4 test rows."""
    tmp = tmp_path_factory.mktemp("cpu_preset")
    model, data = small_qwen2(tmp / "qwen2_small"), gsm8k_shaped(tmp / "word.jsonl")
    out = launch_here(
        [
            *PRESET,
            f"model.name_or_path={model}",
            "data=file",
            f"data.path={data}",
            "data.prompt_column=question",
            "data.ground_truth_column=answer",
            "data.ground_truth_after='####'",
            "data.max_val_samples=4",
            "data.max_test_samples=4",
            "trainer.max_steps=2",
            "trainer.save_steps=2",
            "trainer.max_completion_length=16",
            "trainer.eval.max_new_tokens=16",
        ],
        tmp,
    )
    return out, tmp


def test_the_presets_settings_train_a_qwen2_model_from_a_local_directory(preset_run):
    out, tmp = preset_run
    assert out.returncode == 0, out.stderr[-3000:]
    assert "the tiny model" not in out.stderr  # a hub-shaped model gets no tiny-model warning
    [run_dir] = [p.parent for p in tmp.glob("grpo/runs/*/summary.json")]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["val_accuracy"] is not None
    grpo = json.loads((run_dir / "grpo_config.json").read_text())
    assert (grpo["per_device_train_batch_size"], grpo["gradient_accumulation_steps"], grpo["num_generations"]) == (
        2,
        4,
        4,
    )
    assert grpo["learning_rate"] == 5e-5 and grpo["bf16"] is False
    # one optimizer step a generation: each logged step saw 8 completions of 2 prompts
    steps = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in steps if "reward" in row] == [1, 2]
