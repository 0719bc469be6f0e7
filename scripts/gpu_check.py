"""GPU check: 10 GRPO steps with backend=trl (HF generation) and backend=unsloth + fast_inference (vLLM) on a
random-initialised model with Qwen2.5-0.5B's architecture and size, built locally (no download, no internet); on a
machine with 2 or more GPUs also one run over 2 GPUs (distributed=ddp) and one with a vLLM server on its own GPU
(trainer.vllm_mode=server).

Prints per backend: generation tokens/s (during training and in the held-out evaluation), step time, peak GPU
memory, and whether the saved LoRA round-trips (saved -> loaded by vLLM / PEFT -> generates, and changes the
output), then ``python -m grpo_sweep.run.generate`` on the run in a fresh process. Writes the numbers as JSON.

    scripts/gpu_check.sh --out DIR            # on one GPU machine, < 9.5 min (docs/gpu.md: an air-gapped node)
    python scripts/gpu_check.py --cpu-dry-run # the same code path on CPU with a tiny model (trl; unsloth's
                                              # CPU fallback without fast_inference when unsloth is installed)
    python scripts/gpu_check.py --plan        # what it would run, each check's budget; imports no torch

Each check has its own time budget (CHECK_BUDGETS, and --budget for the whole); a check that runs out is
reported as timed out and the next one starts. The Unsloth/vLLM checks run where that stack is installed and are
reported as skipped, with the reason, where it is not (a node with only its own torch and transformers).

Each backend runs in its own process: unsloth must be imported before trl/transformers and patches them, and
a vLLM engine keeps its GPU memory until its process ends.

The 2-GPU checks (trl-ddp, trl-server) run ``launch.py`` itself in their process, as a user would, and report
what the runs' own files say (steps, world size, training time) with every GPU's peak memory; the server check also
times the server's start to its first healthy answer and reads its GPUs' memory once it is stopped. With fewer than
2 GPUs they are reported as skipped, with the reason. --cpu-dry-run runs trl-ddp as 2 gloo processes.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import re
import runpy
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grpo_sweep.launching.memory import KNOWN_MODELS  # noqa: E402 - the checkout's package, put on the path above

# Qwen/Qwen2.5-0.5B-Instruct's config.json (architecture and size; the weights are random): its shape as the memory
# plan knows it, and the rest a model needs
QWEN2_5_0_5B = dict(
    **KNOWN_MODELS["qwen2.5-0.5b"],
    max_position_embeddings=32768,
    rope_theta=1000000.0,
    rms_norm_eps=1e-6,
    hidden_act="silu",
    use_sliding_window=False,
)
TINY_QWEN2 = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=2048,
    rope_theta=1000000.0,
    rms_norm_eps=1e-6,
    hidden_act="silu",
    tie_word_embeddings=True,
)
# gpu_check's runs -> grpo-sweep backend; trl-vllm (TRL's colocated vLLM) is opt-in: --backends trl,trl-vllm,unsloth;
# so is packing (several runs on one GPU, hydra.launcher.runs_per_gpu=K): --backends packing
BACKEND_MODULES = {
    "trl": "trl",
    "trl-vllm": "trl",
    "unsloth": "unsloth",
    "trl-ddp": "trl",
    "trl-server": "trl",
    "packing": "trl",
}
DEFAULT_CHECKS = ["trl", "unsloth", "trl-ddp", "trl-server"]
# one run over 2 GPUs: 2 DDP processes; 1 training process + 1 vLLM server GPU
MULTI_GPU = {
    "trl-ddp": ["distributed=ddp", "distributed.nproc_per_node=2"],
    "trl-server": ["trainer.use_vllm=true", "trainer.vllm_mode=server", "trainer.vllm_server.gpus=1"],
}
# What each check waits for, in seconds, on one GPU with the pinned stack: estimates from the sources and the
# walkthrough until a GPU run measures them (each check prints "budget / used"; BENCHMARKS.md records them). A check's
# budget is what it waits for plus MARGIN; the model build is bounded by what is left of --budget.
WAITS = {
    "model": {"151,936-token tokenizer (add, save), random bf16 model, save": 30},
    "trl": {
        "process start and imports": 20,
        "10 GRPO steps, HF generation (~4 s a step)": 45,
        "held-out evaluations, HF": 20,
        "LoRA round trip (PEFT)": 10,
    },
    "trl-vllm": {
        "process start and imports": 20,
        "vLLM engine start (torch.compile, CUDA graphs)": 90,
        "10 GRPO steps, vLLM generation": 20,
        "held-out evaluations, vLLM": 10,
        "LoRA round trip": 10,
    },
    "unsloth": {
        "process start and imports": 20,
        "Unsloth import and patching": 25,
        "vLLM engine start (torch.compile, CUDA graphs)": 90,
        "10 GRPO steps, vLLM generation": 20,
        "held-out evaluations, vLLM": 10,
        "LoRA round trip (vLLM and PEFT)": 20,
    },
    # python -m grpo_sweep.run.generate on a run: a fresh process loads it and answers once
    "cli-trl": {"process start and imports": 20, "base model and adapter": 5, "one answer": 5},
    "cli-trl-vllm": {"process start and imports": 20, "base model and adapter": 5, "one answer": 5},
    "cli-unsloth": {
        "process start and imports": 20,
        "Unsloth import and patching": 25,
        "vLLM engine start (torch.compile, CUDA graphs)": 90,
        "one answer": 5,
    },
    # runs_per_gpu = 1, 2 and 4 on the first GPU (the pool launcher): 1 + 2 + 4 runs of PACKING_STEPS steps
    "packing": {
        "K=1: process and worker start, imports, 1 run": 60,
        "K=2: 2 runs side by side": 60,
        "K=4: 4 runs side by side": 90,
    },
    # 2 GPUs: two processes start, load the model and join NCCL, then 10 steps; a vLLM server's start, 10 steps
    # with a weight sync each, the final evaluation through the server, the stop
    "trl-ddp": {"two processes start and join NCCL": 40, "10 GRPO steps, HF generation": 60, "evaluations": 30},
    "trl-server": {
        "process start and imports": 20,
        "vLLM server start to healthy": 90,
        "10 GRPO steps, a weight sync each": 40,
        "evaluations through the server": 10,
        "server stop and GPU freed": 30,
    },
}
MARGIN = 1.1
CHECK_BUDGETS = {name: math.ceil(sum(waits.values()) * MARGIN) for name, waits in WAITS.items()}
# The CPU dry run checks the code path, not the time: two CPU cores train its tiny model over the same 151,936-token
# vocabulary slower than a GPU trains the real one (its trl-ddp check: ~80 s alone, over 143 s beside other work).
DRY_RUN_BUDGET_FACTOR = 3
# after a timeout: SIGTERM, then this long for the check's handlers to stop what they started (a vLLM server is
# given 20 s, backends/vllm_server.py) before SIGKILL
STOP_GRACE_S = 30.0
# how long a stopped server's GPUs may take to show their memory freed
FREE_WAIT_S = 30.0
OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cpu-dry-run", action="store_true", help="tiny model on CPU: exercises the script, no GPU numbers"
    )
    parser.add_argument(
        "--steps", type=int, default=None, help="GRPO steps per backend (default 10; 2 for --cpu-dry-run)"
    )
    parser.add_argument(
        "--backends",
        default=None,
        help=f"comma list (default: {','.join(DEFAULT_CHECKS)}; trl-ddp and trl-server need 2 GPUs)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(os.environ["OUT"]) if os.environ.get("OUT") else None,
        help="results and work dir (default: $OUT, else $TMPDIR/grpo-sweep-gpu-check)",
    )
    parser.add_argument("--json", type=Path, default=None, help="the results' JSON (default: OUT/gpu_check.json)")
    parser.add_argument("--plan", action="store_true", help="list the checks and their budgets; run nothing")
    parser.add_argument("--skip-cli", action="store_true", help="skip `python -m grpo_sweep.run.generate` per run")
    parser.add_argument(
        "--budget",
        type=float,
        default=540.0,
        help="seconds for the whole check (default 540); each 2-GPU check that runs adds its own budget",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--model-dir", type=Path, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


# -- the model ---------------------------------------------------------------------------------------------------


def build_model(out: Path, dry_run: bool) -> Path:
    """Random-init Qwen2 with a locally trained byte-level BPE tokenizer (the tiny model's), padded to the vocab."""
    if (out / "config.json").exists():
        return out
    import torch
    from tokenizers import AddedToken
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    from grpo_sweep.models.tiny import TinySpec, ensure_tiny_model

    tokenizer = AutoTokenizer.from_pretrained(ensure_tiny_model(TinySpec()))
    # the dry run too: the 151,936-token vocabulary built the same way (adding ~151k tokens), so that path has run
    # on CPU before a GPU hour depends on it
    sizes = dict(TINY_QWEN2, vocab_size=QWEN2_5_0_5B["vocab_size"]) if dry_run else QWEN2_5_0_5B
    # Unused ids still cost what they cost in the real model (embedding, LM head, softmax); giving each a token
    # keeps every sampled id decodable by HF and vLLM alike.
    extra = sizes["vocab_size"] - len(tokenizer)
    tokenizer.add_tokens([AddedToken(f"<|x{i}|>", normalized=False, special=False) for i in range(extra)])
    config = Qwen2Config(
        **sizes, bos_token_id=None, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id
    )
    torch.manual_seed(0)
    dtype = torch.float32 if dry_run else torch.bfloat16
    model = Qwen2ForCausalLM(config).to(dtype)
    staging = out.with_name(out.name + ".partial")
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    os.replace(staging, out)
    return out


# -- one backend's run (child process) ---------------------------------------------------------------------------


def overrides(backend: str, model_dir: Path, steps: int, dry_run: bool) -> list[str]:
    completion = 16 if dry_run else 256
    common = [
        "model=qwen2_5_0_5b_instruct",
        f"model.name_or_path={model_dir}",
        f"model.dtype={'float32' if dry_run else 'bfloat16'}",
        "model.load_in_4bit=false",
        "model.max_seq_length=1024",
        "data=arithmetic",
        "reward_mix=smoke",
        "reward_mix.xmlcount.weight=1",
        # a random model over 151,936 tokens samples near uniformly (entropy ln 151,936) and writes no tag xmlcount
        # could score: every sample scored 0, GRPO had no advantage, the LoRA stayed at zero and the round trip could
        # not show it acts (found once the dry run built the same vocabulary). A synthetic reward any two such
        # samples differ in gives GRPO something to learn; this check is of the plumbing, not of the task.
        "+reward_mix.even_tokens.fn=gpu_check.even_token_share",
        "experiment=gpu",
        "trainer.bf16=null",  # bf16 where the GPU has it
        "trainer.mask_truncated_completions=false",  # a random model never stops: masking would zero the loss
        f"trainer.max_steps={steps}",
        f"trainer.save_steps={steps}",
        "trainer.num_generations=6",
        "trainer.per_device_train_batch_size=6",
        "trainer.max_prompt_length=256",
        f"trainer.max_completion_length={completion}",
        f"trainer.eval.max_new_tokens={completion}",
        "trainer.eval.batch_size=64",
        "data.max_val_samples=64",
        "data.arithmetic.max_operands=3",  # 256 + 64 + 64 distinct questions
        "data.arithmetic.n_train=256",
        "data.arithmetic.n_val=64",
        "trainer.disable_tqdm=true",
        # high enough that 10 steps move a random model's greedy output: the round trip can show the LoRA acts
        "optimizer.learning_rate=1e-3",
        "optimizer.lr_scheduler_type=constant",
        "optimizer.warmup_steps=0",
        "lora.r=16",
        "lora.alpha=32",
    ]
    if backend == "trl":
        return common + ["backend=trl"]
    if backend == "trl-ddp":  # the same per-GPU batch on each of 2 GPUs: 2 prompts x 6 completions a step
        return common + ["backend=trl", *MULTI_GPU[backend]]
    if backend == "trl-server":  # training on the first GPU, `trl vllm-serve` on the last
        return common + ["backend=trl", *MULTI_GPU[backend], "trainer.vllm_server.max_model_len=1024"]
    if backend == "trl-vllm":  # TRL's own vLLM generation, colocated in the training process
        return common + [
            "backend=trl",
            "trainer.use_vllm=true",
            "trainer.vllm_mode=colocate",
            "trainer.vllm_gpu_memory_utilization=0.3",
        ]
    fast = "false" if dry_run else "true"
    return common + ["backend=unsloth", f"backend.fast_inference={fast}", "backend.gpu_memory_utilization=0.5"]


ADDED_TOKEN = re.compile(r"<\|x(\d+)\|>")


def even_token_share(completions, **kwargs) -> list[float]:
    """The share of a completion's ``<|xN|>`` tokens (those build_model pads the vocabulary with) whose N is even."""
    texts = [c[-1]["content"] if isinstance(c, list) else str(c) for c in completions]
    numbers = [ADDED_TOKEN.findall(text) for text in texts]
    return [sum(int(n) % 2 == 0 for n in found) / len(found) if found else 0.0 for found in numbers]


class GpuMemoryPeak:
    """Peak device memory in use (all allocators: torch's and vLLM's pool), sampled every 0.1 s through NVML
    (nvidia-ml-py, in the wheelhouse), else torch.cuda.mem_get_info (the same device-wide number). ``peak`` is the
    first visible GPU's; with ``all_gpus`` ``peaks`` holds every visible GPU's (torch's device order)."""

    def __init__(self, all_gpus: bool = False):
        import torch

        self.cuda = torch.cuda.is_available()
        self.peaks: list[int] = []
        self.source = None
        self._reads = []
        if self.cuda:
            count = torch.cuda.device_count() if all_gpus else 1
            self._reads, self.source = zip(*(self._reader(i) for i in range(count)))
            self.source = self.source[0]
            self.peaks = [0] * count
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    @property
    def peak(self) -> int:
        return self.peaks[0] if self.peaks else 0

    @staticmethod
    def _reader(device: int):
        return used_memory_reader(visible_gpu_ids()[device] if device < len(visible_gpu_ids()) else str(device), device)

    def _poll(self):
        while not self._stop.wait(0.1):
            self.peaks = [max(peak, read()) for peak, read in zip(self.peaks, self._reads)]

    def __enter__(self):
        if self.cuda:
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()


def visible_gpu_ids() -> list[str]:
    """CUDA_VISIBLE_DEVICES' entries (NVML indices or UUIDs), in torch's device order; unset: NVML's every GPU."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [d.strip() for d in visible.split(",") if d.strip()]
    try:
        import pynvml

        pynvml.nvmlInit()
        return [str(i) for i in range(pynvml.nvmlDeviceGetCount())]
    except Exception:
        return ["0"]


def used_memory_reader(gpu_id: str, torch_device: int | None = None):
    """(a function returning the bytes in use on the GPU ``gpu_id`` names, "nvml" | "torch.cuda.mem_get_info")."""
    try:
        import pynvml

        pynvml.nvmlInit()
        # NVML counts every GPU of the machine, whatever CUDA_VISIBLE_DEVICES says
        handle = (
            pynvml.nvmlDeviceGetHandleByIndex(int(gpu_id))
            if gpu_id.isdigit()
            else pynvml.nvmlDeviceGetHandleByUUID(gpu_id)
        )
        return (lambda: pynvml.nvmlDeviceGetMemoryInfo(handle).used), "nvml"
    except Exception:  # no nvidia-ml-py, or a MIG/UUID setup it cannot map: the same number from CUDA
        if torch_device is None:
            return None, None
        import torch

        return (
            lambda: (lambda free, total: total - free)(*torch.cuda.mem_get_info(torch_device))
        ), "torch.cuda.mem_get_info"


def record_generation_times(durations: list):
    """TRL times generation (and a server's weight sync) with profiling contexts that only report to trackers; keep
    the durations here."""
    from trl.extras.profiling import ProfilingContext

    original = ProfilingContext.__exit__

    def __exit__(self, *exc):
        if self._start_time is not None and ("generate" in self.name.lower() or self.name == "sync_weights"):
            durations.append((self.name, time.perf_counter() - self._start_time))
        return original(self, *exc)

    ProfilingContext.__exit__ = __exit__


def run_child(backend_name: str, model_dir: Path, out: Path, steps: int, dry_run: bool) -> dict:
    from grpo_sweep.backends import get_backend

    backend = get_backend(BACKEND_MODULES[backend_name])
    import torch
    from hydra import compose, initialize_config_dir

    from grpo_sweep.configstore import register_configs
    from grpo_sweep.run.files import read_jsonl
    from grpo_sweep.run.train import train
    from grpo_sweep.run.validate import validate

    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides(backend_name, model_dir, steps, dry_run))
    validate(cfg)
    out.mkdir(parents=True, exist_ok=True)
    (out / ".hydra").mkdir(exist_ok=True)
    from omegaconf import OmegaConf

    OmegaConf.save(cfg, out / ".hydra" / "config.yaml")  # what `python -m grpo_sweep.run.generate` reads

    gen_durations: list = []
    record_generation_times(gen_durations)
    eval_timing = {}
    plain_generate = backend.generate

    def timed_generate(model, tokenizer, prompts, decoding, **kwargs):
        started = time.perf_counter()
        texts = plain_generate(model, tokenizer, prompts, decoding, **kwargs)
        eval_timing["seconds"] = time.perf_counter() - started
        eval_timing["tokens"] = sum(len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts)
        eval_timing["prompts"] = len(prompts)
        return texts

    backend.generate = timed_generate
    plain_save = backend.save
    trained = {}

    def save_and_keep(model, tokenizer, run_dir):
        trained["model"] = model, tokenizer  # the vLLM round trip needs this process's engine
        return plain_save(model, tokenizer, run_dir)

    backend.save = save_and_keep
    started = time.perf_counter()
    with GpuMemoryPeak() as memory:
        summary = train(cfg, out, [])
    wall = time.perf_counter() - started
    backend.generate, backend.save = plain_generate, plain_save

    history = [row for row in read_jsonl(out / "metrics.jsonl") if "step_time" in row]
    step_times = [row["step_time"] for row in history]
    completion_tokens = sum(row.get("completions/mean_length", 0) * 6 for row in history)  # 6 completions/step
    gen_seconds = sum(d for name, d in gen_durations if name != "sync_weights")
    result = {
        "backend": backend_name + (" + fast_inference (vLLM)" if cfg.backend.fast_inference else ""),
        "generation": "vLLM" if cfg.backend.fast_inference or cfg.trainer.use_vllm else "transformers generate",
        "status": summary["status"],
        "steps": summary["steps"],
        "train_wall_s": round(wall, 1),
        "step_time_s": round(sum(step_times[1:]) / max(1, len(step_times) - 1), 3) if step_times else None,
        "first_step_time_s": round(step_times[0], 3) if step_times else None,
        "processes": 1,
        # the same measure as the 2-GPU checks'
        "train_tokens_per_s": tokens_per_training_second(completion_tokens, summary),
        "train_generation_tokens_per_s": round(completion_tokens / gen_seconds, 1) if gen_seconds else None,
        "train_generation_timer": sorted({name for name, _ in gen_durations if name != "sync_weights"}),
        "eval_generation_tokens_per_s": round(eval_timing["tokens"] / eval_timing["seconds"], 1)
        if eval_timing
        else None,
        "eval_prompts": eval_timing.get("prompts"),
        "peak_gpu_memory_gib": round(memory.peak / 2**30, 2) if memory.cuda else None,
        "peak_gpu_memory_source": memory.source,
        "torch_max_allocated_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if memory.cuda else None,
    }
    result["lora_round_trip"] = lora_round_trip(backend, cfg, out, trained.get("model"))
    return result


def watch_server(server: dict):
    """Time each vLLM server's start to its first healthy answer, and read its GPUs' memory once it is stopped,
    whichever code of the run starts and stops it (grpo_sweep.backends.vllm_server.VLLMServer)."""
    from grpo_sweep.backends.vllm_server import VLLMServer

    plain_start, plain_stop = VLLMServer.start, VLLMServer.stop

    def start(self):
        gpus = [str(g) for g in self.spec.gpus] if self.spec.gpus is not None else visible_gpu_ids()
        readers = [used_memory_reader(g)[0] for g in gpus]
        server.update(gpus=gpus, before_gib=[round(r() / 2**30, 2) for r in readers if r])
        started = time.perf_counter()
        try:
            return plain_start(self)
        finally:
            server["start_to_healthy_s"] = round(time.perf_counter() - started, 1)

    def stop(self):
        running = self.proc is not None
        plain_stop(self)
        if not running or "gpus" not in server:
            return
        # the driver frees a killed process's memory shortly after it exits: wait for it, up to FREE_WAIT_S
        readers = [used_memory_reader(g)[0] for g in server["gpus"]]
        limit = [b + 1.0 for b in server.get("before_gib", [])]  # 1 GiB: another process's context, not a server
        stopped = time.perf_counter()
        while True:
            after = [round(r() / 2**30, 2) for r in readers if r]
            if not limit or all(a <= b for a, b in zip(after, limit)) or time.perf_counter() - stopped > FREE_WAIT_S:
                break
            time.sleep(0.5)
        server.update(
            after_stop_gib=after,
            freed_s=round(time.perf_counter() - stopped, 1),
            memory_freed=bool(limit) and len(after) == len(limit) and all(a <= b for a, b in zip(after, limit)),
        )

    VLLMServer.start, VLLMServer.stop = start, stop


def tokens_per_training_second(tokens: float, summary: dict) -> float | None:
    """Every rank's completion tokens over the training's wall time (generation, rewards, backward, optimizer,
    checkpoints; the periodic evaluations left out): what the run turns out. TRL's step_time leaves out the
    optimizer step and, in some loops, the generation (grpo_sweep/run/cost.py)."""
    timings = summary.get("timings_s") or {}
    seconds = (timings.get("train") or 0) - (timings.get("eval_periodic") or 0)
    return round(tokens / seconds, 1) if seconds > 0 else None


def run_app_child(name: str, model_dir: Path, out: Path, steps: int, dry_run: bool) -> dict:
    """One run through ``launch.py`` in this process, as ``python launch.py <overrides>`` would train it (rank 0's
    files, ranks started by the run itself); every visible GPU's peak memory sampled meanwhile."""
    import torch

    gen_durations: list = []
    record_generation_times(gen_durations)  # this process's trainer only: a server run's, not DDP's ranks'
    server: dict = {}
    if name == "trl-server":
        watch_server(server)
    if out.exists():  # this check's own run from an earlier try: train it afresh, not resume it
        import shutil

        shutil.rmtree(out)
    argv = sys.argv
    sys.argv = ["launch.py", *overrides(name, model_dir, steps, dry_run), f"hydra.run.dir={out}"]
    started = time.perf_counter()
    exit_code = 0
    try:
        with GpuMemoryPeak(all_gpus=True) as memory:
            runpy.run_path(str(ROOT / "launch.py"), run_name="__main__")
    except SystemExit as exc:
        exit_code = exc.code
    finally:
        sys.argv = argv
    wall = time.perf_counter() - started
    from grpo_sweep.run.files import read_jsonl

    if not (out / "summary.json").is_file():  # refused before it started: its one line is the exit's message
        raise RuntimeError(
            exit_code
            if isinstance(exit_code, str)
            else f"launch.py exited with {exit_code} and wrote no summary.json in {out}"
        )
    summary = json.loads((out / "summary.json").read_text())
    world = (summary.get("distributed") or {}).get("world_size", 1)
    history = [row for row in read_jsonl(out / "metrics.jsonl") if "step_time" in row]
    step_times = [row["step_time"] for row in history]
    completions = 6 * world  # per_device_train_batch_size x processes: every completion of a step
    tokens = sum(row.get("completions/mean_length", 0) * completions for row in history)
    gen_seconds = sum(d for name, d in gen_durations if name != "sync_weights")
    result = {
        "backend": name + {"trl-ddp": " (2 processes, DDP)", "trl-server": " (1 GPU + vLLM server)"}.get(name, ""),
        "generation": "vLLM server" if name == "trl-server" else "transformers generate",
        "status": summary.get("status"),
        "steps": summary.get("steps"),
        "processes": world,
        "train_wall_s": round(wall, 1),
        "step_time_s": round(sum(step_times[1:]) / max(1, len(step_times) - 1), 3) if step_times else None,
        "first_step_time_s": round(step_times[0], 3) if step_times else None,
        "train_tokens_per_s": tokens_per_training_second(tokens, summary),
        "train_generation_tokens_per_s": round(tokens / gen_seconds, 1) if gen_seconds else None,
        "peak_gpu_memory_gib_per_gpu": [round(p / 2**30, 2) for p in memory.peaks] if memory.cuda else None,
        "peak_gpu_memory_gib": round(memory.peak / 2**30, 2) if memory.cuda else None,
        "peak_gpu_memory_source": memory.source,
        "gpus_visible": torch.cuda.device_count(),
    }
    if name == "trl-server":
        syncs = [d for n, d in gen_durations if n == "sync_weights"]
        result.update(
            server_start_to_healthy_s=server.get("start_to_healthy_s"),
            server_gpus=server.get("gpus"),
            weight_sync_s=round(sum(syncs) / len(syncs), 3) if syncs else None,
            server_gpu_memory_after_stop_gib=server.get("after_stop_gib"),
            server_memory_freed=server.get("memory_freed"),
            server_memory_freed_after_s=server.get("freed_s"),
        )
        if "gpus" not in server:
            result["error"] = "the run started no vLLM server (trainer.vllm_mode=server is not wired into runs here)"
    if summary.get("error"):  # a failed run's own one line (record_failure)
        result["error"] = str(summary["error"]).strip().splitlines()[-1][:300]
    return result


PACKING_KS = (1, 2, 4)
PACKING_STEPS = 5


def packing_overrides(model_dir: Path, k: int, sweep_dir: Path, dry_run: bool) -> list[str]:
    """K runs (seeds 1..K) on one GPU through the pool with runs_per_gpu=K: the trl check's run, shorter, with its
    evaluations cut to a few prompts (what is measured is training side by side)."""
    run = [o for o in overrides("trl", model_dir, PACKING_STEPS, dry_run) if not o.startswith("trainer.seed")]
    return [
        "-m",
        "hydra/launcher=pool",
        f"hydra.launcher.runs_per_gpu={k}",
        *(["hydra.launcher.gpu_memory_gb=80"] if dry_run else []),  # a stand-in GPU's memory on CPU
        f"hydra.sweep.dir={sweep_dir}",
        *run,
        "data.max_val_samples=8",
        "data.max_test_samples=8",
        "trainer.eval.every_steps=0",
        "trainer.eval.k=0",
        f"trainer.seed={','.join(str(s) for s in range(1, k + 1))}",
    ]


def run_packing_child(model_dir: Path, out: Path, steps: int, dry_run: bool) -> dict:
    """Sweeps of K runs sharing the first GPU, K = PACKING_KS: each sweep's wall time (runs per GPU-hour), the mean
    step time of its runs, the GPU's peak memory (NVML, device-wide: every run's process) against the gate's plan for
    K such runs (the sum of their estimates, <sweep>/.gpu_locks/estimates.json). On CPU (the dry run) a stand-in GPU
    id and 80 GB figure: the placement, plan and records run as they would, the numbers are not a GPU's."""
    import torch

    from grpo_sweep.run.files import read_jsonl

    out.mkdir(parents=True, exist_ok=True)
    first = visible_gpu_ids()[0] if torch.cuda.is_available() else "0"
    env = {
        **os.environ,
        "CUDA_VISIBLE_DEVICES": first,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), str(ROOT / "scripts"), os.environ.get("PYTHONPATH")])),
    }
    per_k: dict = {}
    problems = []
    for k in PACKING_KS:
        sweep_dir = out / f"k{k}"
        if sweep_dir.exists():
            import shutil

            shutil.rmtree(sweep_dir)
        started = time.perf_counter()
        with GpuMemoryPeak() as memory:
            done = subprocess.run(
                [sys.executable, str(ROOT / "launch.py"), *packing_overrides(model_dir, k, sweep_dir, dry_run)],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
            )
        wall = time.perf_counter() - started
        summaries = [json.loads(p.read_text()) for p in sorted(sweep_dir.glob("*/summary.json"))]
        completed = [s for s in summaries if s.get("status") == "completed"]
        if done.returncode != 0 or len(completed) != k:
            problems.append(f"K={k}: {len(completed)} of {k} runs completed; {last_line(done.stderr or done.stdout)}")
        steps_times = [
            row["step_time"]
            for n in range(k)
            for row in read_jsonl(sweep_dir / str(n) / "metrics.jsonl")
            if "step_time" in row
        ]
        estimates = sweep_dir / ".gpu_locks" / "estimates.json"
        plan = sum(json.loads(estimates.read_text()).values()) if estimates.is_file() else None
        per_k[k] = {
            "runs": k,
            "completed": len(completed),
            "wall_s": round(wall, 1),
            "runs_per_gpu_hour": round(len(completed) / wall * 3600, 1) if wall > 0 else None,
            "step_time_s": round(sum(steps_times) / len(steps_times), 3) if steps_times else None,
            "peak_gpu_memory_gib": round(memory.peak / 2**30, 2) if memory.cuda else None,
            "plan_gib": None if plan is None else round(plan, 2),
            "neighbours": [len((s.get("gpu_sharing") or {}).get("neighbours", [])) for s in completed],
            "device_seconds": round(sum(s.get("device_seconds") or 0 for s in completed), 1),
        }
    result = {
        "backend": "packing",
        "status": "completed" if not problems else "failed",
        "steps": PACKING_STEPS,
        "per_k": per_k,
        "packing_runs_per_gpu_hour": [per_k[k]["runs_per_gpu_hour"] for k in PACKING_KS],
        "packing_step_time_s": [per_k[k]["step_time_s"] for k in PACKING_KS],
        "packing_peak_gpu_memory_gib": [per_k[k]["peak_gpu_memory_gib"] for k in PACKING_KS],
        "packing_plan_gib": [per_k[k]["plan_gib"] for k in PACKING_KS],
    }
    if problems:
        result["error"] = "; ".join(problems)[:600]
    return result


def lora_round_trip(backend, cfg, run_dir: Path, trained) -> dict:
    """Reload the saved adapter (vLLM LoRA request / PEFT), generate greedily, and compare log-probabilities with
    the bare base model: greedy text of a barely trained random model rarely changes, its log-probs do."""
    adapter = run_dir / "lora"
    check = {"adapter_saved": (adapter / "adapter_model.safetensors").is_file()}
    try:
        from grpo_sweep.data import load_splits

        prompts = list(load_splits(cfg.data, need_ground_truth=False).validation["prompt"])[:8]
        started = time.perf_counter()
        if cfg.backend.name == "unsloth" and cfg.backend.fast_inference:
            texts, base_lp, lora_lp, tokens_differ = vllm_round_trip(trained, prompts, adapter)
        else:
            texts, base_lp, lora_lp, tokens_differ = peft_round_trip(backend, cfg, run_dir, prompts)
        difference = max((abs(a - b) for a, b in zip(base_lp, lora_lp)), default=0.0)
        check.update(
            generated=len(texts) == len(prompts) and all(isinstance(t, str) for t in texts),
            lora_changes_logprobs=tokens_differ or difference > 1e-4,
            greedy_tokens_differ=tokens_differ,
            max_logprob_difference=round(difference, 5),
            seconds=round(time.perf_counter() - started, 1),
            example=texts[0][:80],
        )
    except Exception as exc:  # reported, not raised: the other numbers are still worth printing
        check.update(generated=False, error=f"{type(exc).__name__}: {exc}"[:500])
    check["ok"] = bool(check["adapter_saved"] and check.get("generated"))
    return check


def vllm_round_trip(trained, prompts, adapter: Path):
    """The walkthrough's last step: fast_generate with lora_request=model.load_lora(<saved folder>)."""
    from vllm import SamplingParams

    model, tokenizer = trained  # this process's engine holds the base weights
    texts = [tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True) for p in prompts]
    params = SamplingParams(temperature=0, max_tokens=32, logprobs=0)
    with_lora = model.fast_generate(texts, sampling_params=params, lora_request=model.load_lora(str(adapter)))
    base = model.fast_generate(texts, sampling_params=params)
    # greedy: where the tokens agree, the cumulative log-probs score the same tokens
    same = [list(a.outputs[0].token_ids) == list(b.outputs[0].token_ids) for a, b in zip(with_lora, base)]
    return (
        [o.outputs[0].text for o in with_lora],
        [o.outputs[0].cumulative_logprob for o, kept in zip(base, same) if kept],
        [o.outputs[0].cumulative_logprob for o, kept in zip(with_lora, same) if kept],
        not all(same),
    )


def peft_round_trip(backend, cfg, run_dir: Path, prompts):
    """The saved adapter on a freshly loaded base; log-probs of its greedy completions with and without it."""
    import torch

    model, tokenizer = backend.load_trained(cfg, run_dir)
    from grpo_sweep.backends.decoding import Decoding

    texts = backend.generate(model, tokenizer, prompts, Decoding(max_new_tokens=32))
    chats = [
        tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True) + t for p, t in zip(prompts, texts)
    ]
    batch = tokenizer(chats, return_tensors="pt", padding=True, add_special_tokens=False).to(
        next(model.parameters()).device
    )

    def sequence_logprobs():
        with torch.no_grad():
            logits = model(**batch).logits[:, :-1].float()
        token_lp = torch.log_softmax(logits, -1).gather(-1, batch["input_ids"][:, 1:, None])[..., 0]
        return (token_lp * batch["attention_mask"][:, 1:]).sum(-1).tolist()

    lora_lp = sequence_logprobs()
    with model.disable_adapter():
        base_lp = sequence_logprobs()
    return texts, base_lp, lora_lp, False


# -- the whole check (parent process) ----------------------------------------------------------------------------


def run_process(
    args: list[str], env: dict, seconds_left: float, log: Path, floor_s: float = 10.0, grace_s: float = STOP_GRACE_S
) -> tuple[int | None, str]:
    """(returncode or None on timeout, output); the output goes to ``log`` as it comes.

    The check runs in a process group of its own, and on timeout everything it started goes with it: SIGTERM to its
    group (a run's handler stops the vLLM server it started, ``backends/vllm_server.py``), then after ``grace_s``
    SIGKILL to every group any of its processes was in. ``subprocess.run(timeout=)`` killed the child alone, and the
    server, in a session of its own, kept 90 % of the GPU from the next check."""
    with log.open("w") as sink:
        proc = subprocess.Popen(
            args, cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT, text=True, start_new_session=True
        )
        try:
            code = proc.wait(timeout=max(floor_s, seconds_left))
        except subprocess.TimeoutExpired:
            stop_process_tree(proc, grace_s)
            code = None
    return code, log.read_text(errors="replace")


def _children_by_parent() -> dict[int, list[int]]:
    # /proc, not psutil: psutil is not on the GPU node (its own torch, a wheelhouse of what we need)
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue  # gone while we looked
            children.setdefault(ppid, []).append(int(entry))
    return children


def process_groups(pid: int) -> set[int]:
    """The process groups of ``pid`` and of every process under it (a server in its own session included)."""
    children, todo, groups = _children_by_parent(), [pid], set()
    while todo:
        current = todo.pop()
        try:
            groups.add(os.getpgid(current))
        except ProcessLookupError:
            continue
        todo.extend(children.get(current, []))
    return groups


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, though not ours to signal
    return True


def stop_process_tree(proc: subprocess.Popen, grace_s: float) -> None:
    """SIGTERM the check's group, SIGKILL what is left of every group it spread to after ``grace_s``."""
    groups = process_groups(proc.pid) | {proc.pid}
    groups.discard(os.getpgrp())  # never this script's own
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    end = time.monotonic() + grace_s
    while time.monotonic() < end and any(_group_alive(g) for g in groups):
        if proc.poll() is None:
            groups |= process_groups(proc.pid) - {os.getpgrp()}  # what it started while stopping
        time.sleep(0.1)
    for pgid in groups:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    proc.wait()


def last_line(output: str) -> str:
    lines = output.strip().splitlines()
    return lines[-1][:300] if lines else "no output"


def run_cli(run_dir: Path, env: dict, seconds_left: float, log: Path) -> dict:
    started = time.perf_counter()
    question = [
        "-m",
        "grpo_sweep.run.generate",
        str(run_dir),
        "What is 2 + 3?",
        "--max-new-tokens",
        "32",
        "--seed",
        "0",
    ]
    code, output = run_process([sys.executable, *question], env, seconds_left, log)
    return {
        "ok": code == 0,
        "seconds": round(time.perf_counter() - started, 1),
        "error": None if code == 0 else ("timed out" if code is None else last_line(output)) + f" (log: {log})",
    }


def fmt(value) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, list):
        return "/".join(fmt(v) for v in value)
    return str(value)


def passed(result: dict) -> bool:
    """A completed check's own test: the LoRA round trip, or for a server run that the server freed its GPUs."""
    if "lora_round_trip" in result:
        return bool(result["lora_round_trip"].get("ok"))
    if "server_memory_freed" in result:
        return bool(result["server_memory_freed"])
    return "error" not in result


def report(results: list[dict], header: dict) -> str:
    lines = [f"grpo-sweep GPU check: {header['device']}; {header['model']}; {header['steps']} GRPO steps", ""]
    rows = [
        ("status", "status"),
        ("budget / used (s)", "budget_used"),
        ("processes", "processes"),
        ("train tokens/s (all ranks)", "train_tokens_per_s"),
        ("train generation tokens/s", "train_generation_tokens_per_s"),
        ("eval generation tokens/s", "eval_generation_tokens_per_s"),
        ("step time (s, steps 2..)", "step_time_s"),
        ("first step (s)", "first_step_time_s"),
        ("train wall (s)", "train_wall_s"),
        ("peak GPU memory (GiB)", "peak_gpu_memory_gib"),
        ("  per GPU (GiB)", "peak_gpu_memory_gib_per_gpu"),
        ("torch max allocated (GiB)", "torch_max_allocated_gib"),
        ("server start->healthy (s)", "server_start_to_healthy_s"),
        ("weight sync to server (s)", "weight_sync_s"),
        ("server GPU freed at stop", "server_memory_freed"),
        ("packing runs/GPU-h K=1,2,4", "packing_runs_per_gpu_hour"),
        ("  packing step time (s)", "packing_step_time_s"),
        ("  packing peak GiB (NVML)", "packing_peak_gpu_memory_gib"),
        ("  packing plan's GiB", "packing_plan_gib"),
    ]
    for r in results:
        if "budget_s" in r:
            r.setdefault("budget_used", f"{r['budget_s']} / {r.get('process_wall_s')}")
    names = [r.get("backend", "?") for r in results]
    width = max(26, *(len(n) + 2 for n in names))
    lines.append(" " * 28 + "".join(n.ljust(width) for n in names))
    for label, key in rows:
        lines.append(label.ljust(28) + "".join(fmt(r.get(key)).ljust(width) for r in results))
    lines.append(
        "LoRA save -> reload -> gen".ljust(28)
        + "".join(fmt(r.get("lora_round_trip", {}).get("ok")).ljust(width) for r in results)
    )
    lines.append(
        "  LoRA changes log-probs".ljust(28)
        + "".join(fmt(r.get("lora_round_trip", {}).get("lora_changes_logprobs")).ljust(width) for r in results)
    )
    lines.append(
        "generate CLI (new process)".ljust(28) + "".join(fmt(r.get("cli", {}).get("ok")).ljust(width) for r in results)
    )
    lines.append(
        "  budget / used (s)".ljust(28)
        + "".join(
            (f"{r['cli'].get('budget_s')} / {r['cli'].get('seconds')}" if r.get("cli") else "n/a").ljust(width)
            for r in results
        )
    )
    for r in results:
        for problem in (r.get("error"), r.get("lora_round_trip", {}).get("error"), (r.get("cli") or {}).get("error")):
            if problem:
                lines.append(f"  {r.get('backend')}: {problem}")
    return "\n".join(lines)


# what each backend's check imports beyond torch and transformers
STACKS = {
    "trl": ["trl", "peft", "accelerate", "datasets", "hydra"],
    "trl-vllm": ["trl", "vllm"],
    "unsloth": ["unsloth", "unsloth_zoo", "vllm"],
    "trl-ddp": ["trl", "peft", "accelerate", "datasets", "hydra"],
    "trl-server": ["trl", "peft", "accelerate", "datasets", "hydra", "vllm"],
    "packing": ["trl", "peft", "accelerate", "datasets", "hydra", "joblib"],
}


def select_backends(requested: list[str], dry_run: bool, gpus: int = 1) -> tuple[list[str], dict[str, str]]:
    """(backends to run, {backend: why it is skipped}); imports nothing. ``gpus``: the GPUs visible here."""
    run, skipped = [], {}
    for name in requested:
        stack = [m for m in STACKS[name] if not (dry_run and m == "vllm")]  # the dry run has no fast_inference
        lacking = [m for m in stack if importlib.util.find_spec(m) is None]
        if dry_run and name in ("trl-vllm", "trl-server"):
            skipped[name] = "needs a GPU; the dry run leaves it out"
        elif name in MULTI_GPU and not dry_run and gpus < 2:
            skipped[name] = (
                f"needs 2 GPUs ({' '.join(MULTI_GPU[name])}) and {gpus} {'is' if gpus == 1 else 'are'} visible here"
            )
        elif lacking:
            where = (
                'pip install -e ".[gpu]" where the full stack can be installed'
                if name != "trl"
                else "install the wheelhouse: scripts/gpu_check.sh --offline-wheels DIR"
            )
            skipped[name] = f"not installed here: {', '.join(lacking)}; {where}"
        else:
            run.append(name)
    return run, skipped


def model_name(dry_run: bool) -> str:
    return "model-tiny-qwen2" if dry_run else "model-qwen2.5-0.5b-random"


def budgets(backends: list[str], cli: bool) -> dict[str, int]:
    checks = {"model": CHECK_BUDGETS["model"], **{name: CHECK_BUDGETS[name] for name in backends}}
    if cli:
        checks.update(
            {f"cli-{name}": CHECK_BUDGETS[f"cli-{name}"] for name in backends if name not in (*MULTI_GPU, "packing")}
        )
    return checks


def multi_gpu_seconds(backends: list[str]) -> int:
    """What the 2-GPU checks that run add to --budget (a one-GPU machine keeps the 9.5 minutes)."""
    return sum(CHECK_BUDGETS[name] for name in backends if name in MULTI_GPU)


def main(argv=None) -> int:
    args = parse_args(argv)
    dry_run = args.cpu_dry_run
    steps = args.steps or (2 if dry_run else 10)
    factor = DRY_RUN_BUDGET_FACTOR if dry_run else 1
    budget_of = {name: seconds * factor for name, seconds in CHECK_BUDGETS.items()}
    if args.child:
        from grpo_sweep.backends import get_backend

        get_backend(BACKEND_MODULES[args.child])  # before anything imports trl/transformers: unsloth first
        if args.child == "packing":
            result = run_packing_child(args.model_dir, args.out, steps, dry_run)
        elif args.child in MULTI_GPU:
            result = run_app_child(args.child, args.model_dir, args.out, steps, dry_run)
            args.out.mkdir(parents=True, exist_ok=True)
        else:
            result = run_child(args.child, args.model_dir, args.out, steps, dry_run)
        (args.out / "gpu_check_result.json").write_text(json.dumps(result, indent=2))
        return 0

    requested = args.backends.split(",") if args.backends else DEFAULT_CHECKS
    unknown = [b for b in requested if b not in BACKEND_MODULES]
    if unknown:
        print(f"gpu_check: --backends {','.join(unknown)}; use some of: {', '.join(BACKEND_MODULES)}", file=sys.stderr)
        return 2
    if args.plan:
        from grpo_sweep.run.validate import gpu_count  # no torch: what a plan may cost

        gpus = gpu_count()
    else:
        import torch

        gpus = torch.cuda.device_count()
    backends, skipped = select_backends(requested, dry_run, gpus)
    work = args.out or Path(os.environ.get("TMPDIR", "/tmp")) / ("grpo-sweep-gpu-check" + ("-dry" if dry_run else ""))
    checks = {check: budget_of[check] for check in budgets(backends, not args.skip_cli)}
    if args.plan:
        print(f"gpu_check: results would go to {work} (gpu_check.json, gpu_check.txt, a log per check)")
        print(
            f"gpu_check: {'a tiny Qwen2 on CPU' if dry_run else 'a random Qwen2.5-0.5B-sized model'} built "
            f"locally in {work} (no hub), then {steps} GRPO steps per backend; whole check within "
            f"{(args.budget + multi_gpu_seconds(backends)) * factor:.0f} s"
        )
        for check, seconds in checks.items():
            what = {
                "model": "build the model",
                "trl-ddp": "one run over 2 processes (python launch.py ... distributed=ddp): steps, tokens/s, "
                "step time, peak memory of each GPU",
                "trl-server": "one run with a vLLM server on the last GPU (python launch.py ... "
                "trainer.vllm_mode=server): server start to healthy, tokens/s, each GPU's peak "
                "memory, the server GPU's memory after the stop",
                "packing": f"sweeps of K runs on one GPU at runs_per_gpu=K, K = {', '.join(map(str, PACKING_KS))} "
                "(python launch.py -m hydra/launcher=pool ...): runs per GPU-hour, step time, peak memory against "
                "the plan's estimate",
            }.get(check) or (
                f"python -m grpo_sweep.run.generate on the {check[4:]} run"
                if check.startswith("cli-")
                else f"train with backend={check}: step time, generation tokens/s, peak GPU memory (NVML), "
                "LoRA round trip"
            )
            print(f"gpu_check: would run {check} (budget {seconds} s): {what}")
        for name in [b for b in backends if b != "packing"]:
            print(
                f"gpu_check:   {name} overrides: "
                f"{' '.join(overrides(name, work / model_name(dry_run), steps, dry_run))}"
            )
        for name, why in skipped.items():
            print(f"gpu_check: would skip {name}: {why}")
        return 0

    if not dry_run and not torch.cuda.is_available():
        print("gpu_check: no CUDA GPU visible to torch; run on a GPU machine, or use --cpu-dry-run", file=sys.stderr)
        return 2
    for name, why in skipped.items():
        print(f"gpu_check: skipping backend={name}: {why}", flush=True)
    if not backends:
        print("gpu_check: no backend can run here", file=sys.stderr)
        return 2
    work.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        **OFFLINE_ENV,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    env.setdefault("GRPO_SWEEP_CACHE", str(work / "cache"))

    started = time.perf_counter()
    model_dir = build_model(work / model_name(dry_run), dry_run)
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "CPU (dry run: no GPU numbers)"
    header = {
        "device": device,
        "model": ("tiny Qwen2" if dry_run else "Qwen2.5-0.5B architecture, random weights") + f" ({model_dir})",
        "steps": steps,
        "build_model_s": round(time.perf_counter() - started, 1),
    }
    print(f"gpu_check: model ready in {header['build_model_s']} s at {model_dir}", flush=True)

    deadline = started + (args.budget + multi_gpu_seconds(backends)) * factor
    results = []
    for name in backends:
        run_dir = work / f"run-{name}"
        child = [
            sys.executable,
            __file__,
            "--child",
            name,
            "--model-dir",
            str(model_dir),
            "--out",
            str(run_dir),
            "--steps",
            str(steps),
        ]
        if dry_run:
            child.append("--cpu-dry-run")
        print(f"gpu_check: {steps} GRPO steps with backend={name} ...", flush=True)
        t0 = time.perf_counter()
        log = work / f"{name}.log"
        code, output = run_process(child, env, min(budget_of[name], deadline - time.perf_counter()), log)
        result_file = run_dir / "gpu_check_result.json"
        if code == 0 and result_file.is_file():
            result = json.loads(result_file.read_text())
        else:
            why = (
                f"timed out (its budget: {budget_of[name]} s, or --budget; its processes were stopped)"
                if code is None
                else last_line(output)
            )
            result = {"backend": name, "status": "failed", "error": f"{why} (log: {log})"}
        result["process_wall_s"] = round(time.perf_counter() - t0, 1)
        result["budget_s"] = budget_of[name]
        results.append(result)
        print(
            f"gpu_check: backend={name} {result['status']}, budget / used {result['budget_s']} / "
            f"{result['process_wall_s']} s",
            flush=True,
        )
    # after every training run: a fresh process loading each run is worth less than the runs themselves
    for name, result in zip(backends, results):
        if result.get("status") == "completed" and not args.skip_cli and name not in (*MULTI_GPU, "packing"):
            if deadline - time.perf_counter() < 30:
                result["cli"] = {"ok": None, "error": "skipped: --budget spent"}
                continue
            print(f"gpu_check: python -m grpo_sweep.run.generate on the {name} run ...", flush=True)
            seconds = min(budget_of[f"cli-{name}"], deadline - time.perf_counter())
            result["cli"] = run_cli(work / f"run-{name}", env, seconds, work / f"{name}-cli.log")
            result["cli"]["budget_s"] = budget_of[f"cli-{name}"]
            print(
                f"gpu_check: generate CLI on the {name} run: {'ok' if result['cli']['ok'] else 'FAILED'}, "
                f"budget / used {result['cli']['budget_s']} / {result['cli']['seconds']} s",
                flush=True,
            )

    results += [{"backend": name, "status": "skipped", "error": f"skipped: {why}"} for name, why in skipped.items()]
    header["total_s"] = round(time.perf_counter() - started, 1)
    header["budgets_s"] = checks
    text = report(results, header)
    print("\n" + text + f"\n\ntotal {header['total_s']} s")
    json_path = args.json or work / "gpu_check.json"
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps({"header": header, "results": results}, indent=2))
    (work / "gpu_check.txt").write_text(text + "\n")
    print(f"wrote {json_path} and {work / 'gpu_check.txt'}")
    ok = all(r.get("status") == "completed" and passed(r) for r in results if r.get("status") != "skipped")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
