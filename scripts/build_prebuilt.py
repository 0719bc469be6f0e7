"""Build the tiny model's warm start for the built-in task and ship it: grpo_sweep/models/prebuilt/.

    python scripts/build_prebuilt.py                 # the recipe conf/ composes (model=tiny, data=arithmetic)
    python scripts/build_prebuilt.py --check         # build it here again and compare with the shipped sha256
    python scripts/build_prebuilt.py --cache DIR -- model.tiny.warm_start.seed=2   # ship a build DIR holds

The warm start is chaotic under float rounding: another CPU type builds another model from the same recipe. The
package therefore ships the weights (a few hundred KB) and a record of what they are (``build.json``: the recipe's
cache name, what it was made from, which ``models.shipped_warm_start`` matches a run's config against, and the
weights' sha256). Every machine then starts the main job from bit-identical weights. ``--check`` tells whether this
machine's build is the same model (it is on the machine that built it; on another CPU type it need not be, which is
why the file ships).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FILES = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
)


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="build here and compare with the shipped weights")
    parser.add_argument(
        "--cache",
        type=Path,
        help="a GRPO_SWEEP_CACHE that already holds this recipe's build: ship "
        "that one instead of building (bench/warm_start_seeds.py's cache)",
    )
    parser.add_argument("overrides", nargs="*", help="config overrides (the shipped build uses none)")
    args = parser.parse_args()

    from hydra import compose, initialize_config_dir

    from grpo_sweep.configstore import register_configs
    from grpo_sweep.data import held_out_questions
    from grpo_sweep.models import PREBUILT, PREBUILT_RECORD, ensure_model, made_from, warm_name, weights_sha256
    from grpo_sweep.models.tiny import TinySpec

    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[*args.overrides, "model.tiny.prebuilt=false"])
    spec = TinySpec.from_config(cfg.model.tiny, cfg.model.max_seq_length)
    held_out = held_out_questions(cfg.data)
    with tempfile.TemporaryDirectory() as cache:
        os.environ["GRPO_SWEEP_CACHE"] = str(args.cache or cache)
        built = ensure_model(spec, cfg.data.system_prompt, held_out)
        sha = weights_sha256(built)
        name = warm_name(spec, cfg.data.system_prompt, held_out)
        made = made_from(spec, cfg.data.system_prompt, held_out)
        if args.check:
            record = json.loads((PREBUILT / PREBUILT_RECORD).read_text())
            same_recipe = record["name"] == name and record.get("made_from") == made
            same = record["sha256"] == sha and same_recipe
            print(
                json.dumps(
                    {
                        "built_here": sha,
                        "shipped": record["sha256"],
                        "same_recipe": same_recipe,
                        "same_weights": same,
                        "cpu": cpu_name(),
                        "cores": len(os.sched_getaffinity(0)),
                    }
                )
            )
            sys.exit(0 if same else 1)
        shutil.rmtree(PREBUILT, ignore_errors=True)
        PREBUILT.mkdir(parents=True)
        for file in FILES:
            shutil.copy2(built / file, PREBUILT / file)
            os.chmod(PREBUILT / file, 0o644)
    import torch

    record = {
        "name": name,
        "sha256": sha,
        "built_on": {"cpu": cpu_name(), "cores": len(os.sched_getaffinity(0)), "torch": torch.__version__},
        "recipe": "conf/model/tiny.yaml's tiny + warm_start, conf/data/arithmetic.yaml's validation and test "
        "questions held out of its chat turns",
        "made_from": made,
    }
    (PREBUILT / PREBUILT_RECORD).write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record))


if __name__ == "__main__":
    main()
