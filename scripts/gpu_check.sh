#!/usr/bin/env bash
# scripts/gpu_check.sh [--offline-wheels DIR] [--out DIR] [--dry-run] [--cpu-dry-run] [gpu_check.py options]
# scripts/gpu_check.sh --build-wheels DIR [--python-version 3.11] [--node-freeze FILE]     (a connected machine)
#
# On one GPU machine without internet, within 9.5 minutes in all (docs/gpu.md): installs what this Python lacks
# beside its own CUDA torch and transformers from a wheelhouse (--offline-wheels DIR: pip --no-index --no-deps;
# build it on a connected machine with --build-wheels DIR), builds a random-initialised model with
# Qwen2.5-0.5B's architecture locally (no hub), runs 10 GRPO steps with backend=trl, and with backend=unsloth +
# fast_inference (vLLM) where that stack is installed (otherwise says it is skipped and why), and writes the
# numbers to --out DIR (default: $OUT, else $TMPDIR/grpo-sweep-gpu-check). With 2 or more GPUs it also runs one run
# over 2 GPUs (distributed=ddp) and one with a vLLM server on the second GPU, which add MULTI_GPU_S seconds.
# --dry-run lists what it would install and run, and runs nothing. --cpu-dry-run runs the same code on CPU with a
# tiny model (no install, no GPU numbers). --seed-correlation then measures, on this GPU, how the built-in task's
# configurations correlate by seed (python -m bench.seed_correlation: 2 mixes x 2 learning rates x 8 seeds, the
# tiny model; SEED_CORRELATION_S more seconds) and copies its tables to the output directory.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python}"
TOTAL_S=570  # 9.5 minutes: installing (30 s), the model and every check (--budget 540 s)
MULTI_GPU_S=353  # the 2-GPU checks' budgets (trl-ddp 143 s + trl-server 210 s), on a machine with 2 GPUs or more
SEED_CORRELATION_S=300  # 32 tiny-model runs on the pool (260 s on 2 CPU cores)

wheels="" build="" out="${OUT:-}" dry_run=0 cpu_dry_run=0 seed_correlation=0 pass=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --offline-wheels) wheels="$2"; shift 2 ;;
    --build-wheels) build="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    --cpu-dry-run) cpu_dry_run=1; pass+=("$1"); shift ;;
    --seed-correlation) seed_correlation=1; shift ;;
    *) pass+=("$1"); shift ;;
  esac
done
[[ -n "$out" ]] && pass+=(--out "$out")

if [[ -n "$build" ]]; then
  exec "$PYTHON" scripts/gpu_wheels.py build "$build" ${pass[@]+"${pass[@]}"}
fi

if [[ $dry_run == 1 ]]; then
  echo "gpu_check (dry run): nothing is installed or run"
  if [[ -n "$wheels" ]]; then
    echo "gpu_check: would run: $PYTHON -m pip install --no-index --no-deps --find-links $wheels <the wheels below>"
    "$PYTHON" scripts/gpu_wheels.py plan "$wheels"
  else
    echo "gpu_check: no --offline-wheels: would use the installed packages as they are"
  fi
  echo "gpu_check: would run: timeout ${TOTAL_S} $PYTHON scripts/gpu_check.py ${pass[*]}"
  if [[ $seed_correlation == 1 ]]; then
    echo "gpu_check: would run: timeout ${SEED_CORRELATION_S} $PYTHON -m bench.seed_correlation --seeds 8"
  fi
  exec "$PYTHON" scripts/gpu_check.py --plan ${pass[@]+"${pass[@]}"}
fi

if [[ -n "$wheels" && $cpu_dry_run == 0 ]]; then
  "$PYTHON" scripts/gpu_wheels.py install "$wheels"
fi
if [[ $cpu_dry_run == 0 ]]; then
  "$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'gpu_check: torch sees no CUDA GPU (nvidia-smi? CUDA build of torch?)')"
  gpus=$("$PYTHON" -c "import torch; print(torch.cuda.device_count())")
  if (( gpus >= 2 )); then TOTAL_S=$((TOTAL_S + MULTI_GPU_S)); fi
fi

if [[ $seed_correlation == 0 ]]; then
  exec timeout $((TOTAL_S - SECONDS)) "$PYTHON" scripts/gpu_check.py ${pass[@]+"${pass[@]}"}
fi
timeout $((TOTAL_S - SECONDS)) "$PYTHON" scripts/gpu_check.py ${pass[@]+"${pass[@]}"}
results="${out:-${TMPDIR:-/tmp}/grpo-sweep-gpu-check}"
mkdir -p "$results"
timeout "$SEED_CORRELATION_S" "$PYTHON" -m bench.seed_correlation --seeds 8 --out "${TMPDIR:-/tmp}/grpo-sweep-seed-correlation"
cp bench/results/seed_correlation.json bench/results/seed_correlation.md "$results/"
