"""The tiny model built locally: the random build (``tiny``), its optional warm start (``warm``), and the warm-started
model shipped with the package (``prebuilt/``).

The warm start is chaotic under float rounding: another CPU type (or another kernel) builds a different model from
the same recipe, and GRPO then starts somewhere else. So the package ships the main job's warm-started model as a
file with its sha256, and every machine starts from bit-identical weights; building it yourself stays an option
(``model.tiny.prebuilt=false``, or any spec other than the shipped one).
"""
from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any

from ..config.checks import DTYPES, ConfigError
from ..rewards.reward_model import architectures_of, check_tokenizer, check_weights, is_local, model_config
from .tiny import TinySpec, ensure_tiny_model, tiny_model_path

log = logging.getLogger(__name__)

PREBUILT = Path(__file__).parent / "prebuilt"
PREBUILT_RECORD = "build.json"


# heads that are not a language model's: AutoModelForCausalLM would load such a model with a new, random LM head
NOT_GENERATIVE = ("ForSequenceClassification", "ForTokenClassification", "ForQuestionAnswering", "ForMultipleChoice")


def check_model(model_cfg: Any) -> None:
    """The model group: its dtype, a tiny model's warm start settings, and a local model directory's files, checked
    before any model loads (each would otherwise fail on the machine that trains, when it loads the model)."""
    if model_cfg.dtype not in DTYPES:
        raise ConfigError(f"model.dtype={model_cfg.dtype!r}; use one of: {', '.join(DTYPES)}")
    if model_cfg.tiny is not None:
        spec = TinySpec.from_config(model_cfg.tiny, model_cfg.max_seq_length)
        if spec.warm_start.steps:  # 0: the random build, no warm start
            from .warm import check

            check(spec.warm_start)
    elif isinstance(model_cfg.name_or_path, str) and is_local(model_cfg.name_or_path):
        check_local_model("model.name_or_path", model_cfg.name_or_path)


def check_local_model(key: str, source: str) -> None:
    """A local policy directory as from_pretrained would read it: a causal LM's config.json, its weights whole, a
    tokenizer (a hub id's copy is fetched and loaded on the machine that trains)."""
    path = Path(source).expanduser()
    if not path.is_dir():
        raise ConfigError(f"{key}={source!r}: no such directory (a local model is a directory saved by save_pretrained)")
    if (path / "adapter_config.json").is_file() and not (path / "config.json").is_file():
        return  # a PEFT adapter: its base model is named inside and loaded from there
    architectures = architectures_of(key, source, model_config(key, source, path, ConfigError), ConfigError)
    if architectures and all(a.endswith(NOT_GENERATIVE) for a in architectures):
        raise ConfigError(f"{key}={source!r} is a {architectures[0]}, not a causal language model (*ForCausalLM): "
                          "loaded as the policy it would get a new, random LM head")
    check_weights(key, source, path, ConfigError)
    check_tokenizer(key, source, path, ConfigError, "save the tokenizer beside the model (tokenizer.save_pretrained)")


def ensure_model(spec: TinySpec, system_prompt: str = "", held_out: tuple[str, ...] = ()) -> Path:
    """The model directory for ``spec``: the shipped warm start when ``spec`` (and the task) is the one it was
    built from and ``spec.prebuilt``; otherwise the cached random build, or with ``spec.warm_start.steps`` > 0 that
    model after its warm start (``models/warm.py``: chat turns with ``system_prompt``, never one of the
    ``held_out`` questions); each built once, safely when runs race."""
    if spec.warm_start.steps and spec.prebuilt:
        shipped = prebuilt_model(spec, system_prompt, held_out)
        if shipped is not None:
            return shipped
    base = ensure_tiny_model(spec)
    if not spec.warm_start.steps:
        return base
    from .warm import WarmTask, ensure_warm_model

    return ensure_warm_model(base, spec, WarmTask(system_prompt, tuple(held_out)))


def warm_name(spec: TinySpec, system_prompt: str, held_out: tuple[str, ...]) -> str:
    """The cache name of the warm start ``spec`` asks for: a hash of everything that makes it (recipe, base model,
    system prompt, the questions it must not show), so a shipped build is used only for exactly its recipe."""
    from .warm import WarmTask, warm_model_path

    return warm_model_path(tiny_model_path(spec), spec.warm_start, WarmTask(system_prompt, tuple(held_out))).name


def prebuilt_model(spec: TinySpec, system_prompt: str, held_out: tuple[str, ...], root: Path = PREBUILT) -> Path | None:
    """The shipped model directory when it was built from exactly this recipe, else None. Its weights must hash
    to the sha256 its record names: a damaged or edited file is refused, not trained from."""
    try:
        record = json.loads((root / PREBUILT_RECORD).read_text())
    except (OSError, ValueError):
        return None
    if record.get("name") != warm_name(spec, system_prompt, held_out):
        log.info("model.tiny differs from the shipped warm start's recipe: building it (cached in %s)", tiny_model_path(spec).parent)
        return None
    found = weights_sha256(root)
    if found != record.get("sha256"):
        raise RuntimeError(f"the shipped tiny model in {root} hashes to {found}, not {record.get('sha256')} as "
                           f"{PREBUILT_RECORD} says; reinstall grpo-sweep or set model.tiny.prebuilt=false to build it")
    return root


def weights_sha256(directory: str | Path) -> str | None:
    """sha256 of a local model directory's weights: of its one ``*.safetensors`` file (what ``sha256sum`` prints),
    or of the list of its files' hashes when it is sharded. None for a hub id or a directory without safetensors."""
    path = Path(directory)
    files = sorted(path.glob("*.safetensors")) if path.is_dir() else []
    if not files:
        return None
    digests = []
    for file in files:
        digest = hashlib.sha256()
        with file.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        digests.append(digest.hexdigest())
    if len(digests) == 1:
        return digests[0]
    return hashlib.sha256("".join(f"{d}  {f.name}\n" for d, f in zip(digests, files)).encode()).hexdigest()
