"""TRL internals grpo-sweep reads or sets (trl 1.14): the trainer's buffer of the latest generation batch, and its
reward weights.

``GRPOTrainer._logs`` holds what ``log_completions`` prints: ``prompt``, ``completion`` (lists), ``rewards``
(name -> values) and ``advantages``. TRL has no public handle on it; the W&B completions table reads it here.

``GRPOTrainer.reward_weights`` is the float32 tensor (one weight a reward function) that every scoring step
multiplies the rewards by, whatever ``multi_objective_aggregation`` and ``scale_rewards`` are, and that the logged
``reward`` is weighted by; TRL reads it there each time (no copy is kept), and offers no setter. A scheduled mix
(rewards/schedule.py) sets it in place before each step.

``GRPOTrainer.vllm_generation`` (trl/generation/vllm_generation.py, a ``VLLMGeneration``) is the trainer's vLLM:
``mode`` "colocate" (its ``llm``, a vLLM ``LLM``) or "server" (its ``vllm_client``, on the main process only);
``sync_weights()`` pushes the model's current weights (a LoRA merged) and resets the prefix cache; with
``enable_sleep_mode`` the LLM sleeps between generations and ``_llm_weights_sleeping`` tells its own ``generate``
to push the weights again. An evaluation generates through it (``vllm_completion_ids``).
"""

from __future__ import annotations

from typing import Any

LATEST_BATCH_KEYS = ("prompt", "completion", "rewards", "advantages")


def latest_completions(trainer: Any) -> dict | None:
    """The trainer's latest generation batch (keys ``LATEST_BATCH_KEYS``), or None before the first one."""
    logs = getattr(trainer, "_logs", None)
    if not logs or not logs.get("prompt"):
        return None
    return logs


def set_reward_weights(trainer: Any, weights: list[float]) -> None:
    """Set the weights the trainer's next scoring uses (in the order of its reward functions), in place."""
    current = trainer.reward_weights
    if len(current) != len(weights):
        raise ValueError(f"{len(weights)} reward weights for the trainer's {len(current)} reward functions")
    for i, weight in enumerate(weights):
        current[i] = float(weight)


def trainer_vllm(trainer: Any) -> Any | None:
    """The trainer's vLLM handle (``VLLMGeneration``), None when it generates with transformers."""
    return getattr(trainer, "vllm_generation", None) if getattr(trainer, "use_vllm", False) else None


def vllm_completion_ids(
    handle: Any, prompt_ids: list[list[int]], sampling_params: dict, client_params: dict, seed: int | None
) -> list[list[int]]:
    """One completion's token ids per prompt from the trainer's vLLM, on the model's weights as they are now: the
    engine holds those of the last training generation (or, after a restore, none the evaluation means)."""
    handle.sync_weights()
    if handle.mode == "server":
        # the server is vLLM's OpenAI completions endpoint: it builds SamplingParams from these fields alone
        out = handle.vllm_client.generate(
            prompts=prompt_ids, **client_params, generation_kwargs={"seed": seed} if seed is not None else None
        )
        return [list(ids) for ids in out["completion_ids"]]
    from vllm import SamplingParams

    llm = handle.llm
    sleeps = bool(getattr(handle, "enable_sleep_mode", False))
    if sleeps:
        llm.wake_up(tags=["kv_cache"])
    try:
        outputs = llm.generate(
            [{"prompt_token_ids": ids} for ids in prompt_ids],
            sampling_params=SamplingParams(**sampling_params),
            use_tqdm=False,
        )
    finally:
        if sleeps:  # as TRL's own generate leaves it, so its next one pushes the weights again
            llm.sleep(level=2)
            handle._llm_weights_sleeping = True
    return [list(output.outputs[0].token_ids) for output in outputs]
