"""What backend=unsloth costs on a CPU machine (Unsloth's CPU fallback), next to backend=trl.

    PYTHONPATH=<dir with unsloth + unsloth_zoo> python -m bench.studies.unsloth_cpu

Prints and writes bench/results/unsloth_cpu.json: the size of the two packages, `import unsloth` time, the
wall time of the same short GRPO run (bench._common.SHORT_RUN, the tests' settings then) with each backend,
`python -m grpo_sweep.run.generate` on the unsloth run, and compose + validate of experiment=walkthrough_llama8b
(must stay light: no torch).
Each number is one process, timed from outside; the load average is recorded since the machine is shared.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._common import ROOT, SHORT_RUN, parser, run_dirs, tests_environment, write


def timed(args: list[str], **kwargs) -> tuple[float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    result = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, **kwargs)
    return round(time.perf_counter() - started, 2), result


def package_mb(name: str) -> float:
    spec = importlib.util.find_spec(name)
    folder = Path(spec.origin).parent
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 2**20


def main() -> int:
    parser(__doc__).parse_args()
    tests_environment()
    if importlib.util.find_spec("unsloth") is None:
        print(
            "unsloth is not importable: pip install --no-deps --target DIR unsloth==2026.10.9 "
            "unsloth_zoo==2026.10.9; PYTHONPATH=DIR"
        )
        return 2
    out: dict = {"load_average_before": os.getloadavg(), "cpus": os.cpu_count()}
    out["unsloth_packages_mb"] = round(package_mb("unsloth") + package_mb("unsloth_zoo"), 1)
    out["import_unsloth_s"], result = timed([sys.executable, "-c", "import unsloth"])
    out["import_torch_trl_transformers_peft_s"], _ = timed(
        [sys.executable, "-c", "import torch, trl, transformers, peft"]
    )
    out["compose_validate_walkthrough_s"], result = timed(
        [
            sys.executable,
            "-c",
            "import sys; from bench._common import compose; from grpo_sweep.run.validate import validate;"
            "validate(compose(['experiment=walkthrough_llama8b']));"
            "sys.exit(int(any(m in sys.modules for m in ('torch', 'unsloth', 'transformers'))))",
        ]
    )
    out["compose_validate_imports_heavy"] = result.returncode != 0
    with tempfile.TemporaryDirectory() as tmp:
        for backend in ("trl", "unsloth"):
            run_root = Path(tmp) / backend
            seconds, result = timed(
                [sys.executable, "launch.py", f"backend={backend}", *SHORT_RUN, f"output_root={run_root}"], timeout=900
            )
            if result.returncode != 0:
                print(result.stderr[-2000:])
                return 1
            [run_dir] = run_dirs(run_root)
            record = json.loads((run_dir / "summary.json").read_text())
            out[f"run_{backend}_wall_s"] = seconds
            out[f"run_{backend}_train_and_eval_s"] = record["runtime_s"]
        [run_dir] = run_dirs(Path(tmp) / "unsloth")
        out["generate_cli_unsloth_s"], result = timed(
            [sys.executable, "-m", "grpo_sweep.run.generate", str(run_dir), "What is 2 + 3?", "--max-new-tokens", "8"]
        )
        out["generate_cli_ok"] = result.returncode == 0
    out["load_average_after"] = os.getloadavg()
    out["fast_overrides"] = SHORT_RUN
    for key, value in out.items():
        print(f"{key:40} {value}")
    write("unsloth_cpu.json", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
