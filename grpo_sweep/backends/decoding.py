"""What one evaluation decodes with, stated whole, and the same settings in the form each engine takes.

transformers' ``generate`` fills every setting the call leaves unset from the model's own ``generation_config.json``
and then from its global defaults (transformers 5.17 ``generation/utils.py`` ``_prepare_generation_config``:
``top_k`` 50): Qwen2.5-Instruct ships ``repetition_penalty`` 1.05-1.1 and ``top_k`` 20, so an evaluation that passed
only ``do_sample``/``temperature``/``top_p`` was repetition-penalised and top-k truncated on HF and not on vLLM, and
neither matched training (TRL builds its own config from GRPOConfig). A ``Decoding`` names every setting that
changes which token is chosen; ``hf_generation_config`` hands HF nothing to fill in, ``sampling_params`` and
``client_params`` give vLLM the same values. The defaults are GRPOConfig's (a test holds them equal), and
``from_config`` reads the run's values where it sets them (``trainer.top_p``, ``trainer.args.top_k`` ...), so an
evaluation decodes the way the run trained. No torch at import: the plan shows a run's decoding on the login node.
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict, dataclass, replace
from typing import Any, Iterator

# GRPOConfig's defaults (trl 1.14.2) for the settings the config may leave out; min_p None there means off, 0.0 here.
TRL_DEFAULTS = {"top_k": 0, "min_p": 0.0, "repetition_penalty": 1.0}
# Token ids a model's generation config may hold that say where a completion ends, not how a token is chosen: kept.
TOKEN_FIELDS = ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id")


@dataclass(frozen=True)
class Decoding:
    """Greedy when ``temperature`` is 0; ``top_k`` 0, ``top_p`` 1, ``min_p`` 0 and ``repetition_penalty`` 1 are off."""

    max_new_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    seed: int | None = None

    @classmethod
    def from_config(cls, cfg: Any, temperature: float = 0.0) -> Decoding:
        """The run's decoding at ``temperature`` (0: its greedy evaluations; trainer.eval.temperature: its samples)."""
        args = cfg.trainer.args or {}
        min_p = args.get("min_p")
        return cls(
            max_new_tokens=int(cfg.trainer.eval.max_new_tokens or cfg.trainer.max_completion_length),
            temperature=float(temperature),
            top_p=float(cfg.trainer.top_p),
            top_k=int(args.get("top_k", TRL_DEFAULTS["top_k"]) or 0),
            min_p=float(TRL_DEFAULTS["min_p"] if min_p is None else min_p),
            repetition_penalty=float(args.get("repetition_penalty", TRL_DEFAULTS["repetition_penalty"])),
            seed=None if cfg.trainer.seed is None else int(cfg.trainer.seed),
        )

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0

    def at(self, temperature: float) -> Decoding:
        return replace(self, temperature=float(temperature))

    def record(self) -> dict:
        """What it decoded with, as written beside the outcomes: the sampling-only settings are null when greedy."""
        out = asdict(self)
        out["greedy"] = self.greedy
        if self.greedy:
            for name in ("temperature", "top_p", "top_k", "min_p", "seed"):
                out[name] = None
        return out

    def hf_kwargs(self) -> dict:
        """Every ``GenerationConfig`` field that picks a token, set (a None would be filled from the model's file)."""
        kwargs = dict(
            max_new_tokens=self.max_new_tokens,
            num_beams=1,
            repetition_penalty=self.repetition_penalty,
            no_repeat_ngram_size=0,
            length_penalty=1.0,
            do_sample=not self.greedy,
        )
        if not self.greedy:
            kwargs.update(temperature=self.temperature, top_p=self.top_p, top_k=self.top_k, typical_p=1.0)
            if self.min_p > 0:
                kwargs["min_p"] = self.min_p
        return kwargs

    def sampling_params(self) -> dict:
        """vLLM ``SamplingParams`` keyword arguments (vLLM uses the model's generation config only when none are
        given; here every one is). Greedy is temperature 0 with truncation off, as vLLM reads it."""
        return dict(
            n=1,
            max_tokens=self.max_new_tokens,
            temperature=0.0 if self.greedy else self.temperature,
            top_p=1.0 if self.greedy else self.top_p,
            top_k=0 if self.greedy else self.top_k,
            min_p=0.0 if self.greedy else self.min_p,
            repetition_penalty=self.repetition_penalty,
            presence_penalty=0.0,
            frequency_penalty=0.0,
            seed=None if self.greedy else self.seed,
        )

    def client_params(self) -> dict:
        """The same for TRL's ``VLLMClient.generate`` (its server builds SamplingParams from exactly these)."""
        params = self.sampling_params()
        return {
            name: params[name]
            for name in ("n", "max_tokens", "temperature", "top_p", "top_k", "min_p", "repetition_penalty")
        }


def hf_generation_config(decoding: Decoding, token_ids: dict):
    """A ``GenerationConfig`` with ``decoding``'s settings and the model's ``token_ids`` (``only_token_ids``)."""
    from transformers import GenerationConfig

    return GenerationConfig(**token_ids, **decoding.hf_kwargs())


@contextlib.contextmanager
def only_token_ids(model) -> Iterator[dict]:
    """While it lasts, the model's own generation config holds only its token ids (yielded): ``generate`` fills what
    a passed config leaves None from it (``min_p``, ``bad_words_ids``, ``suppress_tokens`` ...), so there is nothing
    left to fill. A PEFT model generates through its base model, whose config ``generate`` reads."""
    from transformers import GenerationConfig

    target = model.get_base_model() if hasattr(model, "get_base_model") else model
    original = getattr(target, "generation_config", None)
    tokens = {name: getattr(original, name) for name in TOKEN_FIELDS if getattr(original, name, None) is not None}
    if original is None:
        yield tokens
        return
    target.generation_config = GenerationConfig(**tokens)
    try:
        yield tokens
    finally:
        target.generation_config = original


@dataclass(frozen=True)
class Engine:
    """What generates a run's evaluations: ``hf`` (transformers ``generate`` on rank 0's model), ``vllm`` (the
    run's own vLLM engine: TRL's colocated LLM or the run's server, or Unsloth's ``fast_generate``); ``why`` says
    why, in the words of the config."""

    name: str
    why: str


def evaluation_engine(cfg: Any) -> Engine:
    """The engine a run evaluates with, from its config alone (the plan; the run does what this says).

    Evaluations run on rank 0 while the other ranks wait, so a vLLM engine is used where rank 0 can drive it alone:
    the run's server (only rank 0 talks to it in TRL 1.14.2), or a colocated LLM of its own (vLLM tensor parallel 1;
    with more, each LLM spans several ranks' GPUs and rank 0 alone would hang it)."""
    trainer = cfg.trainer
    if cfg.backend.name == "unsloth":
        if cfg.backend.get("fast_inference"):
            return Engine(
                "vllm",
                "backend=unsloth with backend.fast_inference: Unsloth's fast_generate, the run's LoRA as a request",
            )
        return Engine("hf", "backend=unsloth without backend.fast_inference: no vLLM engine")
    if not trainer.use_vllm:
        return Engine("hf", "trainer.use_vllm=false: no vLLM engine")
    if trainer.vllm_mode == "server":
        return Engine("vllm", "trainer.vllm_mode=server: the run's server, kept up through the final evaluation")
    tensor_parallel = int((trainer.args or {}).get("vllm_tensor_parallel_size", 1) or 1)
    if tensor_parallel > 1:
        return Engine(
            "hf",
            f"trainer.args.vllm_tensor_parallel_size={tensor_parallel}: a colocated LLM spans "
            f"{tensor_parallel} ranks and rank 0 evaluates alone",
        )
    return Engine("vllm", "trainer.vllm_mode=colocate: the trainer's own LLM, synced to the evaluated weights")
