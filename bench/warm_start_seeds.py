"""Does the main job's story hold for every warm start, or only for a lucky one? The warm start's 600 steps are
chaotic (two builds that differ only by float rounding are different models by step 150), so a recipe is judged
over several warm-start seeds: per seed, the validation format, and the test accuracy before GRPO and after it.

    python -m bench.warm_start_seeds --seeds 0 1 2                                  # the shipped recipe
    python -m bench.warm_start_seeds --seeds 0 1 2 --label wsd -- model.tiny.warm_start.decay_steps=150

Each seed is one `python launch.py model.tiny.warm_start.seed=S [overrides]` (its build cached in --cache, so a
second call with the same recipe only trains). Rows go to bench/results/warm_start_seeds.json under --label.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from bench._common import last_error, launch, parser, read_jsonl, record_labelled, run_dirs


def one_seed(seed: int, overrides: list[str], cache: Path) -> dict:
    with tempfile.TemporaryDirectory() as out:
        wall, proc = launch(
            [f"model.tiny.warm_start.seed={seed}", *overrides], out, env={"GRPO_SWEEP_CACHE": str(cache)}, check=False
        )
        if proc.returncode != 0:
            return {"seed": seed, "error": [last_error(proc)]}
        [run] = run_dirs(out)
        summary = json.loads((run / "summary.json").read_text())
        rows = read_jsonl(run / "metrics.jsonl")
        first = next(r for r in rows if r.get("step") == 0 and "val/accuracy" in r)
    return {
        "seed": seed,
        "format_before": round(first["val/xmlcount"], 3),
        # the main job's figures: validation at the reported step (chosen on it), test before and after (measured)
        "val_before": round(summary["val_accuracy_before"], 3),
        "val_after": round(summary["val_accuracy"], 3),
        "accuracy_before": round(summary["test_accuracy_before"], 3),
        "accuracy_after": round(summary["test_accuracy"], 3),
        "rise": round(summary["test_accuracy"] - summary["test_accuracy_before"], 3),
        "wall_s": round(wall, 1),
    }


def main() -> None:
    cli = parser(__doc__)
    cli.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    cli.add_argument("--label", default="shipped")
    cli.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "grpo-sweep-seed-study")
    cli.add_argument("overrides", nargs="*", help="launch.py overrides after --")
    args = cli.parse_args()
    rows = []
    for seed in args.seeds:
        rows.append(one_seed(seed, args.overrides, args.cache))
        print(json.dumps(rows[-1]), flush=True)
    ok = [r for r in rows if "error" not in r]
    result = {
        "overrides": args.overrides,
        "rows": rows,
        "mean_before": round(sum(r["accuracy_before"] for r in ok) / max(1, len(ok)), 3),
        "mean_after": round(sum(r["accuracy_after"] for r in ok) / max(1, len(ok)), 3),
        "seeds_meeting_the_goal": sum(0 < r["accuracy_before"] < 0.6 and r["rise"] >= 0.15 for r in ok),
        "load_1min": round(os.getloadavg()[0], 2),
    }
    record_labelled("warm_start_seeds", args.label, result)
    print(json.dumps({k: v for k, v in result.items() if k != "rows"}))


if __name__ == "__main__":
    main()
