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
from ..config.show import shown
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
    (its score); a hub id is fetched and checked by the gate like the policy's (launching/hub.py)."""
    key = f"reward_mix.{name}.model"
    if not isinstance(model, str) or not model.strip():
        raise RewardError(f"{key}={model!r}: give a local directory or a hub id (org/name) of a reward model")
    unknown = [option for option in args if option not in OPTIONS]
    if unknown:
        raise RewardError(
            f"reward_mix.{name}.model_args.{unknown[0]}: unknown option; a reward model takes {', '.join(OPTIONS)}"
        )
    options = {**OPTIONS, **args}
    where = f"reward_mix.{name}.model_args"
    whole_number(f"{where}.batch_size", options["batch_size"], 1)
    whole_number(f"{where}.max_length", options["max_length"], 2, null="no truncation")
    if options["dtype"] not in DTYPES:
        raise RewardError(f"{where}.dtype={options['dtype']!r}; use one of: {', '.join(DTYPES)}")
    if not isinstance(options["device"], str) or not DEVICE.match(options["device"]):
        raise RewardError(
            f"{where}.device={options['device']!r}; use auto (the training device), cpu, cuda, "
            "cuda:<index> or another torch device"
        )
    tokenizer = options["tokenizer"]
    if tokenizer is not None and (not isinstance(tokenizer, str) or not tokenizer.strip()):
        raise RewardError(f"{where}.tokenizer={tokenizer!r}: give a local directory or a hub id, or null (the model's)")
    _check_source(key, model, model=True, own_tokenizer=tokenizer is None)
    if tokenizer is not None:
        _check_source(f"{where}.tokenizer", tokenizer, model=False)
    return options


def _check_source(key: str, source: str, model: bool, own_tokenizer: bool = True) -> None:
    """A local model (or tokenizer) directory's files; a hub id's form (the gate fetches and checks it later)."""
    if not is_local(source):
        if not HUB_ID.match(source):
            raise RewardError(f"{key}={source!r} is neither a path on this machine nor a hub id (org/name)")
        return
    path = Path(source).expanduser()
    if not path.is_dir():
        raise RewardError(f"{key}={source!r}: no such directory")
    if model:
        check_config_file(key, source, path / "config.json")
    if own_tokenizer:
        fix = (
            "save the tokenizer beside the model, or name one with its model_args.tokenizer"
            if model
            else "give a directory a tokenizer was saved to (save_pretrained)"
        )
        check_tokenizer(key, source, path, RewardError, fix)


def check_config_file(key: str, source: str, config_file: Path) -> None:
    """That ``config_file`` (of the model ``source`` that ``key`` names) is a reward model's, its weights beside it: a
    one-line RewardError otherwise. Also run on a hub model's cached copy once the gate has fetched it."""
    directory = Path(config_file).parent
    config = model_config(key, source, directory, RewardError)
    architectures = architectures_of(key, source, config, RewardError)
    if not architectures:
        raise RewardError(
            f"{key}={source!r}: its config.json names no architectures, so it may get a new, random "
            "score head; a reward model is a *ForSequenceClassification saved by save_pretrained (or "
            'add its "architectures")'
        )
    if not any(a.endswith("ForSequenceClassification") for a in architectures):
        # loaded anyway, transformers would give it a new, random score head: a reward of noise
        raise RewardError(
            f"{key}={source!r} is a {architectures[0]}, not a sequence-classification reward model "
            "(*ForSequenceClassification)"
        )
    id2label, labels = config.get("id2label"), config.get("num_labels", 1)
    if id2label is not None and not isinstance(id2label, Mapping):
        raise RewardError(f"{key}={source!r}: its config.json's id2label is {shown(id2label)}, not a mapping")
    labels = len(id2label) if isinstance(id2label, Mapping) else labels
    if labels != 1:
        raise RewardError(f"{key}={source!r} has {shown(labels)} labels; a reward model gives one score (num_labels=1)")
    check_weights(key, source, directory, RewardError)


# --- a saved model's directory, read as transformers would read it, from the files alone (policy and reward models)

# what from_pretrained loads into PyTorch: one file, or the index of its shards
WEIGHTS = ("model.safetensors", "pytorch_model.bin")
INDEX = ".index.json"
# the safetensors library refuses larger headers
SAFETENSORS_MAX_HEADER = 100_000_000
# AutoTokenizer finds a tokenizer by either
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


def read_json_object(path: Path, what: str, error: type[Exception]) -> dict:
    """The JSON object in ``path`` (``what``: how messages name it); ``error`` (one line) when it is not one."""
    try:
        value = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise error(f"{what} cannot be read ({exc.strerror or type(exc).__name__})") from None
    except UnicodeDecodeError as exc:
        raise error(f"{what} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})") from None
    except (ValueError, RecursionError) as exc:  # not JSON, nested too deep
        detail = (
            f"{exc.msg} at line {exc.lineno} column {exc.colno}"
            if isinstance(exc, json.JSONDecodeError)
            else type(exc).__name__
        )
        raise error(f"{what} is not JSON ({detail})") from None
    if not isinstance(value, dict):
        raise error(f"{what} is {shown(value)}, not a JSON object")
    return value


def model_config(key: str, source: str, directory: Path, error: type[Exception]) -> dict:
    """A saved model's config.json as a mapping; ``error`` naming ``key`` when it is missing or malformed."""
    try:
        return read_json_object(Path(directory) / "config.json", f"{key}={source!r}: its config.json", error)
    except FileNotFoundError:
        raise error(f"{key}={source!r} has no config.json: give a directory saved by save_pretrained") from None


def architectures_of(key: str, source: str, config: Mapping, error: type[Exception]) -> list[str]:
    """The model classes config.json names (``[]``: none)."""
    architectures = config.get("architectures") or []
    if not isinstance(architectures, list) or not all(isinstance(a, str) for a in architectures):
        raise error(
            f"{key}={source!r}: its config.json's architectures is {shown(architectures)}, not a list of class names"
        )
    return architectures


def check_weights(key: str, source: str, directory: Path, error: type[Exception]) -> None:
    """That ``directory`` holds weights from_pretrained loads, whole: model.safetensors, pytorch_model.bin, or the
    index of sharded ones with every shard it names (a safetensors file's header is read for its length, so a copy
    cut short is caught here, not when the model loads)."""
    directory = Path(directory)
    found = [directory / name for name in WEIGHTS if (directory / name).is_file()]
    for name in WEIGHTS:
        index = directory / (name + INDEX)
        if not found and index.is_file():
            weight_map = read_json_object(index, f"{key}={source!r}: its {index.name}", error).get("weight_map")
            if not isinstance(weight_map, Mapping) or not weight_map:
                raise error(f"{key}={source!r}: its {index.name} has no weight_map naming its shards")
            shards = sorted({str(v) for v in weight_map.values()})
            missing = [shard for shard in shards if not (directory / shard).is_file()]
            if missing:
                raise error(
                    f"{key}={source!r}: its {index.name} names {len(missing)} shard(s) that are not there "
                    f"({missing[0]}, ...): copy the whole directory"
                )
            found = [directory / shard for shard in shards]
    if not found:
        raise error(
            f"{key}={source!r} has a config.json but no weights ({', '.join(WEIGHTS)}, or a sharded "
            f"*{INDEX}): give a directory saved by save_pretrained, whole"
        )
    for file in found:
        problem = (
            _safetensors_problem(file)
            if file.suffix == ".safetensors"
            else ("is empty" if file.stat().st_size == 0 else None)
        )
        if problem:
            raise error(f"{key}={source!r}: its {file.name} {problem}: copy or save it again")


def _safetensors_problem(file: Path) -> str | None:
    """What is wrong with a safetensors file's frame (an 8-byte header length, a JSON header, the data it
    describes), or None; the tensors themselves are not read."""
    size = file.stat().st_size
    with file.open("rb") as f:
        head = f.read(8)
        length = int.from_bytes(head, "little") if len(head) == 8 else -1
        if not 0 < length <= min(size - 8, SAFETENSORS_MAX_HEADER):
            return f"is not a safetensors file or is cut short ({size} bytes)"
        try:
            header = json.loads(f.read(length))
            end = max((int(t["data_offsets"][1]) for k, t in header.items() if k != "__metadata__"), default=0)
        except (ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError):
            return "has no readable safetensors header"
    if 8 + length + end > size:
        return f"is cut short ({size} bytes, its header describes {8 + length + end})"
    return None


def check_tokenizer(key: str, source: str, directory: Path, error: type[Exception], fix: str) -> None:
    """That ``directory`` holds a tokenizer AutoTokenizer can find, its tokenizer_config.json (if any) a JSON object;
    ``fix``: what the message suggests instead."""
    directory = Path(directory)
    if not any((directory / name).is_file() for name in TOKENIZER_FILES):
        raise error(f"{key}={source!r} has no tokenizer ({' or '.join(TOKENIZER_FILES)}): {fix}")
    if (directory / "tokenizer_config.json").is_file():
        read_json_object(directory / "tokenizer_config.json", f"{key}={source!r}: its tokenizer_config.json", error)


class RewardModel:
    """Scores (prompt, completion) pairs with a sequence-classification model, ``batch_size`` pairs a forward.

    Loaded on the first call; ``device="auto"`` puts it where the policy trains (the current CUDA device when there
    is one, else the CPU)."""

    def __init__(
        self,
        model: str,
        tokenizer: str | None = None,
        batch_size: int = 8,
        device: str = "auto",
        dtype: str = "auto",
        max_length: int | None = None,
        term: str = "<name>",
    ):
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
                raise RewardError(
                    f"reward_mix.{self.term}.model_args.device={self.device_name!r}: this machine has "
                    f"{count} GPU(s); use auto (the training device), cpu or one of them"
                )
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
                raise RewardError(
                    f"the reward model's tokenizer ({self.tokenizer_source}) has no chat template, but "
                    "the prompts are conversational; give one that has with model_args.tokenizer"
                )
            return [
                apply_chat_template({"messages": p + c}, self.tokenizer)["text"] for p, c in zip(prompts, completions)
            ]
        return [p + c for p, c in zip(prompts, completions)]

    def score(self, texts: list[str]) -> list[float]:
        import torch

        self.load()
        truncate = {"truncation": True, "max_length": self.max_length} if self.max_length else {}
        scores: list[float] = []
        with torch.inference_mode():
            for start in range(0, len(texts), self.batch_size):
                batch = self.tokenizer(
                    texts[start : start + self.batch_size],
                    return_tensors="pt",
                    padding=True,
                    padding_side="right",
                    add_special_tokens=False,
                    **truncate,
                )
                logits = self.model(**batch.to(self.model.device)).logits
                scores.extend(logits[:, 0].float().tolist())
        return scores

    def __call__(self, prompts: list, completions: list, **kwargs) -> list[float]:
        if not completions:
            return []
        self.load()  # texts() needs the tokenizer's chat template
        return self.score(self.texts(prompts, completions))
