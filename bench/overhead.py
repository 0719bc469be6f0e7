"""Per-run overhead: `python launch.py` against a plain TRL script doing exactly the same training.

    python -m bench.overhead [--repeats 5] [--steps 60]   # writes bench/results/overhead.json

Same model files (the cached tiny model), same data (exported from the composed config), same rewards,
GRPOConfig, LoRA, seed, thread count, steps and held-out evaluation. The two commands alternate; reported are
medians of whole-process wall time and peak RSS, and their ratios (grpo-sweep / plain).
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench._common import command, compose, machine, parser, run_dirs, timed_process, write


def export_spec(steps: int, work: Path) -> tuple[dict, list[str]]:
    """Compose the main job's config, export what the plain script needs, return (spec, launch overrides)."""
    from grpo_sweep.backends.trl_backend import model_source
    from grpo_sweep.data import load_splits
    from grpo_sweep.run.train import grpo_config

    overrides = [f"trainer.max_steps={steps}", f"trainer.save_steps={steps}"]
    cfg = compose(overrides)
    train, _, held_out = load_splits(cfg.data, need_ground_truth=True)
    (work / "train.jsonl").write_text(
        "".join(json.dumps({"prompt": r["prompt"], "ground_truth": r["ground_truth"]}) + "\n" for r in train)
    )
    (work / "eval.jsonl").write_text(
        "".join(json.dumps({"prompt": r["prompt"], "ground_truth": r["ground_truth"]}) + "\n" for r in held_out)
    )
    args = grpo_config(cfg, work / "unused", [float(t.weight) for t in cfg.reward_mix.values()]).to_dict()
    keep = [
        "learning_rate",
        "adam_beta1",
        "adam_beta2",
        "weight_decay",
        "warmup_steps",
        "lr_scheduler_type",
        "max_grad_norm",
        "optim",
        "num_generations",
        "per_device_train_batch_size",
        "gradient_accumulation_steps",
        "max_completion_length",
        "max_steps",
        "save_steps",
        "save_strategy",
        "beta",
        "loss_type",
        "temperature",
        "top_p",
        "logging_steps",
        "seed",
        "mask_truncated_completions",
        "reward_weights",
        "bf16",
        "use_cpu",
        "report_to",
        "logging_first_step",
    ]
    grpo = {k: args[k] for k in keep}
    grpo["optim"] = str(grpo["optim"]).split(".")[-1].lower() if "." in str(grpo["optim"]) else grpo["optim"]
    grpo["lr_scheduler_type"] = str(grpo["lr_scheduler_type"]).split(".")[-1].lower()
    grpo["save_strategy"] = "steps"
    spec = {
        "model_dir": model_source(cfg.model, cfg.data),
        "train_file": str(work / "train.jsonl"),
        "eval_file": str(work / "eval.jsonl"),
        "rewards": list(cfg.reward_mix),
        "lora": {
            "r": cfg.lora.r,
            "lora_alpha": cfg.lora.alpha,
            "lora_dropout": cfg.lora.dropout,
            "target_modules": list(cfg.lora.target_modules),
        },
        "grpo_config": grpo,
        "seed": cfg.trainer.seed,
        "torch_threads": cfg.trainer.torch_threads or 1,
        "eval_batch_size": cfg.trainer.eval.batch_size,
        "max_new_tokens": cfg.trainer.eval.max_new_tokens or cfg.trainer.max_completion_length,
    }
    return spec, overrides


def main() -> None:
    cli = parser(__doc__)
    cli.add_argument("--repeats", type=int, default=5)
    cli.add_argument("--steps", type=int, default=60)
    args = cli.parse_args()
    work = Path(tempfile.mkdtemp(prefix="grpo-bench-overhead-"))
    spec, overrides = export_spec(args.steps, work)
    rows = {"grpo_sweep": [], "plain_trl": []}
    for i in range(args.repeats):
        run = work / f"plain{i}"
        spec["out_dir"] = str(run)
        (work / "spec.json").write_text(json.dumps(spec))
        order = [
            ("grpo_sweep", [sys.executable, "launch.py", *overrides, f"output_root={work / f'gs{i}'}"]),
            ("plain_trl", [sys.executable, "-m", "bench.plain_trl", str(work / "spec.json")]),
        ]
        held_out = {}
        for name, cmd in order if i % 2 == 0 else order[::-1]:  # alternate who goes first
            run = timed_process(cmd)
            if run["rc"]:
                raise SystemExit(f"{cmd} failed:\n{run['output'][-3000:]}")
            rows[name].append({"wall_s": run["wall_s"], "peak_rss_mb": run["peak_rss_mb"]})
            print(f"{name:<11} run {i}: {run['wall_s']:6.2f} s  {run['peak_rss_mb']:7.1f} MB", flush=True)
            if name == "plain_trl":  # its last line of JSON (warnings may follow it on the shared output)
                last = [line for line in run["output"].splitlines() if line.startswith("{")][-1]
                held_out[name] = json.loads(last)["eval"]
            else:
                [run_dir] = run_dirs(work / f"gs{i}")
                held_out[name] = json.loads((run_dir / "summary.json").read_text())["test_rewards"]
        # the same training gives the same held-out scores, reward by reward
        same = all(
            abs(held_out["plain_trl"][k] - (held_out["grpo_sweep"][k] or 0)) < 1e-9 for k in held_out["plain_trl"]
        )
        rows.setdefault("same_held_out_scores", []).append(same)
    same = rows.pop("same_held_out_scores")
    med = {
        name: {k: statistics.median(r[k] for r in runs) for k in ("wall_s", "peak_rss_mb")}
        for name, runs in rows.items()
    }
    result = {
        "steps": args.steps,
        "repeats": args.repeats,
        "runs": rows,
        "median": med,
        "same_held_out_scores": same,
        "ratio_wall": round(med["grpo_sweep"]["wall_s"] / med["plain_trl"]["wall_s"], 3),
        "ratio_peak_rss": round(med["grpo_sweep"]["peak_rss_mb"] / med["plain_trl"]["peak_rss_mb"], 3),
        "machine": machine(),
        "date": time.strftime("%Y-%m-%d"),
        "command": command("bench.overhead"),
    }
    print(
        json.dumps({k: result[k] for k in ("median", "ratio_wall", "ratio_peak_rss", "same_held_out_scores")}, indent=2)
    )
    write("overhead.json", result)


if __name__ == "__main__":
    main()
