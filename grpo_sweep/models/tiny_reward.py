"""A tiny sequence-classification reward model with a score known in closed form, built locally (no hub).

``python -m grpo_sweep.models.tiny_reward <dir>`` saves it (with the tiny policy's tokenizer) for
``reward_mix.<name>.model=<dir>``; the tests train the tiny policy against it.

It is a ``LlamaForSequenceClassification`` (hidden 64, 2 layers, ``num_labels=1``) whose weights are set, not
learnt: with the queries and keys zero, attention is uniform over the tokens read so far, so the last token's
hidden state holds the fraction ``p`` of the text's tokens that are in ``tokens`` (default: the ten digits), and
the score is ``p / sqrt(1 + p**2)`` (the final RMSNorm's doing): it rises with every such token a completion adds,
which a policy can learn in a few GRPO steps.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .tiny import TinySpec, build_cached, cache_root, ensure_tiny_model

DIGITS = tuple("0123456789")
# bump when the build changes
BUILD_VERSION = 1


def score_of(p: float, eps: float = 1e-6) -> float:
    """The model's score for a text whose fraction ``p`` of tokens are the preferred ones (RMSNorm's eps included)."""
    mean_square = (1 + p * p) / 64
    return p / (mean_square + eps) ** 0.5 / 8


def build_reward_model(out: Path, tokens: tuple[str, ...] = DIGITS, spec: TinySpec | None = None) -> Path:
    """Save the reward model preferring ``tokens`` (each one token of the tiny tokenizer) to ``out``."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForSequenceClassification

    spec = spec or TinySpec()
    tokenizer = AutoTokenizer.from_pretrained(ensure_tiny_model(spec))
    ids = []
    for token in tokens:
        encoded = tokenizer(token, add_special_tokens=False)["input_ids"]
        if len(encoded) != 1:
            raise ValueError(f"{token!r} is {len(encoded)} tokens of the tiny tokenizer; give single tokens")
        ids.append(encoded[0])
    hidden = spec.hidden_size
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        num_hidden_layers=spec.num_hidden_layers,
        num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_attention_heads,
        intermediate_size=spec.intermediate_size,
        max_position_embeddings=spec.max_position_embeddings,
        rms_norm_eps=1e-6,
        num_labels=1,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    model = LlamaForSequenceClassification(config)
    with torch.no_grad():
        for param in model.parameters():
            param.zero_()
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.fill_(1.0)
        # every token's embedding is one-hot, in dim 0 (preferred) or dim 1 (any other): the same norm for all,
        # so input_layernorm scales each by sqrt(hidden)
        embed = model.model.embed_tokens.weight
        embed[:, 1] = 1.0
        embed[ids, 0], embed[ids, 1] = 1.0, 0.0
        attention = model.model.layers[0].self_attn
        attention.v_proj.weight[0, 0] = hidden**-0.5  # head 0's value: 1 for a preferred token, else 0
        attention.o_proj.weight[2, 0] = 1.0  # its mean over the text, p, into dim 2
        # the MLPs and the later layers add nothing (their output projections are zero)
        model.score.weight[0, 2] = hidden**-0.5  # the score reads dim 2 after the final norm
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return Path(out)


def ensure_reward_model(tokens: tuple[str, ...] = DIGITS) -> Path:
    """The reward model preferring ``tokens``, built once into the tiny models' cache (safe when runs race)."""
    import hashlib

    key = hashlib.sha256(repr((BUILD_VERSION, tuple(tokens))).encode()).hexdigest()[:12]
    return build_cached(cache_root() / f"tiny-reward-{key}", lambda staging: build_reward_model(staging, tokens))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="directory to save it to")
    parser.add_argument("--tokens", nargs="+", default=list(DIGITS), help="the tokens it prefers (default: digits)")
    args = parser.parse_args(argv)
    print(build_reward_model(args.out, tuple(args.tokens)))


if __name__ == "__main__":
    main()
