"""Several runs on one GPU (``hydra.launcher.runs_per_gpu=K``): the key's check, each run's GPU memory estimated from
its config, and the plan that K runs of the sweep fit one GPU, all on the launching machine before anything starts.

The estimate (GB) of one run, from its config:
- weights: the parameter count (the model's config.json: a local model folder, the Hugging Face cache, or the
  shapes of the models conf/model/ names) x bytes per parameter (model.dtype; model.load_in_4bit: half a byte a
  weight of the linear layers, the embeddings and norms in 16 bits);
- the trained parameters (LoRA: rank x (in + out) per targeted projection and layer; lora.enabled=false: every
  parameter) at 16 bytes each: fp32 weights, gradients and Adam's two moments;
- activations of one micro-batch (per_device_train_batch_size x (prompt + completion) tokens): one hidden state a layer
  with gradient checkpointing, ~34 x hidden bytes a token a layer without (Korthikanti et al. 2022, flash attention),
  plus the completion tokens' logits in fp32 (vocabulary x 4 bytes a token);
- generation: with a vLLM engine in the run's process (backend.fast_inference, or trainer.use_vllm in colocate mode)
  its share of the GPU (backend.gpu_memory_utilization / trainer.vllm_gpu_memory_utilization, TRL's 0.3 by
  default) x the GPU's memory: vLLM takes that share whatever else is there; otherwise the KV cache of
  transformers' generate: 2 x generation batch x (prompt + completion) x layers x kv heads x head dim x 2 bytes;
- the CUDA context and the allocator's slack: ``CONTEXT_GB`` a process.

The plan: placement is by free slot (the pool's workers and submitit_local's jobs take whichever of a GPU's K slots
is free; a packed SLURM job takes K runs in the sweep's order), so any K runs of the batch may meet on one GPU: the
K largest estimates together must fit ``USABLE`` of the GPU's memory. The GPU's memory is
``hydra.launcher.gpu_memory_gb`` (a SLURM partition's GPUs), else nvidia-smi's on this machine; with neither, the
plan is skipped with one line (CPU runs need none).

No torch here (the login node's path): config.json is read as JSON.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..run.validate import ConfigError

log = logging.getLogger(__name__)

# what a GPU's memory is planned to: the rest is left to fragmentation and what the estimate misses
USABLE = 0.95
# the CUDA context, cuBLAS/cuDNN workspaces and the caching allocator's slack, a process
CONTEXT_GB = 1.0
GB = 1024**3

# config.json shapes of the models conf/model/ names (no download needed to plan them)
KNOWN_MODELS: dict[str, dict] = {
    "qwen2.5-0.5b": dict(
        vocab_size=151936,
        hidden_size=896,
        intermediate_size=4864,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        tie_word_embeddings=True,
    ),
    "qwen2.5-1.5b": dict(
        vocab_size=151936,
        hidden_size=1536,
        intermediate_size=8960,
        num_hidden_layers=28,
        num_attention_heads=12,
        num_key_value_heads=2,
        tie_word_embeddings=True,
    ),
    "qwen2.5-7b": dict(
        vocab_size=152064,
        hidden_size=3584,
        intermediate_size=18944,
        num_hidden_layers=28,
        num_attention_heads=28,
        num_key_value_heads=4,
        tie_word_embeddings=False,
    ),
    "meta-llama-3.1-8b": dict(
        vocab_size=128256,
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        tie_word_embeddings=False,
    ),
}
PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "auto": 2}


def check_runs_per_gpu(value: Any) -> int:
    """``hydra.launcher.runs_per_gpu``: a whole number, 1 or more. Raises ConfigError naming the value."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(
            f"hydra.launcher.runs_per_gpu={value!r}: give a whole number of runs that share one GPU, 1 or more "
            "(1: a GPU per run)"
        )
    return value


def check_gpu_memory_gb(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ConfigError(
            f"hydra.launcher.gpu_memory_gb={value!r}: give one GPU's memory in GB (80 for an 80 GB H100), or null to "
            "ask nvidia-smi"
        )
    return float(value)


def model_shape(cfg: Any) -> dict | None:
    """The model's config.json values that size it, or None when neither a local folder, the Hugging Face cache
    nor ``KNOWN_MODELS`` has them."""
    model = cfg.model
    if model.tiny is not None:
        from ..models.tiny import TinySpec

        return TinySpec.from_config(model.tiny, model.max_seq_length).shape()
    name = str(model.name_or_path)
    local = Path(name).expanduser() / "config.json"
    text = None
    if local.is_file():
        text = local.read_text()
    else:
        try:
            from huggingface_hub import try_to_load_from_cache

            cached = try_to_load_from_cache(name, "config.json")
        except Exception:  # a name that is no repo id: not in the cache
            cached = None
        if isinstance(cached, str):
            text = Path(cached).read_text()
    if text is not None:
        return json.loads(text)
    base = name.rstrip("/").split("/")[-1].lower().removesuffix("-instruct")
    return KNOWN_MODELS.get(base)


@dataclass(frozen=True)
class Estimate:
    """One run's GPU memory, in GB, by part."""

    weights: float
    trained: float
    activations: float
    generation: float
    context: float = CONTEXT_GB
    vllm_share: float = 0.0  # of the GPU, when a vLLM engine in the process holds it

    @property
    def total(self) -> float:
        return self.weights + self.trained + self.activations + self.generation + self.context

    def parts(self) -> str:
        generation = (
            f"vLLM {self.vllm_share:g} of the GPU {self.generation:.1f}"
            if self.vllm_share
            else f"KV cache {self.generation:.1f}"
        )
        return (
            f"weights {self.weights:.2f}, trained+optimizer {self.trained:.2f}, activations {self.activations:.2f}, "
            f"{generation}, CUDA {self.context:.1f}"
        )


def _vllm_share(cfg: Any) -> float:
    """The share of the GPU a vLLM engine in the run's own process takes; 0 without one."""
    if cfg.backend.name == "unsloth" and cfg.backend.fast_inference:
        return float(cfg.backend.gpu_memory_utilization)
    if cfg.trainer.use_vllm and cfg.trainer.vllm_mode == "colocate":
        return float(cfg.trainer.vllm_gpu_memory_utilization)
    return 0.0


def estimate(cfg: Any, gpu_gb: float) -> Estimate:
    """One run's GPU memory (``Estimate``) on a GPU of ``gpu_gb``. Raises ConfigError when the model's size is
    unknown."""
    shape = model_shape(cfg)
    if shape is None:
        raise ConfigError(
            f"model.name_or_path={cfg.model.name_or_path}: its size is unknown here (no config.json in a local folder "
            f"or the Hugging Face cache, and not one of {', '.join(KNOWN_MODELS)}), so runs cannot be planned to "
            "share a GPU; download it first (huggingface-cli download <repo> config.json), or "
            "hydra.launcher.runs_per_gpu=1"
        )
    h, inter, layers = shape["hidden_size"], shape["intermediate_size"], shape["num_hidden_layers"]
    vocab, heads = shape["vocab_size"], shape["num_attention_heads"]
    kv_heads = shape.get("num_key_value_heads") or heads
    head_dim = shape.get("head_dim") or h // heads
    kv = kv_heads * head_dim
    dims = {  # (in, out) of each projection
        "q_proj": (h, h),
        "k_proj": (h, kv),
        "v_proj": (h, kv),
        "o_proj": (h, h),
        "gate_proj": (h, inter),
        "up_proj": (h, inter),
        "down_proj": (inter, h),
    }
    linear = layers * sum(a * b for a, b in dims.values())
    embeddings = vocab * h * (1 if shape.get("tie_word_embeddings") else 2)
    other = layers * 2 * h + h
    bytes_per = BYTES.get(str(cfg.model.dtype), 2)
    if cfg.model.load_in_4bit:
        weights = linear * 0.5 + (embeddings + other) * 2
    else:
        weights = (linear + embeddings + other) * bytes_per
    lora = cfg.lora
    if lora.enabled:
        targets = lora.target_modules
        names = PROJECTIONS if targets == "all-linear" else [t for t in (targets or []) if t in dims]
        trained_params = layers * sum(lora.r * (dims[n][0] + dims[n][1]) for n in names)
    else:
        trained_params = linear + embeddings + other
    trainer = cfg.trainer
    prompt = trainer.max_prompt_length or max(0, cfg.model.max_seq_length - trainer.max_completion_length)
    completion = trainer.max_completion_length
    tokens = trainer.per_device_train_batch_size * (prompt + completion)
    checkpointing = bool(trainer.gradient_checkpointing) or (
        cfg.backend.name == "unsloth" and cfg.backend.use_gradient_checkpointing not in (False, None, "false")
    )
    act_bytes = 2 if bytes_per == 2 or cfg.model.load_in_4bit else 4
    full_layer = 17 * h * act_bytes  # 34 x hidden bytes a token in 16 bits
    if checkpointing:  # each layer's input kept, one layer's activations recomputed at a time
        per_token = layers * h * act_bytes + full_layer
    else:
        per_token = layers * full_layer
    activations = tokens * per_token + trainer.per_device_train_batch_size * completion * vocab * 4
    share = _vllm_share(cfg)
    if share:
        generation = share * gpu_gb * GB
    else:
        batch = trainer.per_device_train_batch_size * (
            trainer.steps_per_generation or trainer.gradient_accumulation_steps
        )
        generation = 2 * batch * (prompt + completion) * layers * kv * act_bytes
    return Estimate(
        weights=weights / GB,
        trained=trained_params * 16 / GB,
        activations=activations / GB,
        generation=generation / GB,
        vllm_share=share,
    )


def nvidia_smi_gb() -> float | None:
    """The smallest GPU's memory on this machine, from nvidia-smi; None without one."""
    if not shutil.which("nvidia-smi"):
        return None
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    sizes = [float(line) / 1024 for line in out.stdout.split() if line.strip().replace(".", "", 1).isdigit()]
    return min(sizes) if out.returncode == 0 and sizes else None


def gpu_memory(launcher: Any, trains_here: bool) -> tuple[float | None, str]:
    """(GB, where it was read) of one GPU the runs train on."""
    configured = check_gpu_memory_gb(getattr(launcher, "gpu_memory_gb", None))
    if configured is not None:
        return configured, "hydra.launcher.gpu_memory_gb"
    if trains_here:
        found = nvidia_smi_gb()
        if found is not None:
            return found, "nvidia-smi"
    return None, ""


def largest_k(totals: list[float], usable: float) -> int:
    """The most runs that fit together whichever of them meet: the largest k whose k largest estimates fit."""
    fitted, used = 0, 0.0
    for total in sorted(totals, reverse=True):
        if used + total > usable:
            break
        fitted, used = fitted + 1, used + total
    return fitted


@dataclass
class Plan:
    runs_per_gpu: int
    gpu_gb: float | None
    source: str
    # (the run as the gate names it, its estimate), in the batch's order; None: a model of unknown size where the
    # GPU's memory is unknown too (the plan is skipped: only the dry run shows estimates then)
    estimates: list[tuple[str, Estimate | None]] = field(default_factory=list)

    def add(self, name: str, cfg: Any) -> None:
        """Estimate one run (``cfg`` as the gate composed it: read now, it is reused for the next run)."""
        check_packable(cfg, self.runs_per_gpu)
        try:
            found = estimate(cfg, self.gpu_gb if self.gpu_gb is not None else 80.0)
        except ConfigError:
            if self.gpu_gb is not None:  # a plan to keep needs every run's size
                raise
            found = None
        self.estimates.append((name, found))

    def check(self) -> None:
        """Raise ConfigError, one line, when the K largest runs of the batch would not fit one GPU together."""
        if self.gpu_gb is None or not self.estimates:
            return  # skipped, with its one line (start_plan)
        usable = self.gpu_gb * USABLE
        ranked = sorted(self.estimates, key=lambda item: -item[1].total)
        together = ranked[: self.runs_per_gpu]
        need = sum(e.total for _, e in together)
        if need <= usable:
            return
        name, largest = ranked[0]
        fits = largest_k([e.total for _, e in self.estimates], usable)
        k = self.runs_per_gpu
        advice = (
            f"at most {fits} fit (hydra.launcher.runs_per_gpu={fits})"
            if fits
            else "not even one run fits alone: lower its batch, completion length or vLLM share"
        )
        raise ConfigError(
            f"hydra.launcher.runs_per_gpu={k} does not fit: {name} needs ~{largest.total:.1f} GB ({largest.parts()}), "
            f"and the {len(together)} largest runs together ~{need:.1f} GB > {usable:.1f} GB usable of the GPU's "
            f"{self.gpu_gb:g} GB ({self.source}); {advice}"
        )

    def placement(self, groups: list[tuple[str, list[int]]], later: str = "") -> list[str]:
        """The dry run's lines: which runs share which GPU (``groups``: a GPU or a job, and the indices of its runs
        in the batch), with their estimates; ``later``: what happens to the runs no group holds."""
        lines = [
            f"GPU memory plan: {self.runs_per_gpu} run(s) a GPU"
            + (
                f", {self.gpu_gb:g} GB a GPU ({self.source}), {USABLE:.0%} of it planned"
                if self.gpu_gb is not None
                else "; the GPU's memory is unknown here (set hydra.launcher.gpu_memory_gb): vLLM shares at 80 GB"
            )
        ]
        for where, indices in groups:
            group = [self.estimates[i] for i in indices]
            together = sum(e.total for _, e in group if e is not None)
            lines.append(
                f"  {where}: "
                + "; ".join(
                    f"{name} ~{e.total:.2f} GB ({e.parts()})" if e else f"{name}: its model's size is unknown here"
                    for name, e in group
                )
                + f"; together ~{together:.2f} GB"
            )
        if later:
            lines.append(f"  {later}")
        return lines


def check_packable(cfg: Any, k: int) -> None:
    """A run that shares its GPU is one process on one GPU. Raises ConfigError."""
    if k > 1 and cfg.distributed.strategy != "none":
        raise ConfigError(
            f"hydra.launcher.runs_per_gpu={k} with distributed={cfg.distributed.strategy}: runs share a GPU one "
            "process each; keep runs_per_gpu=1 for runs over several processes"
        )
    if k > 1 and cfg.trainer.use_vllm and cfg.trainer.vllm_mode == "server":
        raise ConfigError(
            f"hydra.launcher.runs_per_gpu={k} with trainer.vllm_mode=server: a run with a vLLM server holds GPUs of "
            "its own; keep runs_per_gpu=1, or trainer.vllm_mode=colocate"
        )


def start_plan(launcher: Any, trains_here: bool) -> Plan | None:
    """The batch's plan, to ``add`` its runs to; None where there is nothing to plan (K=1 and no gpu_memory_gb:
    one run a GPU, as before the key). With gpu_memory_gb set, K=1 is planned too: a run that cannot fit its GPU
    alone is refused before it is queued."""
    k = check_runs_per_gpu(getattr(launcher, "runs_per_gpu", 1))
    if k == 1 and check_gpu_memory_gb(getattr(launcher, "gpu_memory_gb", None)) is None:
        return None  # not even nvidia-smi is asked: K=1 launches as it did before the key
    gpu_gb, source = gpu_memory(launcher, trains_here)
    if gpu_gb is None:
        log.info(
            "runs_per_gpu=%d: no GPU memory to plan against (no hydra.launcher.gpu_memory_gb, no nvidia-smi here): "
            "the memory plan is skipped (CPU runs need none)",
            k,
        )
    return Plan(k, gpu_gb, source)


def write_estimates(ledger: Path, run_dirs: list[Path], found: Plan | None) -> None:
    """The estimates where each run finds its own (run/sharing.py: the line of a run that ran out of memory)."""
    from ..run.files import write_json_atomic
    from ..run.sharing import ESTIMATES

    if found is None or found.gpu_gb is None:
        return
    ledger.mkdir(parents=True, exist_ok=True)
    path = ledger / ESTIMATES
    known = json.loads(path.read_text()) if path.is_file() else {}
    known.update({str(d.resolve()): round(e.total, 2) for d, (_, e) in zip(run_dirs, found.estimates)})
    write_json_atomic(path, known)
