"""Share of one training step's time spent in the rewards, at the smoke and standard trainer settings.

    python -m bench.reward_share      # writes bench/results/reward_share.json

Trains the tiny model on CPU for a few steps with every built-in reward of `reward_mix=walkthrough` (+ xmlcount)
timed inside TRL's reward call, and divides their total time by the training time. The standard preset's
steps are far longer on a real model, so its share there is lower still: these shares are upper bounds.
"""

from __future__ import annotations

import functools
import json
import tempfile
import time
from pathlib import Path

from bench._common import command, compose, machine, parser, read_jsonl, write

SETTINGS = {
    "smoke": ["trainer=cpu_tiny", "trainer.max_steps=20"],
    # the walkthrough's 6 x 768-token completions, on the tiny model (GPU-only bits off)
    "standard": [
        "experiment=gpu",
        "model.max_seq_length=1024",
        "trainer.max_steps=3",
        "trainer.bf16=false",
        "trainer.torch_threads=1",
        "trainer.mask_truncated_completions=false",
        "data.max_val_samples=2",
        "data.max_test_samples=2",
    ],
}


def timed_rewards(funcs, clock):
    out = []
    for fn in funcs:

        @functools.wraps(fn)
        def wrapper(*args, _fn=fn, **kwargs):
            if "trainer_state" not in kwargs:  # the held-out evaluation, not a training step
                return _fn(*args, **kwargs)
            start = time.perf_counter()
            try:
                return _fn(*args, **kwargs)
            finally:
                clock[_fn.__name__] = clock.get(_fn.__name__, 0.0) + time.perf_counter() - start

        out.append(wrapper)
    return out


def main() -> None:
    parser(__doc__).parse_args()
    import grpo_sweep.run.train as train_module

    results = {}
    original = train_module.build_mix
    for name, overrides in SETTINGS.items():
        clock: dict[str, float] = {}

        def build_mix(*args, **kwargs):
            funcs, weights = original(*args, **kwargs)
            return timed_rewards(funcs, clock), weights

        train_module.build_mix = build_mix
        cfg = compose(["reward_mix=walkthrough", "+reward_mix.xmlcount.weight=0.5", *overrides])
        run_dir = Path(tempfile.mkdtemp(prefix=f"grpo-bench-share-{name}-"))
        summary = train_module.train(cfg, run_dir)
        rows = read_jsonl(run_dir / "metrics.jsonl")
        step_seconds = sum(r.get("step_time", 0.0) for r in rows)
        reward_seconds = sum(clock.values())
        completions = summary["steps"] * cfg.trainer.per_device_train_batch_size
        results[name] = {
            "steps": summary["steps"],
            "completions_scored": completions,
            "train_step_seconds": round(step_seconds, 3),
            "reward_seconds_total": round(reward_seconds, 4),
            "share_of_step_time_pct": round(100 * reward_seconds / step_seconds, 3),
            "per_reward_seconds": {k: round(v, 5) for k, v in clock.items()},
        }
        print(name, json.dumps(results[name], indent=2), flush=True)
    train_module.build_mix = original
    write(
        "reward_share.json",
        {
            "results": results,
            "machine": machine(),
            "date": time.strftime("%Y-%m-%d"),
            "command": command("bench.reward_share"),
        },
    )


if __name__ == "__main__":
    main()
