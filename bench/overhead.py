"""Per-run overhead: `python launch.py` against a plain TRL script doing exactly the same training.

    python bench/overhead.py [--repeats 5] [--steps 60]   # writes bench/results/overhead.json

Same model files (the cached tiny model), same data (exported from the composed config), same rewards,
GRPOConfig, LoRA, seed, thread count, steps and held-out evaluation. The two commands alternate; reported are
medians of whole-process wall time and peak RSS, and their ratios (grpo-sweep / plain).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def export_spec(steps: int, work: Path) -> tuple[dict, list[str]]:
    """Compose the main job's config, export what the plain script needs, return (spec, launch overrides)."""
    from hydra import compose, initialize_config_dir

    from grpo_sweep.backends.trl import model_source
    from grpo_sweep.configstore import register_configs
    from grpo_sweep.data import load_splits
    from grpo_sweep.run.train import grpo_config

    overrides = [f"trainer.max_steps={steps}", f"trainer.save_steps={steps}"]
    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    train, _, held_out = load_splits(cfg.data, need_ground_truth=True)
    (work / "train.jsonl").write_text("".join(json.dumps({"prompt": r["prompt"], "ground_truth": r["ground_truth"]}) + "\n" for r in train))
    (work / "eval.jsonl").write_text("".join(json.dumps({"prompt": r["prompt"], "ground_truth": r["ground_truth"]}) + "\n" for r in held_out))
    args = grpo_config(cfg, work / "unused", [float(t.weight) for t in cfg.reward_mix.values()]).to_dict()
    keep = ["learning_rate", "adam_beta1", "adam_beta2", "weight_decay", "warmup_steps", "lr_scheduler_type",
            "max_grad_norm", "optim", "num_generations", "per_device_train_batch_size", "gradient_accumulation_steps",
            "max_completion_length", "max_steps", "save_steps", "save_strategy", "beta", "loss_type", "temperature",
            "top_p", "logging_steps", "seed", "mask_truncated_completions", "reward_weights", "bf16", "use_cpu",
            "report_to", "logging_first_step"]
    grpo = {k: args[k] for k in keep}
    grpo["optim"] = str(grpo["optim"]).split(".")[-1].lower() if "." in str(grpo["optim"]) else grpo["optim"]
    grpo["lr_scheduler_type"] = str(grpo["lr_scheduler_type"]).split(".")[-1].lower()
    grpo["save_strategy"] = "steps"
    spec = {
        "model_dir": model_source(cfg.model, cfg.data),
        "train_file": str(work / "train.jsonl"),
        "eval_file": str(work / "eval.jsonl"),
        "rewards": list(cfg.reward_mix),
        "lora": {"r": cfg.lora.r, "lora_alpha": cfg.lora.alpha, "lora_dropout": cfg.lora.dropout,
                 "target_modules": list(cfg.lora.target_modules)},
        "grpo_config": grpo,
        "seed": cfg.trainer.seed,
        "torch_threads": cfg.trainer.torch_threads or 1,
        "eval_batch_size": cfg.trainer.eval.batch_size,
        "max_new_tokens": cfg.trainer.eval.max_new_tokens or cfg.trainer.max_completion_length,
    }
    return spec, overrides


def timed(cmd: list[str]) -> tuple[float, float, str]:
    """Wall seconds and peak RSS (MB) of one child process, and its stdout."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    stdout = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        raise SystemExit(f"{cmd} failed")
    return wall, usage.ru_maxrss / 1024, stdout


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=60)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="grpo-bench-overhead-"))
    spec, overrides = export_spec(args.steps, work)
    rows = {"grpo_sweep": [], "plain_trl": []}
    for i in range(args.repeats):
        run = work / f"plain{i}"
        spec["out_dir"] = str(run)
        (work / "spec.json").write_text(json.dumps(spec))
        order = [("grpo_sweep", [sys.executable, "launch.py", *overrides, f"output_root={work / f'gs{i}'}"]),
                 ("plain_trl", [sys.executable, "bench/plain_trl.py", str(work / "spec.json")])]
        held_out = {}
        for name, cmd in (order if i % 2 == 0 else order[::-1]):  # alternate who goes first
            wall, rss, stdout = timed(cmd)
            rows[name].append({"wall_s": round(wall, 2), "peak_rss_mb": round(rss, 1)})
            print(f"{name:<11} run {i}: {wall:6.2f} s  {rss:7.1f} MB", flush=True)
            if name == "plain_trl":
                held_out[name] = json.loads(stdout.strip().splitlines()[-1])["eval"]
            else:
                [summary] = (work / f"gs{i}").glob("grpo/runs/*/summary.json")
                held_out[name] = json.loads(summary.read_text())["test_rewards"]
        # the same training gives the same held-out scores, reward by reward
        same = all(abs(held_out["plain_trl"][k] - (held_out["grpo_sweep"][k] or 0)) < 1e-9 for k in held_out["plain_trl"])
        rows.setdefault("same_held_out_scores", []).append(same)
    same = rows.pop("same_held_out_scores")
    med = {name: {k: statistics.median(r[k] for r in runs) for k in ("wall_s", "peak_rss_mb")} for name, runs in rows.items()}
    result = {
        "steps": args.steps, "repeats": args.repeats, "runs": rows, "median": med, "same_held_out_scores": same,
        "ratio_wall": round(med["grpo_sweep"]["wall_s"] / med["plain_trl"]["wall_s"], 3),
        "ratio_peak_rss": round(med["grpo_sweep"]["peak_rss_mb"] / med["plain_trl"]["peak_rss_mb"], 3),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores", "date": time.strftime("%Y-%m-%d"),
        "command": "python bench/overhead.py " + " ".join(sys.argv[1:]),
    }
    print(json.dumps({k: result[k] for k in ("median", "ratio_wall", "ratio_peak_rss", "same_held_out_scores")}, indent=2))
    dest = ROOT / "bench" / "results" / "overhead.json"
    dest.parent.mkdir(exist_ok=True)
    dest.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
