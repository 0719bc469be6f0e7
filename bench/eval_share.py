"""Share of training time spent in the periodic held-out evaluations, at the smoke and standard trainer settings.

    python bench/eval_share.py      # writes bench/results/eval_share.json

Runs `python launch.py` as a user would (a fresh process each) and reads the run's summary.json: the greedy
evaluations before training and every `trainer.eval.every_steps` steps happen inside TRL's training loop and are
timed there (`timings_s.eval_periodic`); their share is that time over the training time without them. The final
evaluation (greedy + k samples per prompt) runs after training and is reported apart (`timings_s.eval`).
The standard preset runs on the tiny model on CPU for fewer steps (`trainer.max_steps`), with its evaluation
cadence scaled the same way, so the share matches the ratio of 250 steps with an evaluation every 40.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).parent))

from record import record  # noqa: E402

SETTINGS = {
    "smoke": [],  # the main job as it ships: 120 steps, evaluations at 0, 40, 80 (+ final)
    # the walkthrough's 6 x 768-token completions on the tiny model: 40 steps, an evaluation at 0 and 20 (+ final)
    "standard": ["trainer=standard", "model.max_seq_length=1024", "trainer.max_steps=40", "trainer.save_steps=40", "trainer.eval.every_steps=20",
                 "trainer.bf16=false", "trainer.torch_threads=1", "trainer.mask_truncated_completions=false",
                 "data.max_eval_samples=32"],
}


def main() -> None:
    results = {"machine": f"{platform.machine()}, {os.cpu_count()} cores", "load_before": os.getloadavg()[0]}
    for name, overrides in SETTINGS.items():
        with tempfile.TemporaryDirectory() as out:
            proc = subprocess.run([sys.executable, str(ROOT / "launch.py"), *overrides, f"output_root={out}",
                                   "trainer.disable_tqdm=true"], capture_output=True, text=True, cwd=ROOT)
            if proc.returncode:
                raise SystemExit(f"{name}: launch.py failed:\n{proc.stderr[-3000:]}")
            summary = json.loads(next(Path(out).glob("grpo/runs/*/summary.json")).read_text())
        t = summary["timings_s"]
        periodic, train = t["eval_periodic"], t["train"]
        results[name] = {
            "overrides": overrides,
            "steps": summary["steps"],
            "eval_steps": summary["eval_steps"],
            "eval_samples": summary["eval_samples"],
            "periodic_eval_s": periodic,
            "train_s_without_evals": round(train - periodic, 3),
            "periodic_share": round(periodic / (train - periodic), 4),
            "final_eval_s (greedy + k samples)": t["eval"],
            "eval_k": summary.get("eval_k"),
        }
    results["load_after"] = os.getloadavg()[0]
    record("eval_share", results)


if __name__ == "__main__":
    main()
