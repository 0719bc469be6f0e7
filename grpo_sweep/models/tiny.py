"""A tiny random-initialised Llama and a byte-level BPE tokenizer, built locally (no hub) and cached.

Tests and the CPU main job train this for real. The answer-format tags are single, *non-special* tokens:
TRL decodes completions with ``skip_special_tokens=True``, which would silently delete special ones.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

log = logging.getLogger(__name__)

# Bump when the build changes in a way that must invalidate cached models.
BUILD_VERSION = 4

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIAL_TOKENS = ["<|pad|>", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TAG_TOKENS = ["<think>", "</think>", "<answer>", "</answer>", "<reasoning>", "</reasoning>"]
# the byte-level pre-tokenizer's alphabet: every byte one token
BYTE_ALPHABET = 256


@dataclass
class WarmStartSpec:
    """The warm start's recipe (``warm.py``; each field is config/schema.WarmStartConfig's, meant as it says). The
    defaults are this API's: off (``steps=0``: the random model). The main job's recipe is conf/model/tiny.yaml's."""

    steps: int = 0
    learning_rate: float = 6e-3
    decay_steps: int = 0
    batch_size: int = 128
    max_operand: int = 9
    restate_fraction: float = 0.6
    chat_fraction: float = 0.4
    teacher_slip: float = 0.6
    seed: int = 0


@dataclass
class TinySpec:
    """What the tiny model is built from: ``model.tiny``'s fields (config/schema.TinyModelConfig says what each means)
    plus the context length. ``TinySpec()`` is this API's default, the random tiny model (no warm start) that tests
    and tools build without a config; a run's spec is ``from_config`` of its composed config (conf/model/tiny.yaml)."""

    hidden_size: int = 64
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    intermediate_size: int = 128
    # 10x Llama's default, so a LoRA adapter can move the outputs of a random model
    initializer_range: float = 0.2
    bpe_merges: int = 512
    seed: int = 0
    warm_start: WarmStartSpec = field(default_factory=WarmStartSpec)
    prebuilt: bool = True
    max_position_embeddings: int = 512

    @classmethod
    def from_config(cls, tiny: Mapping[str, Any], max_position_embeddings: int) -> TinySpec:
        """From ``model.tiny`` (a dict or DictConfig); a key it lacks keeps this class's default."""
        from omegaconf import DictConfig, OmegaConf

        if isinstance(tiny, DictConfig):
            tiny = OmegaConf.to_container(tiny, resolve=True)
        values = dict(tiny)
        if isinstance(values.get("warm_start"), Mapping):
            values["warm_start"] = WarmStartSpec(**values["warm_start"])
        return cls(**values, max_position_embeddings=max_position_embeddings)

    def shape(self) -> dict[str, Any]:
        """The config.json values that size the model (the builder's LlamaConfig takes them; the gate's memory plan
        reads them before anything is built). ``vocab_size`` is the tokenizer's at most: bytes, the special tokens,
        the BPE merges asked for and the tags (a corpus may give fewer merges; the builder counts its own)."""
        return dict(
            vocab_size=BYTE_ALPHABET + len(SPECIAL_TOKENS) + self.bpe_merges + len(TAG_TOKENS),
            hidden_size=self.hidden_size,
            num_hidden_layers=self.num_hidden_layers,
            num_attention_heads=self.num_attention_heads,
            num_key_value_heads=self.num_attention_heads,
            intermediate_size=self.intermediate_size,
            tie_word_embeddings=True,
        )


def cache_root() -> Path:
    return Path(os.environ.get("GRPO_SWEEP_CACHE", Path.home() / ".cache" / "grpo_sweep"))


def _key(spec: TinySpec) -> str:
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:12]


def base_settings(spec: TinySpec) -> dict[str, Any]:
    """What the random model is built from: ``spec`` without its warm start (which is built from the random model)
    and without ``prebuilt`` (which says where a warm start comes from)."""
    return {k: v for k, v in asdict(spec).items() if k not in ("warm_start", "prebuilt")}


def tiny_model_path(spec: TinySpec) -> Path:
    """The random model's directory, keyed on ``base_settings``."""
    return cache_root() / f"tiny-llama-{_key({'v': BUILD_VERSION, **base_settings(spec)})}"


def ensure_tiny_model(spec: TinySpec) -> Path:
    """The cached random model directory for ``spec``, built on first use (safe when runs race to build it); its
    warm start is ``models.ensure_model``'s business."""
    return build_cached(tiny_model_path(spec), lambda staging: _build(spec, staging))


def build_cached(path: Path, build: Callable[[Path], None]) -> Path:
    """``path``, made by ``build(staging_dir)`` unless it is there. Runs that need it at once (a pool's first runs,
    a SLURM array sharing a cache) build it once: the others wait on a lock beside it, then load it. The finished
    directory is renamed into place in one step, so a killed builder, or one on a filesystem whose locks do not
    hold, never leaves a half-written model where a run would load it."""
    if (path / "config.json").exists():
        return path
    from filelock import FileLock, Timeout

    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(f"{path}.lock")
    try:
        lock.acquire(timeout=0)
    except Timeout:
        log.info("waiting for another run to finish building %s", path)
        lock.acquire()
    try:
        if (path / "config.json").exists():
            return path
        staging = Path(tempfile.mkdtemp(prefix=path.name + ".", dir=path.parent))
        try:
            build(staging)
            try:
                os.rename(staging, path)  # atomic; fails if another process finished first
            except OSError:
                if not (path / "config.json").exists():
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    finally:
        lock.release()
    return path


def _corpus(seed: int, n: int = 3000) -> list[str]:
    """Text like the prompts and answers the model will see, so BPE merges are useful."""
    from grpo_sweep.data.arithmetic import random_expression

    rng = random.Random(seed)
    words = (
        "Respond in the following format think answer What is the result of Calculate the value "
        "The sum of and is which we multiply by to get so first then step result equals"
    ).split()
    lines = []
    for _ in range(n):
        expression, value = random_expression(rng, 2, 3, 9)
        reasoning = " ".join(rng.choice(words) for _ in range(rng.randint(3, 10)))
        lines.append(f"What is {expression}?")
        lines.append(f"<think>\n{reasoning} {expression} = {value}\n</think>\n<answer>\n{value}\n</answer>")
    return lines


def _build(spec: TinySpec, out: Path) -> None:
    import torch
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    # Digits one token each, as in Qwen2.5's and Llama 3's tokenizers: a number is then the same tokens wherever it
    # stands (`18` after a space, a newline or a tag), so copying it is a copy. With merges, ` 7` in a question and
    # `7` after a newline were different tokens, and the tiny model copied operands and answers wrongly.
    bpe.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    bpe.decoder = decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    bpe.train_from_iterator(
        _corpus(spec.seed),
        trainers.BpeTrainer(
            vocab_size=len(alphabet) + len(SPECIAL_TOKENS) + spec.bpe_merges,
            special_tokens=SPECIAL_TOKENS,
            initial_alphabet=alphabet,
            show_progress=False,
        ),
    )
    bpe.add_tokens([AddedToken(t, normalized=False, special=False) for t in TAG_TOKENS])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|pad|>",
        unk_token=None,
        padding_side="left",
        chat_template=CHAT_TEMPLATE,
    )

    config = LlamaConfig(
        **{**spec.shape(), "vocab_size": len(tokenizer)},
        max_position_embeddings=spec.max_position_embeddings,
        initializer_range=spec.initializer_range,
        bos_token_id=None,  # the chat template opens every turn itself
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    with torch.random.fork_rng():  # the run that builds it then trains from its own seed, as later runs do
        torch.manual_seed(spec.seed)
        model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
