"""Share of training time spent in the periodic held-out evaluations, at the smoke and standard trainer settings.

    python -m bench.eval_share      # writes bench/results/eval_share.json

Runs `python launch.py` as a user would (a fresh process each) and reads the run's summary.json: the greedy
evaluations before training and every `trainer.eval.every_steps` steps happen inside TRL's training loop and are
timed there (`timings_s.eval_periodic`); their share is that time over the training time without them. The final
evaluation (greedy + k samples per prompt) runs after training and is reported apart (`timings_s.eval`).
The standard preset runs on the tiny model on CPU for 40 steps with an evaluation at 0 and 20 (its 250 steps would
take ~20 min here); `projected_share_*` is the share of each preset's full run (120 steps / 250 steps, an
evaluation every 40), from the measured time per evaluation and per training step.
"""

from __future__ import annotations

import json
import os
import tempfile

from bench._common import launch, machine, parser, record, run_dirs

SETTINGS = {
    "smoke": [],  # the main job as it ships: 120 steps, evaluations at 0, 40, 80 (+ final)
    # the walkthrough's 6 x 768-token completions on the tiny model: 40 steps, an evaluation at 0 and 20 (+ final)
    "standard": [
        "experiment=gpu",
        "model.max_seq_length=1024",
        "trainer.max_steps=40",
        "trainer.save_steps=40",
        "trainer.eval.every_steps=20",
        "trainer.bf16=false",
        "trainer.torch_threads=1",
        "trainer.mask_truncated_completions=false",
        "data.max_val_samples=32",
        "data.max_test_samples=32",
    ],
}


# the presets as they ship: (max_steps, trainer.eval.every_steps)
FULL_RUN = {"smoke": (120, 40), "standard": (250, 40)}


def projected(name: str, measured: dict) -> dict:
    """The periodic share of the preset's full run, from the measured time per evaluation and per training step."""
    steps, every = FULL_RUN[name]
    periodic_evals = len(range(0, steps, every))  # step 0 and every `every` steps before the last
    per_eval = measured["periodic_eval_s"] / (len(measured["eval_steps"]) - 1)  # the last one is the final evaluation
    per_step = measured["train_s_without_evals"] / measured["steps"]
    return {
        "per_eval_s": round(per_eval, 3),
        "per_step_s": round(per_step, 3),
        f"projected_share_{steps}_steps_every_{every}": round(periodic_evals * per_eval / (steps * per_step), 4),
    }


def main() -> None:
    parser(__doc__).parse_args()
    results = {"machine": machine(), "load_before": os.getloadavg()[0]}
    for name, overrides in SETTINGS.items():
        with tempfile.TemporaryDirectory() as out:
            launch([*overrides, "trainer.disable_tqdm=true"], out)
            summary = json.loads((run_dirs(out)[0] / "summary.json").read_text())
        t = summary["timings_s"]
        periodic, train = t["eval_periodic"], t["train"]
        results[name] = {
            "overrides": overrides,
            "steps": summary["steps"],
            "eval_steps": summary["eval_steps"],
            "test_samples": summary["test_samples"],
            "periodic_eval_s": periodic,
            "train_s_without_evals": round(train - periodic, 3),
            "periodic_share": round(periodic / (train - periodic), 4),
            "final_eval_s (greedy + k samples)": t["eval"],
            "test_k": summary.get("test_k"),
        }
        results[name].update(projected(name, results[name]))
    results["load_after"] = os.getloadavg()[0]
    record("eval_share", results)


if __name__ == "__main__":
    main()
