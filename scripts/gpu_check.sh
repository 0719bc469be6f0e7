#!/usr/bin/env bash
# scripts/gpu_check.sh [--cpu-dry-run] [--steps N] [--backends trl,unsloth] [--skip-cli]
#
# On one GPU machine without internet, in under 10 minutes: uses the installed [gpu] stack (or installs the
# extra when a package index is reachable), builds a random-initialised model with Qwen2.5-0.5B's
# architecture locally, runs 10 GRPO steps with backend=trl (HF generation) and backend=unsloth +
# fast_inference (vLLM), and prints generation tokens/s, step time, peak GPU memory and whether the LoRA
# save -> vLLM generate round trip worked. Numbers go to bench/results/gpu_check.json.
# --cpu-dry-run runs the same code on CPU with a tiny model (no install, no GPU numbers).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python}"

dry_run=0
for arg in "$@"; do [[ "$arg" == "--cpu-dry-run" ]] && dry_run=1; done

if [[ $dry_run == 0 ]]; then
  missing=$("$PYTHON" - <<'PY'
import importlib.util
print(" ".join(m for m in ("unsloth", "unsloth_zoo", "vllm", "trl", "grpo_sweep") if importlib.util.find_spec(m) is None))
PY
)
  if [[ -n "$missing" ]]; then
    echo "gpu_check: not installed: $missing; installing the [gpu] extra" >&2
    if ! "$PYTHON" -m pip install -q -e ".[gpu]"; then
      echo "gpu_check: pip install -e '.[gpu]' failed (no package index reachable?); install the [gpu] extra on this machine first" >&2
      exit 1
    fi
  fi
  "$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'gpu_check: torch sees no CUDA GPU (nvidia-smi? CUDA build of torch?)')"
fi

exec timeout 660 "$PYTHON" scripts/gpu_check.py "$@"
