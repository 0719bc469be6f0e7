"""A sequence-classification reward model as a reward term: ``reward_mix.<name>.model=<local dir or hub id>``.

TRL takes a model id in ``reward_funcs`` itself, but then logs it under the model's name and tokenises by its own
rules outside our guard; this callable scores the same way TRL's ``GRPOTrainer._calculate_rewards`` does for a
reward model (trl 1.14: the prompt and completion through the reward tokenizer's chat template when the prompts are
conversational, else the two strings joined; right padding, no special tokens added; ``logits[:, 0]``), so the term
is logged as ``rewards/<name>/mean``, guarded, timed and given a weight like any other.

Checking a term (``check_options``) reads files only: the launching machine imports neither torch nor transformers
and loads no model. The model is loaded on the reward's first call, on the chosen device, in eval mode.
"""
from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any, Mapping

from ..config.checks import DTYPES  # the policy's (model.dtype)
from . import RewardError
from .args import whole_number

# model_args a reward model takes, with their defaults
OPTIONS: dict[str, Any] = {"tokenizer": None, "batch_size": 8, "device": "auto", "dtype": "auto", "max_length": None}
# auto: the training device; or a device torch names (cuda:1, cpu, mps, ...)
DEVICE = re.compile(r"^(auto|cpu|mps|(cuda|xpu|npu|hpu)(:\d+)?)$")
HUB_ID = re.compile(r"^[\w.-]+(/[\w.-]+)?$")


def is_local(name: str) -> bool:
    """A path, not a hub id: it exists, or it is written as a path (a hub id is ``name`` or ``org/name``)."""
    return Path(name).expanduser().exists() or name.startswith(("/", "./", "../", "~")) or name.count("/") > 1


def hub_sources(name: str, model: str, args: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(config key, hub id) for the model and tokenizer a term names that are not on this machine."""
    sources = [(f"reward_mix.{name}.model", model)]
    if args.get("tokenizer"):
        sources.append((f"reward_mix.{name}.model_args.tokenizer", str(args["tokenizer"])))
    return [(key, source) for key, source in sources if not is_local(source)]


def check_options(name: str, model: Any, args: Mapping[str, Any]) -> dict:
    """The term's options with their defaults filled in; a one-line RewardError naming the term's bad key and value.

    A local model must be a directory with a ``config.json`` of a sequence-classification model with one label
    (its score); a hub id is fetched and checked by the gate like the policy's (sweeps/hub.py)."""
    key = f"reward_mix.{name}.model"
    if not isinstance(model, str) or not model.strip():
        raise RewardError(f"{key}={model!r}: give a local directory or a hub id (org/name) of a reward model")
    unknown = [option for option in args if option not in OPTIONS]
    if unknown:
        raise RewardError(f"reward_mix.{name}.model_args.{unknown[0]}: unknown option; a reward model takes "
                          f"{', '.join(OPTIONS)}")
    options = {**OPTIONS, **args}
    where = f"reward_mix.{name}.model_args"
    whole_number(f"{where}.batch_size", options["batch_size"], 1)
    whole_number(f"{where}.max_length", options["max_length"], 2, null="no truncation")
    if options["dtype"] not in DTYPES:
        raise RewardError(f"{where}.dtype={options['dtype']!r}; use one of: {', '.join(DTYPES)}")
    if not isinstance(options["device"], str) or not DEVICE.match(options["device"]):
        raise RewardError(f"{where}.device={options['device']!r}; use auto (the training device), cpu, cuda, "
                          "cuda:<index> or another torch device")
    tokenizer = options["tokenizer"]
    if tokenizer is not None and (not isinstance(tokenizer, str) or not tokenizer.strip()):
        raise RewardError(f"{where}.tokenizer={tokenizer!r}: give a local directory or a hub id, or null (the model's)")
    _check_source(key, model, model=True)
    if tokenizer is not None:
        _check_source(f"{where}.tokenizer", tokenizer, model=False)
    return options


def _check_source(key: str, source: str, model: bool) -> None:
    if not is_local(source):
        if not HUB_ID.match(source):
            raise RewardError(f"{key}={source!r} is neither a path on this machine nor a hub id (org/name)")
        return
    path = Path(source).expanduser()
    if not path.is_dir():
        raise RewardError(f"{key}={source!r}: no such directory")
    if not model:
        return
    check_config_file(key, source, path / "config.json")


def check_config_file(key: str, source: str, config_file: Path) -> None:
    """That ``config_file`` (of the model ``source`` that ``key`` names) is a reward model's: a one-line RewardError
    otherwise. Also run on a hub model's cached copy once the gate has fetched it."""
    try:
        config = json.loads(Path(config_file).read_text())
    except FileNotFoundError:
        raise RewardError(f"{key}={source!r} has no config.json: give a directory saved by save_pretrained") from None
    except (OSError, ValueError) as exc:
        raise RewardError(f"{key}={source!r}: its config.json cannot be read ({type(exc).__name__})") from None
    architectures = config.get("architectures") or []
    if architectures and not any(a.endswith("ForSequenceClassification") for a in architectures):
        # loaded anyway, transformers would give it a new, random score head: a reward of noise
        raise RewardError(f"{key}={source!r} is a {architectures[0]}, not a sequence-classification reward model "
                          "(*ForSequenceClassification)")
    labels = len(config["id2label"]) if isinstance(config.get("id2label"), Mapping) else config.get("num_labels", 1)
    if labels != 1:
        raise RewardError(f"{key}={source!r} has {labels} labels; a reward model gives one score (num_labels=1)")


class RewardModel:
    """Scores (prompt, completion) pairs with a sequence-classification model, ``batch_size`` pairs a forward.

    Loaded on the first call; ``device="auto"`` puts it where the policy trains (the current CUDA device when there
    is one, else the CPU)."""

    def __init__(self, model: str, tokenizer: str | None = None, batch_size: int = 8, device: str = "auto",
                 dtype: str = "auto", max_length: int | None = None, term: str = "<name>"):
        self.term, self.source, self.tokenizer_source = term, model, tokenizer or model
        self.batch_size, self.device_name, self.dtype_name, self.max_length = batch_size, device, dtype, max_length
        self.model = self.tokenizer = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"RewardModel({self.source!r})"

    def device(self):
        import torch

        if self.device_name != "auto":
            device = torch.device(self.device_name)
            count = torch.cuda.device_count() if torch.cuda.is_available() else 0
            if device.type == "cuda" and (device.index or 0) >= count:
                raise RewardError(f"reward_mix.{self.term}.model_args.device={self.device_name!r}: this machine has "
                                  f"{count} GPU(s); use auto (the training device), cpu or one of them")
            return device
        if torch.cuda.is_available():
            return torch.device("cuda", torch.cuda.current_device())  # each process of a multi-GPU run: its own
        return torch.device("cpu")

    def dtype(self, device):
        import torch

        if self.dtype_name == "auto":  # the policy's rule (model.dtype=auto)
            cuda_bf16 = device.type == "cuda" and torch.cuda.is_bf16_supported()
            return torch.bfloat16 if cuda_bf16 else torch.float32
        return getattr(torch, self.dtype_name)

    def load(self) -> None:
        with self._lock:
            if self.model is not None:
                return
            from transformers import AutoModelForSequenceClassification, AutoTokenizer

            device = self.device()
            tokenizer = AutoTokenizer.from_pretrained(self.tokenizer_source)
            if tokenizer.pad_token is None:
                tokenizer.pad_token = tokenizer.eos_token
            model = AutoModelForSequenceClassification.from_pretrained(self.source, dtype=self.dtype(device))
            # the score is read at the last token that is not padding: the model must know the tokenizer's pad (TRL)
            model.config.get_text_config().pad_token_id = tokenizer.pad_token_id
            tokenizer.truncation_side = "left"  # with max_length: the score sits at the last token, keep the end
            self.tokenizer, self.model = tokenizer, model.to(device).eval().requires_grad_(False)

    def texts(self, prompts: list, completions: list) -> list[str]:
        """What the model reads, as TRL writes it for a reward model."""
        from trl.data_utils import apply_chat_template, is_conversational

        if is_conversational({"prompt": prompts[0]}):
            if not self.tokenizer.chat_template:
                raise RewardError(f"the reward model's tokenizer ({self.tokenizer_source}) has no chat template, but "
                                  "the prompts are conversational; give one that has with model_args.tokenizer")
            return [apply_chat_template({"messages": p + c}, self.tokenizer)["text"] for p, c in zip(prompts, completions)]
        return [p + c for p, c in zip(prompts, completions)]

    def score(self, texts: list[str]) -> list[float]:
        import torch

        self.load()
        truncate = {"truncation": True, "max_length": self.max_length} if self.max_length else {}
        scores: list[float] = []
        with torch.inference_mode():
            for start in range(0, len(texts), self.batch_size):
                batch = self.tokenizer(texts[start:start + self.batch_size], return_tensors="pt", padding=True,
                                       padding_side="right", add_special_tokens=False, **truncate)
                logits = self.model(**batch.to(self.model.device)).logits
                scores.extend(logits[:, 0].float().tolist())
        return scores

    def __call__(self, prompts: list, completions: list, **kwargs) -> list[float]:
        if not completions:
            return []
        self.load()  # texts() needs the tokenizer's chat template
        return self.score(self.texts(prompts, completions))

