"""A run's own vLLM server (``trainer.use_vllm=true trainer.vllm_mode=server``): its settings checked, its GPUs and
sizes taken from the config, and started on the run's global rank 0 around training.

The server's lifecycle (ports, start, health wait, stop) is ``backends/vllm_server.py``; this module decides what
it serves and where. No torch at import: the settings checks run on the login node.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from typing import Any

from ..backends.gpu_stack import visible_gpu_ids
from ..backends.vllm_server import ServerError, ServerSpec, serving

# `trl vllm-serve` flags the run sets from the config or picks itself (ports): one of them in extra_args would win
# over the run's value (argparse keeps the last), and the trainer would look for the server elsewhere.
RUN_SET_FLAGS = (
    "model",
    "tensor_parallel_size",
    "data_parallel_size",
    "host",
    "port",
    "gpu_memory_utilization",
    "max_model_len",
)
# GRPOConfig fields that point the trainer at a server: the run sets them to the server it started.
HAND_OVER_FIELDS = ("vllm_server_base_url", "vllm_server_host", "vllm_server_port", "vllm_group_port")


def serves(cfg: Any) -> bool:
    """Whether the run starts its own vLLM server."""
    return bool(cfg.trainer.use_vllm) and cfg.trainer.vllm_mode == "server"


def server_gpus(cfg: Any) -> int:
    """GPUs the run's vLLM server takes on rank 0's node (0: no server)."""
    return int(cfg.trainer.vllm_server.gpus) if serves(cfg) else 0


def _flag_name(arg: str) -> str | None:
    if not arg.startswith("--"):
        return None
    return arg[2:].split("=", 1)[0].replace("-", "_")


def check_server_settings(cfg: Any) -> None:
    """The server's settings that no machine can make work; raises a one-line ValueError naming the value. The GPU
    arithmetic (gpus = tensor x data parallel, GPUs per node) is ``distributed.check_world``'s."""
    if not serves(cfg):
        return
    server, trainer = cfg.trainer.vllm_server, cfg.trainer
    if not 0 < server.gpu_memory_utilization <= 1:
        raise ValueError(
            f"trainer.vllm_server.gpu_memory_utilization={server.gpu_memory_utilization:g}: a fraction of "
            "each server GPU's memory in (0, 1]"
        )
    if server.startup_timeout_s <= 0:
        raise ValueError(
            f"trainer.vllm_server.startup_timeout_s={server.startup_timeout_s:g}: must be > 0 (seconds the "
            "run waits for the server's /health)"
        )
    if cfg.distributed.strategy != "none" and server.startup_timeout_s >= cfg.distributed.timeout_s:
        # rank 0 starts the server before it joins the others (the trainer's process group), who wait that long
        raise ValueError(
            f"trainer.vllm_server.startup_timeout_s={server.startup_timeout_s:g} with distributed.timeout_s="
            f"{cfg.distributed.timeout_s}: the other ranks wait for rank 0, which waits for its server, and would "
            "give up first; raise distributed.timeout_s above it"
        )
    if server.max_model_len is not None:
        budget = (trainer.max_prompt_length or 0) + trainer.max_completion_length
        if server.max_model_len < budget:
            raise ValueError(
                f"trainer.vllm_server.max_model_len={server.max_model_len} is shorter than trainer.max_prompt_length "
                f"+ trainer.max_completion_length = {budget}: the server could not hold a prompt and its completion; "
                f"raise it to {budget} or more, or null (the model's own length)"
            )
    for arg in server.extra_args:
        name = _flag_name(str(arg))
        if name in RUN_SET_FLAGS:
            raise ValueError(
                f"trainer.vllm_server.extra_args has {arg}, which the run sets itself"
                + (f" (trainer.vllm_server.{name})" if name in server else "")
                + "; remove it"
            )
    given = [name for name in HAND_OVER_FIELDS if trainer.args.get(name) is not None]
    if given:
        raise ValueError(
            f"trainer.args.{given[0]}={trainer.args[given[0]]} with trainer.vllm_mode=server: the run "
            "starts its own server and points the trainer at it; remove it"
        )


def visible_gpus() -> list[str]:
    """This node's GPUs as CUDA numbers them for this process: CUDA_VISIBLE_DEVICES (ids or UUIDs, up to the first
    -1, as CUDA reads it), else 0 .. device count - 1."""
    ids = visible_gpu_ids()
    if ids is not None:
        return ids
    import torch  # on the training machine, where train() has imported it already

    return [str(i) for i in range(torch.cuda.device_count())]


def server_spec(cfg: Any, model: str, training_processes: int, visible: Sequence[str] | None = None) -> ServerSpec:
    """The server of ``cfg`` serving ``model`` (the run's base model source). The training processes of this node
    train on GPUs 0 .. ``training_processes`` - 1 (a rank on GPU ``local_rank``); the server takes the last
    ``trainer.vllm_server.gpus`` of ``visible`` (default: this process's, ``visible_gpus``)."""
    server = cfg.trainer.vllm_server
    count = int(server.gpus)
    visible = list(visible_gpus() if visible is None else visible)
    if count < 1 or training_processes + count > len(visible):
        # the gate checked the same sum against the launcher's GPUs; this is the node the run really got
        raise ServerError(
            f"trainer.vllm_server.gpus={count} and {training_processes} training process(es) need "
            f"{training_processes + count} GPUs on this node and {len(visible)} are visible "
            f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')})"
        )
    extra = [str(a) for a in server.extra_args]
    if cfg.model.trust_remote_code:
        extra = ["--trust_remote_code", "true", *extra]
    return ServerSpec(
        model=str(model),
        tensor_parallel_size=int(server.tensor_parallel_size),
        data_parallel_size=int(server.data_parallel_size),
        gpus=tuple(visible[-count:]),
        gpu_memory_utilization=float(server.gpu_memory_utilization),
        max_model_len=None if server.max_model_len is None else int(server.max_model_len),
        extra_args=tuple(extra),
        startup_timeout_s=float(server.startup_timeout_s),
    )


@contextlib.contextmanager
def run_server(cfg: Any, context: Any, model: str) -> Iterator[dict]:
    """Yield the GRPOConfig fields for this process of the run; on global rank 0 of a server-mode run, with the
    server started and healthy, stopped when the block ends (however it ends).

    Only rank 0 talks to the server: in TRL 1.14.2 (trl/generation/vllm_generation.py) ``VLLMGeneration._init_vllm``
    makes the ``VLLMClient`` and joins the weight-sync group only ``if accelerator.is_main_process``, and
    ``generate`` / ``sync_weights`` gather the other ranks' prompts and weights to it. So the other ranks get no
    host or ports (``use_vllm``/``vllm_mode`` come from the config for every rank)."""
    if not serves(cfg) or not context.main:
        yield {}
        return
    spec = server_spec(cfg, model, max(1, context.world_size // max(1, context.nodes)))
    with serving(spec, context.run_dir) as server:
        yield server.grpo_fields
