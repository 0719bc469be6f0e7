"""Ask a trained run a question: ``python -m grpo_sweep.run.generate <run_dir> "Calculate pi."``.

Loads the run's saved adapter (or model) on its base model, applies the chat template with the run's
system prompt, samples (temperature 0.8, top_p 0.95 — the walkthrough's last step) and prints the answer.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m grpo_sweep.run.generate", description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, help="a run directory (holds .hydra/config.yaml and lora/ or model/)")
    parser.add_argument("question", help="the user message")
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument("--top-p", type=float, default=0.95)
    parser.add_argument("--max-new-tokens", type=int, default=None, help="default: the run's max_completion_length")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument(
        "--best",
        action="store_true",
        help="the adapter of the run's best held-out evaluation (summary.json's best.adapter), not the last",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    config_path = args.run_dir / ".hydra" / "config.yaml"
    if not config_path.is_file():
        print(f"error: {args.run_dir} is not a run directory (no .hydra/config.yaml)", file=sys.stderr)
        return 2
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(config_path)

    from ..backends import get_backend
    from ..backends.decoding import Decoding

    backend = get_backend(cfg.backend.name)  # before torch/transformers: unsloth must come first
    import torch

    if args.seed is not None:
        torch.manual_seed(args.seed)
    weights_dir = args.run_dir
    if args.best:
        from .results import read_run_summary

        summary, _ = read_run_summary(args.run_dir)
        adapter = ((summary.best if summary is not None else None) or {}).get("adapter")
        if not adapter:
            print(
                f"error: {args.run_dir} has no best adapter (summary.json has no best.adapter; did the run finish?)",
                file=sys.stderr,
            )
            return 2
        weights_dir = (args.run_dir / adapter).parent  # best/lora -> best/, lora -> the run dir
    try:
        model, tokenizer = backend.load_trained(cfg, weights_dir)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    messages = [{"role": "user", "content": args.question}]
    if cfg.data.system_prompt:
        messages.insert(0, {"role": "system", "content": cfg.data.system_prompt})
    # the run's decoding (top_k, min_p, repetition_penalty as it trained), the sampling this command is given, and
    # its seed for vLLM's sampler too (torch's seed above does not reach it)
    decoding = replace(
        Decoding.from_config(cfg, args.temperature),
        top_p=args.top_p,
        seed=args.seed,
        max_new_tokens=args.max_new_tokens or cfg.trainer.max_completion_length,
    )
    [answer] = backend.generate(model, tokenizer, [messages], decoding)
    print(answer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
