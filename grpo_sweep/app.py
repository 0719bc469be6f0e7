"""The Hydra task: validate, train (heavy imports happen only here), record, and return the objective."""
from __future__ import annotations

import logging
import time
import traceback
from pathlib import Path
from typing import Any

from .results import SUMMARY, read_summary, write_json_atomic
from .validate import validate

log = logging.getLogger(__name__)


def _run_dir_and_overrides() -> tuple[Path, list[str]]:
    from hydra.core.hydra_config import HydraConfig

    hydra_cfg = HydraConfig.get()
    return Path(hydra_cfg.runtime.output_dir), list(hydra_cfg.overrides.task)


def run_task(cfg: Any) -> float | None:
    validate(cfg)
    run_dir, overrides = _run_dir_and_overrides()
    started = time.time()
    try:
        from .backends import get_backend

        get_backend(cfg.backend.name)  # first: backend=unsloth must be imported before trl/transformers/peft
        from .train import train  # torch, trl, transformers: only on the machine that trains

        summary = train(cfg, run_dir, overrides)
    except BaseException as exc:
        # Keep a record of the failure next to the run, so a sweep's table shows it and why.
        write_json_atomic(
            run_dir / SUMMARY,
            {
                "status": "failed",
                "error": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc()[-4000:],
                "overrides": overrides,
                "runtime_s": round(time.time() - started, 3),
                "run_dir": str(run_dir),
            },
        )
        raise
    print(format_summary(summary))
    return summary["objective"]


def _fmt(value: Any) -> str:
    return "n/a" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def format_summary(summary: dict) -> str:
    lines = [
        f"grpo-sweep: run finished in {summary['runtime_s']:.1f} s ({summary['steps']} steps)",
        f"  reward (weighted)      {_fmt(summary['reward_first'])} -> {_fmt(summary['reward'])}",
    ]
    for name, final in summary["train_rewards"].items():
        first = summary["train_rewards_first"].get(name)
        lines.append(f"  rewards/{name:<14} {_fmt(first)} -> {_fmt(final)}")
    held = ", ".join(f"{n} {_fmt(v)}" for n, v in summary["eval_rewards"].items())
    lines.append(f"  held-out ({summary['eval_samples']} prompts): accuracy {_fmt(summary['eval_accuracy'])}; {held}")
    lines.append(f"  objective {summary['optimized_metric']} = {_fmt(summary['objective'])}")
    lines.append(f"  saved to {summary['run_dir']}  (summary.json, metrics.jsonl, samples.jsonl, adapter)")
    return "\n".join(lines)


def last_summary(run_dir: Path) -> dict | None:
    return read_summary(run_dir)
