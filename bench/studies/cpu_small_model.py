"""What experiment=cpu_qwen0_5b costs on this CPU, measured without the hub.

    python -m bench.studies.cpu_small_model [--steps 2] [--threads N]

This machine cannot download Qwen2.5-0.5B-Instruct, so the run trains a model of the same shape (Qwen2ForCausalLM:
hidden 896, 24 layers, 14 heads, 2 KV heads, MLP 4,864, vocabulary 151,936, tied embeddings; 494M parameters),
with random weights, saved to a local directory in float32, with the tiny model's tokenizer (its chat template).
A run's time depends on the shapes and the token counts, not the weights' values; a random model never ends a
completion, so every completion runs to max_completion_length: the worst case of a real model, whose GSM8K
answers mostly end sooner. The data is GSM8K-shaped word problems written here (question, "... #### N").

The launch is the preset's, as a user runs it (`python launch.py experiment=cpu_qwen0_5b model.name_or_path=DIR
data=file ...`), with --steps training steps and validation/test cut to 8 problems each; the per-step,
per-validation-problem and per-test-problem seconds are read from the run's metrics.jsonl and summary.json and
scaled to the preset's steps, validations and split sizes (an estimate, printed as such).
Writes bench/results/cpu_small_model.json.
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import tempfile
from pathlib import Path

from bench._common import (
    ROOT,
    child_env,
    command,
    compose,
    machine,
    parser,
    read_jsonl,
    record,
    run_dirs,
    timed_process,
)

# Qwen/Qwen2.5-0.5B-Instruct's config.json, the values that decide the cost
QWEN2_5_0_5B = dict(
    hidden_size=896,
    intermediate_size=4864,
    num_hidden_layers=24,
    num_attention_heads=14,
    num_key_value_heads=2,
    vocab_size=151936,
    max_position_embeddings=32768,
    rope_theta=1000000.0,
    rms_norm_eps=1e-6,
    tie_word_embeddings=True,
    hidden_act="silu",
)
# 10 % carved for validation and 10 % for test: 10 rows each, of which the run evaluates 8
PROBLEMS = 100


def build_model(path: Path) -> int:
    """The random model of Qwen2.5-0.5B's shape, with the shipped tiny tokenizer; its parameter count."""
    import torch
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(ROOT / "grpo_sweep" / "models" / "prebuilt")
    config = Qwen2Config(
        **QWEN2_5_0_5B,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        architectures=["Qwen2ForCausalLM"],
    )
    model = Qwen2ForCausalLM(config)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return sum(p.numel() for p in model.parameters())


def word_problems(path: Path, n: int = PROBLEMS) -> None:
    """GSM8K-shaped rows: a few sentences of question, a worked answer ending in ``#### N``."""
    rng = random.Random(0)
    names = ["Maya", "Tom", "Priya", "Diego", "Lena", "Omar"]
    with path.open("w") as f:
        for _ in range(n):
            name, a, b, c = rng.choice(names), rng.randint(3, 12), rng.randint(4, 20), rng.randint(1, 30)
            question = (
                f"{name} runs a small bakery. Every morning {name} bakes {a} trays of muffins, and each tray "
                f"holds {b} muffins. By noon {name} has sold all but {c} of them, and gives the rest to a "
                f"neighbour who helps in the shop. How many muffins did {name} sell before noon?"
            )
            answer = (
                f"{name} bakes {a} * {b} = {a * b} muffins. {a * b} - {c} = {a * b - c} were sold.\n#### {a * b - c}"
            )
            f.write(json.dumps({"question": question, "answer": answer}) + "\n")


def main() -> int:
    args = parser(__doc__)
    args.add_argument("--steps", type=int, default=2, help="training steps of the measured run")
    args.add_argument("--threads", type=int, default=None, help="trainer.torch_threads (default: torch's, all cores)")
    opts = args.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="cpu-small-model-"))
    model_dir, data = tmp / "qwen2_5_0_5b_shape", tmp / "word_problems.jsonl"
    parameters = build_model(model_dir)
    word_problems(data)
    overrides = [
        "experiment=cpu_qwen0_5b",
        f"model.name_or_path={model_dir}",
        "data=file",
        f"data.path={data}",
        "data.prompt_column=question",
        "data.ground_truth_column=answer",
        "data.ground_truth_after='####'",
        "data.max_val_samples=8",
        "data.max_test_samples=8",
        f"trainer.max_steps={opts.steps}",
        f"trainer.save_steps={opts.steps}",
        "trainer.eval.every_steps=0",
        "trainer.disable_tqdm=true",
    ]
    if opts.threads:
        overrides.append(f"trainer.torch_threads={opts.threads}")
    proc = timed_process(
        [sys.executable, str(ROOT / "launch.py"), *overrides, f"output_root={tmp / 'out'}"],
        env=child_env({"HF_HUB_OFFLINE": "1"}),
    )
    if proc["rc"]:
        raise SystemExit(f"the launch failed:\n{proc['output'][-3000:]}")
    [run_dir] = run_dirs(tmp / "out")
    summary = json.loads((run_dir / "summary.json").read_text())
    rows = read_jsonl(run_dir / "metrics.jsonl")
    steps = [row["step_time"] for row in rows if "step_time" in row]
    val = [row["val/runtime"] for row in rows if "val/runtime" in row]
    [test] = [row["test/runtime"] for row in rows if "test/runtime" in row]  # one pass (the weights after training)
    step_s = statistics.median(steps)
    val_problem_s, test_problem_s = statistics.median(val) / summary["val_samples"], test / summary["test_samples"]
    # the preset as a user gets it: its steps, its validations (step 0, every every_steps, the last), its split sizes
    preset = compose(["experiment=cpu_qwen0_5b"])
    max_steps, every = preset.trainer.max_steps, preset.trainer.eval.every_steps
    validations = len(set(range(0, max_steps, every or max_steps)) | {max_steps})
    val_n, test_n = preset.data.max_val_samples, preset.data.max_test_samples
    estimate = (
        max_steps * step_s
        + validations * val_n * val_problem_s
        + 2 * test_n * test_problem_s
        + summary["timings_s"]["startup"]
        + summary["timings_s"]["setup"]
    )
    result = {
        "command": command("bench.studies.cpu_small_model"),
        "machine": machine("at the end"),
        "parameters": parameters,
        "launch": "python launch.py " + " ".join(o.replace(str(tmp), "$TMP") for o in overrides),
        "measured": {
            "wall_s": proc["wall_s"],
            "peak_rss_mb": proc["peak_rss_mb"],
            "steps": len(steps),
            "step_s": [round(s, 1) for s in steps],
            "completions_mean_length": statistics.median(
                r["completions/mean_length"] for r in rows if "step_time" in r
            ),
            "validation_s_a_problem": round(val_problem_s, 2),
            "test_s_a_problem": round(test_problem_s, 2),
            "timings_s": summary["timings_s"],
        },
        "estimated_preset_run_min": round(estimate / 60, 1),
        "estimated_from": (
            f"the preset's {max_steps} steps x step_s + {validations} validations x {val_n} problems x "
            f"validation_s_a_problem + 2 x {test_n} test problems x test_s_a_problem + start-up; every "
            "completion at full length (a random model never stops)"
        ),
    }
    record("cpu_small_model", result)
    print(proc["output"][-1500:], file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
