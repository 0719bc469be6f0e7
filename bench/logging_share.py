"""Share of training time spent in grpo-sweep's per-step logging (metrics.jsonl, the progress bar's reward,
and with logger=wandb transformers' W&B callback and the completions table), over the main job's 120 steps.

    python -m bench.logging_share      # writes bench/results/logging_share.json

Each callback's on_log is timed in place; the total is divided by the run's training time (timings_s.train).
logger=wandb runs offline (no account), as a run without credentials does.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

from bench._common import command, compose, machine, parser, write

SETTINGS = {"logger=none": [], "logger=wandb": ["logger=wandb"]}


def timed(cls, clock: dict) -> None:
    original = cls.on_log

    def on_log(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return original(self, *args, **kwargs)
        finally:
            clock[cls.__name__] = clock.get(cls.__name__, 0.0) + time.perf_counter() - start

    cls.on_log = on_log


def main() -> None:
    parser(__doc__).parse_args()
    from transformers.integrations import WandbCallback

    import grpo_sweep.run.train as train_module
    from grpo_sweep.tracking import open_logger
    from grpo_sweep.tracking.wandb_logger import CompletionsTable

    os.environ.setdefault("WANDB_MODE", "offline")
    clock: dict[str, float] = {}
    for cls in (train_module.MetricsJsonl, train_module.RewardProgress, WandbCallback, CompletionsTable):
        timed(cls, clock)
    results = {}
    for name, overrides in SETTINGS.items():
        clock.clear()
        cfg = compose(overrides)
        run_dir = Path(tempfile.mkdtemp(prefix="grpo-bench-logging-"))
        os.environ["WANDB_DIR"] = str(run_dir)
        summary = train_module.train(cfg, run_dir, open_tracker=open_logger)
        train_s = summary["timings_s"]["train"]
        logged = len((run_dir / "metrics.jsonl").read_text().splitlines())
        total = sum(clock.values())
        results[name] = {
            "steps": summary["steps"],
            "logged_steps": logged,
            "train_seconds": train_s,
            "logging_seconds": round(total, 4),
            "ms_per_logged_step": round(1000 * total / logged, 3),
            "share_of_train_time_pct": round(100 * total / train_s, 3),
            "per_callback_seconds": {k: round(v, 4) for k, v in clock.items()},
        }
        print(name, json.dumps(results[name], indent=2), flush=True)
    write(
        "logging_share.json",
        {
            "results": results,
            "machine": machine(),
            "date": time.strftime("%Y-%m-%d"),
            "command": command("bench.logging_share"),
        },
    )


if __name__ == "__main__":
    main()
