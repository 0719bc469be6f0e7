"""The GPU stack grpo-sweep is pinned to, and the checks that say in one line what is wrong and how to fix it.

Unsloth patches trl/transformers/peft by version; a mismatched stack fails deep inside a kernel or a patched
trainer, far from its cause. So the Unsloth backend compares what is installed with the ``[gpu]`` extra's pins
before importing anything, and GPU-only options are refused on a machine without a GPU.
Light on purpose (no torch import): ``check_backend`` runs at compose time on login nodes.
"""

from __future__ import annotations

import os
import re
from importlib import metadata
from typing import Any, Callable, Iterable

from . import BACKENDS

# The `[gpu]` extra in pyproject.toml plus the core pins it was resolved against (tests keep them in sync).
GPU_PINS = {
    "unsloth": "2026.10.9",
    "unsloth_zoo": "2026.10.9",
    "vllm": "0.30.0",
    "torch": "2.13.0",
    "trl": "1.14.2",
    "transformers": "5.17.0",
}
INSTALL_GPU = 'pip install -e ".[gpu]"'
# Set to 1 to run a stack that differs from the pins anyway (mismatches become a warning).
SKIP_CHECK_ENV = "GRPO_SWEEP_SKIP_STACK_CHECK"
VLLM_MODES = ("colocate", "server")


class BackendError(ValueError):
    """This machine or its installed packages cannot run the requested backend options; the message says why."""


def installed_version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _release(version: str) -> str:
    """``2.13.0+cpu`` -> ``2.13.0``: a local build tag does not change the API."""
    return re.split(r"[+]", version, maxsplit=1)[0]


def stack_problems(
    names: Iterable[str], version_of: Callable[[str], str | None] = installed_version, optional: Iterable[str] = ()
) -> tuple[list[str], list[str]]:
    """(problems, pins to install): missing or mismatched packages among ``names``; ``optional`` ones may be absent."""
    problems, fixes = [], []
    for name in names:
        version, pin = version_of(name), GPU_PINS[name]
        if version is None:
            if name in optional:
                continue
            problems.append(f"{name} is not installed")
        elif _release(version) != pin:
            problems.append(f"{name} {version} is installed, the [gpu] stack pins {name}=={pin}")
        else:
            continue
        fixes.append(f'"{name}=={pin}"')
    return problems, fixes


def check_stack(
    need_vllm: bool,
    version_of: Callable[[str], str | None] = installed_version,
    env: dict | None = None,
    cuda: bool = True,
) -> list[str]:
    """Raise BackendError naming every package that differs from the pins, with the pip command that fixes it.

    vllm is checked when it is needed (fast_inference) or installed (unsloth imports it when present).
    Without a GPU the fix installs unsloth without its dependencies: they bring a CUDA torchvision that breaks
    ``import unsloth`` next to a CPU torch, and the CPU fallback needs none of them.
    Returns the problems that were let through because GRPO_SWEEP_SKIP_STACK_CHECK=1.
    """
    env = os.environ if env is None else env
    names = ["unsloth", "unsloth_zoo", "torch", "trl", "transformers", "vllm"]
    problems, fixes = stack_problems(names, version_of, optional=() if need_vllm else ("vllm",))
    if not problems:
        return []
    if env.get(SKIP_CHECK_ENV) == "1":
        return problems
    if not cuda:
        fix = f"pip install --no-deps {' '.join(fixes)}  (no GPU: Unsloth's CPU fallback needs no more; "
    else:
        fix = f"pip install {' '.join(fixes)}  (or {INSTALL_GPU}; "
    raise BackendError(f"backend=unsloth: {'; '.join(problems)}. Fix: {fix}{SKIP_CHECK_ENV}=1 runs anyway)")


def visible_gpu_ids() -> list[str] | None:
    """CUDA_VISIBLE_DEVICES as CUDA reads it: its ids or UUIDs up to the first -1 ("" or "-1": none); None when it is
    not set (then every GPU of the machine is visible, which each caller counts its own way)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return None
    ids = [gpu.strip() for gpu in visible.split(",")]
    ids = ids[: ids.index("-1")] if "-1" in ids else ids
    return [gpu for gpu in ids if gpu]


def gpu_only_settings(cfg: Any) -> list[tuple[str, str]]:
    """Every setting of ``cfg`` that needs a CUDA GPU, with what to set instead on CPU: the one list the checks
    on the training machine (``validate.check_machine``) and in the backends (``check_device``) read."""
    found = []
    if cfg.model.dtype in ("bfloat16", "float16"):
        found.append((f"model.dtype={cfg.model.dtype}", "model.dtype=float32 (or auto)"))
    if cfg.trainer.bf16:
        found.append(("trainer.bf16=true", "trainer.bf16=false (or null: bf16 when supported)"))
    for key in ("bf16", "fp16"):
        if cfg.trainer.args.get(key):
            found.append((f"trainer.args.{key}=true", f"remove trainer.args.{key}"))
    if cfg.model.load_in_4bit:
        found.append(("model.load_in_4bit=true (QLoRA)", "model.load_in_4bit=false"))
    if cfg.optimizer.optim.startswith("paged_"):
        found.append((f"optimizer.optim={cfg.optimizer.optim} (paged)", "optimizer=adamw_torch"))
    if cfg.backend.name == "unsloth" and cfg.backend.fast_inference:
        found.append(("backend.fast_inference=true", "backend.fast_inference=false"))
    if cfg.trainer.use_vllm:
        found.append(("trainer.use_vllm=true", "trainer.use_vllm=false"))
    return found


def engine_in_process(cfg: Any) -> str | None:
    """The settings with which a run starts a vLLM engine its process cannot free, or None.

    unsloth_zoo sets VLLM_ENABLE_V1_MULTIPROCESSING=0, so the engine lives in the training process, and deleting
    it does not give its GPU memory back (vllm-project/vllm#21073): a later run in that process has only what is
    left. The gate refuses launchers that train several runs in one process for such runs.
    """
    if cfg.backend.name == "unsloth" and cfg.backend.fast_inference:
        return "backend=unsloth backend.fast_inference=true"
    return None


def gpu_refusal(cfg: Any) -> str | None:
    """One line naming every GPU-only setting of ``cfg`` and its CPU fix; None when there is none."""
    found = gpu_only_settings(cfg)
    if not found:
        return None
    verb = "needs" if len(found) == 1 else "need"
    return (
        f"{', '.join(s for s, _ in found)} {verb} a GPU and this machine has no GPU; "
        f"on CPU: {', '.join(fix for _, fix in found)}"
    )


def check_cpu_fallback(cuda: bool, env: dict | None = None) -> None:
    """Unsloth's own error for this is a NotImplementedError from deep inside ``import unsloth``."""
    env = os.environ if env is None else env
    if not cuda and env.get("UNSLOTH_DISABLE_CPU_FALLBACK") == "1":
        raise BackendError(
            "backend.name=unsloth needs a GPU and this machine has no GPU (UNSLOTH_DISABLE_CPU_FALLBACK=1 turns off "
            "Unsloth's CPU fallback); unset it to run on stock transformers/PEFT, or use backend=trl"
        )


# unsloth_zoo reads it once, at import: where Unsloth writes the trainer and model code it generates.
UNSLOTH_COMPILE_ENV = "UNSLOTH_COMPILE_LOCATION"
UNSLOTH_COMPILE_DIR = "unsloth_compiled_cache"


def unsloth_compile_location(env: dict | None = None, pid: int | None = None) -> str:
    """This process's directory for Unsloth's generated code: ``<cache root>/unsloth_compiled_cache/<pid>``.
    Unsloth's default is ``unsloth_compiled_cache`` in the working directory, which pool and Optuna workers share
    and overwrite under each other. A location the user set is kept; one this function gave a parent process
    (inherited through the environment) is not, since the parent may still be writing there."""
    from grpo_sweep.models.tiny import cache_root  # lazy: this module is imported at compose time

    env = os.environ if env is None else env
    ours = cache_root() / UNSLOTH_COMPILE_DIR
    current = env.get(UNSLOTH_COMPILE_ENV)
    if current and os.path.dirname(os.path.abspath(current)) != str(ours.absolute()):
        return current
    return str(ours / str(os.getpid() if pid is None else pid))


def check_device(
    cfg: Any, cuda: bool, version_of: Callable[[str], str | None] = installed_version, env: dict | None = None
) -> None:
    """On the training machine: refuse GPU-only options without a GPU, and vLLM generation without vllm."""
    env = os.environ if env is None else env
    if not cuda:
        refusal = gpu_refusal(cfg)
        if refusal:
            raise BackendError(refusal)
        if cfg.backend.name == "unsloth":
            check_cpu_fallback(cuda, env)
    if cfg.trainer.use_vllm and version_of("vllm") is None:
        raise BackendError(
            f'trainer.use_vllm=true needs vllm; fix: pip install "vllm=={GPU_PINS["vllm"]}" (or {INSTALL_GPU})'
        )


def check_backend(cfg: Any) -> None:
    """The backend group: its name, and combinations with the trainer's generation and the LoRA that cannot work
    on any machine (runs at compose time, before anything is submitted)."""
    backend, trainer = cfg.backend, cfg.trainer
    if backend.name not in BACKENDS:
        raise BackendError(f"backend.name={backend.name!r}; available: {', '.join(sorted(BACKENDS))}")
    if backend.name != "unsloth" and backend.fast_inference:
        raise BackendError(
            f"backend.fast_inference=true is Unsloth's vLLM generation and backend={backend.name}; use "
            "backend=unsloth, or trainer.use_vllm=true for TRL's own vLLM generation"
        )
    if backend.name == "unsloth" and trainer.use_vllm:
        raise BackendError(
            "trainer.use_vllm=true with backend=unsloth: Unsloth generates with its own vLLM engine; set "
            "backend.fast_inference=true trainer.use_vllm=false"
        )
    if trainer.vllm_mode not in VLLM_MODES:
        raise BackendError(f"trainer.vllm_mode={trainer.vllm_mode!r}; use one of: {', '.join(VLLM_MODES)}")
    if not 0 < backend.gpu_memory_utilization <= 1:
        raise BackendError(
            f"backend.gpu_memory_utilization={backend.gpu_memory_utilization}: a fraction of GPU memory in (0, 1]"
        )
    if backend.name == "unsloth" and backend.fast_inference and not cfg.lora.enabled:
        raise BackendError(
            "backend.fast_inference=true with lora=none: Unsloth's vLLM generation serves a LoRA adapter; "
            "use a LoRA (lora=default) or backend.fast_inference=false"
        )
