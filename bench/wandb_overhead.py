"""What logger=wandb (offline) adds to one run: start, per-step logging, a completions table, finish.

    python -m bench.wandb_overhead       # prints the numbers, writes bench/results/wandb_overhead.json

No training: the callbacks a run with logger=wandb gets (transformers' WandbCallback, which logs the history into
the run grpo-sweep started, and grpo-sweep's completions table) are driven with TRL-shaped log rows (the keys of a
2-reward mix) and a 16-row completions buffer, the way GRPOTrainer calls them, so the numbers are the logging's own
cost.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections import deque
from pathlib import Path
from types import SimpleNamespace

from bench._common import command, compose, parser, record

STEPS, REPEATS = 100, 3


def trl_row(step: int) -> dict:
    row = {
        "loss": 0.01,
        "grad_norm": 0.5,
        "learning_rate": 1e-3,
        "num_tokens": 1000.0 * step,
        "reward": 0.1,
        "reward_std": 0.05,
        "frac_reward_zero_std": 0.0,
        "entropy": 5.1,
        "step_time": 0.1,
        "epoch": step / 100,
    }
    for key in ("mean", "min", "max"):
        row[f"completions/{key}_length"] = 32.0
    for name in ("xmlcount", "correct"):
        row[f"rewards/{name}/mean"], row[f"rewards/{name}/std"] = 0.1, 0.05
    return row


def _tiny_model():
    """A model for WandbCallback's set-up (it logs the model's config and parameter count)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    return LlamaForCausalLM(
        LlamaConfig(
            vocab_size=64,
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=2,
        )
    )


def one_run(cfg, run_dir: Path) -> dict:
    from transformers.integrations import WandbCallback
    from trl import GRPOConfig

    from grpo_sweep.run.context import RunContext
    from grpo_sweep.tracking import open_logger

    t0 = time.perf_counter()
    logger = open_logger(cfg, RunContext(run_dir, ["reward_mix=smoke", "lora.r=16"]))
    assert logger.report_to() == ["wandb"]
    args = GRPOConfig(output_dir=str(run_dir / "checkpoints"), use_cpu=True, report_to=logger.report_to())
    added = [WandbCallback()]  # what report_to=["wandb"] makes the trainer add
    trainer = SimpleNamespace(
        args=args,
        add_callback=added.append,
        _logs={
            "prompt": deque(["What is 2+3?"] * 16),
            "completion": deque(["<think>5</think><answer>5</answer>"] * 16),
            "rewards": {"xmlcount": deque([0.5] * 16), "correct": deque([1.0] * 16)},
            "advantages": deque([0.1] * 16),
        },
    )
    logger.watch(trainer)
    model = _tiny_model()
    t1 = time.perf_counter()
    for step in range(1, STEPS + 1):
        state = SimpleNamespace(global_step=step, is_world_process_zero=True, trial_name=None, logging_steps=1)
        for callback in added:
            callback.on_log(args, state, None, model=model, logs=trl_row(step))
    t2 = time.perf_counter()
    logger.finish({"status": "completed", "objective": 0.1, "val_accuracy": 0.1, "test_accuracy": 0.1, "steps": STEPS})
    t3 = time.perf_counter()
    return {"start_s": t1 - t0, "log_ms_per_step": 1000 * (t2 - t1) / STEPS, "finish_s": t3 - t2}


def main() -> None:
    parser(__doc__).parse_args()
    os.environ["WANDB_MODE"] = "offline"
    cfg = compose(["logger=wandb", "logger.log_completions_steps=25"])
    started = time.perf_counter()
    import wandb  # noqa: F401  (the first run pays the import)

    import_s = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as tmp:
        runs = [one_run(cfg, Path(tmp) / str(i)) for i in range(REPEATS)]
    result = {key: round(statistics.median(r[key] for r in runs), 3) for key in runs[0]}
    result["history_by"] = "transformers WandbCallback"
    result.update(
        import_wandb_s=round(import_s, 2),
        steps=STEPS,
        repeats=REPEATS,
        completions_tables=STEPS // 25,
        command=command("bench.wandb_overhead"),
        load_avg=round(os.getloadavg()[0], 1),
    )
    record("wandb_overhead", result)


if __name__ == "__main__":
    main()
