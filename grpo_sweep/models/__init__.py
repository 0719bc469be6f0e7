"""The tiny model built locally: the random build (``tiny``), its optional warm start (``warm``), and the warm-started
model shipped with the package (``prebuilt/``).

The warm start is chaotic under float rounding: another CPU type (or another kernel) builds a different model from
the same recipe, and GRPO then starts somewhere else. So the package ships the main job's warm-started model as a
file with its sha256, and every machine starts from bit-identical weights; building it yourself stays an option
(``model.tiny.prebuilt=false``). A run uses the shipped model whenever it is what the run's own build would be in all
that matters (``shipped_warm_start``: the recipe, the system prompt, and none of its held-out questions shown), on
any data; otherwise it builds, saying why.

The tiny model knows single-digit ``a op b`` arithmetic and nothing else: on other data it scores 0, which the gate
says once per launch (``warn_tiny_on_other_data``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any, NamedTuple

from ..config.checks import DTYPES, ConfigError
from ..rewards.reward_model import architectures_of, check_tokenizer, check_weights, is_local, model_config
from .tiny import TinySpec, base_settings, ensure_tiny_model, tiny_model_path

log = logging.getLogger(__name__)

PREBUILT = Path(__file__).parent / "prebuilt"
PREBUILT_RECORD = "build.json"


# heads that are not a language model's: AutoModelForCausalLM would load such a model with a new, random LM head
NOT_GENERATIVE = ("ForSequenceClassification", "ForTokenClassification", "ForQuestionAnswering", "ForMultipleChoice")

TINY_ON_OTHER_DATA = (
    "grpo-sweep: warning: the tiny model knows only single-digit arithmetic (`6 * 3`): expect accuracy 0 on other "
    "data (here data.path={path!r}); it is for trying the workflow; use a hub model to get an answer "
    "(experiment=cpu_qwen0_5b on a CPU, model=qwen2_5_0_5b_instruct on a GPU)"
)
# set once a launch warned: the jobs it starts (pool and Optuna workers, submitted jobs) inherit this process's
# environment and do not warn again
WARNED_ENV = "GRPO_SWEEP_WARNED_TINY"


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


def warn_tiny_on_other_data(cfg: Any) -> None:
    """Once per launch (the gate calls it for every run it plans): a run of the tiny model on data other than the
    built-in arithmetic task, where it can only score 0, says so on stderr before anything runs."""
    if cfg.model.tiny is None or cfg.data.source == "arithmetic" or os.environ.get(WARNED_ENV):
        return
    os.environ[WARNED_ENV] = "1"
    print(TINY_ON_OTHER_DATA.format(path=cfg.data.path), file=sys.stderr, flush=True)


def check_local_model(key: str, source: str) -> None:
    """A local policy directory as from_pretrained would read it: a causal LM's config.json, its weights whole, a
    tokenizer (a hub id's copy is fetched and loaded on the machine that trains)."""
    path = Path(source).expanduser()
    if not path.is_dir():
        raise ConfigError(
            f"{key}={source!r}: no such directory (a local model is a directory saved by save_pretrained)"
        )
    if (path / "adapter_config.json").is_file() and not (path / "config.json").is_file():
        return  # a PEFT adapter: its base model is named inside and loaded from there
    architectures = architectures_of(key, source, model_config(key, source, path, ConfigError), ConfigError)
    if architectures and all(a.endswith(NOT_GENERATIVE) for a in architectures):
        raise ConfigError(
            f"{key}={source!r} is a {architectures[0]}, not a causal language model (*ForCausalLM): "
            "loaded as the policy it would get a new, random LM head"
        )
    check_weights(key, source, path, ConfigError)
    check_tokenizer(key, source, path, ConfigError, "save the tokenizer beside the model (tokenizer.save_pretrained)")


def ensure_model(spec: TinySpec, system_prompt: str = "", held_out: tuple[str, ...] = ()) -> Path:
    """The model directory for ``spec``: the shipped warm start when it fits (``shipped_warm_start``) and
    ``spec.prebuilt``; otherwise the cached random build, or with ``spec.warm_start.steps`` > 0 that model after its
    warm start (``models/warm.py``: chat turns with ``system_prompt``, never one of the ``held_out`` questions);
    each built once, safely when runs race."""
    if not spec.warm_start.steps:
        return ensure_tiny_model(spec)
    why = "model.tiny.prebuilt=false"
    if spec.prebuilt:
        shipped, why = shipped_warm_start(spec, system_prompt, held_out)
        if shipped is not None:
            return shipped
    from .warm import WarmTask, ensure_warm_model

    return ensure_warm_model(ensure_tiny_model(spec), spec, WarmTask(system_prompt, tuple(held_out)), why)


def warm_name(spec: TinySpec, system_prompt: str, held_out: tuple[str, ...]) -> str:
    """The cache name of the warm start ``spec`` asks for: a hash of everything that makes it (recipe, base model,
    system prompt, the held-out questions a worked example could ask)."""
    from .warm import WarmTask, warm_model_path

    return warm_model_path(tiny_model_path(spec), spec.warm_start, WarmTask(system_prompt, tuple(held_out))).name


def made_from(spec: TinySpec, system_prompt: str, held_out: tuple[str, ...]) -> dict[str, Any]:
    """What a warm start is made from, as the shipped build's record keeps it (``build.json``'s ``made_from``): the
    recipe (``recipe``), the system prompt and the questions its worked examples show."""
    from .warm import WarmTask, shown_questions

    return {
        **recipe(spec),
        "system_prompt": system_prompt,
        "shown": shown_questions(spec.warm_start.max_operand, WarmTask(system_prompt, tuple(held_out))),
    }


def recipe(spec: TinySpec) -> dict[str, Any]:
    """The warm start's code version, the random model it starts from (its cache name and settings) and its recipe."""
    from .warm import WARM_VERSION

    return {
        "warm_version": WARM_VERSION,
        "base": tiny_model_path(spec).name,
        "tiny": base_settings(spec),
        "warm_start": asdict(spec.warm_start),
    }


class Shipped(NamedTuple):
    """The shipped warm start's directory when a run may start from it, else None and why not (one line)."""

    path: Path | None
    why_not: str = ""


def shipped_warm_start(spec: TinySpec, system_prompt: str, held_out: tuple[str, ...], root: Path = PREBUILT) -> Shipped:
    """The shipped model when it is what this run's warm start would be: made by the same recipe from the same
    random model with the same system prompt, its worked examples showing none of ``held_out`` (the warm start's
    one rule: no held-out question is ever seen in chat; held-out questions of other data are never among them).
    Its weights must hash to the sha256 its record names: a damaged or edited file is refused, not trained from."""
    try:
        record = json.loads((root / PREBUILT_RECORD).read_text())
    except (OSError, ValueError) as exc:
        return Shipped(
            None, f"the shipped warm start's record {root / PREBUILT_RECORD} cannot be read ({type(exc).__name__})"
        )
    why_not = differs_from(record.get("made_from") or {}, spec, system_prompt, held_out)
    if why_not:
        return Shipped(None, why_not)
    found = weights_sha256(root)
    if found != record.get("sha256"):
        raise RuntimeError(
            f"the shipped tiny model in {root} hashes to {found}, not {record.get('sha256')} as "
            f"{PREBUILT_RECORD} says; reinstall grpo-sweep or set model.tiny.prebuilt=false to build it"
        )
    return Shipped(root)


def differs_from(shipped: dict[str, Any], spec: TinySpec, system_prompt: str, held_out: tuple[str, ...]) -> str:
    """What keeps this run from the warm start ``shipped`` was made from (``made_from``), in one line naming the
    keys that differ and the shipped values; empty when nothing does."""
    this = recipe(spec)
    if shipped.get("warm_version") != this["warm_version"]:
        return (
            f"this grpo-sweep's warm start (version {this['warm_version']}) is not the shipped build's "
            f"(version {shipped.get('warm_version')})"
        )
    settings = [
        (f"model.tiny.{k}" if k != "max_position_embeddings" else "model.max_seq_length", v, shipped["tiny"].get(k))
        for k, v in this["tiny"].items()
        if v != shipped["tiny"].get(k)
    ]
    settings += [
        (f"model.tiny.warm_start.{k}", v, shipped["warm_start"].get(k))
        for k, v in this["warm_start"].items()
        if v != shipped["warm_start"].get(k)
    ]
    if settings:
        keys, values, were = zip(*settings)
        return (
            f"{', '.join(f'{k}={v}' for k, v in zip(keys, values))} differ{'s' if len(keys) == 1 else ''} from "
            f"the shipped warm start's ({', '.join(map(str, were))})"
        )
    if this["base"] != shipped.get("base"):
        return "this grpo-sweep builds the random tiny model differently from the shipped warm start's"
    if system_prompt != shipped.get("system_prompt"):
        return "data.system_prompt differs from the shipped warm start's"
    shown = set(shipped.get("shown", ()))
    seen = [q for q in dict.fromkeys(held_out) if q in shown]
    if seen:
        return (
            f"{len(seen)} of this run's {len(set(held_out))} held-out questions ({seen[0]!r}, ...) were worked "
            "examples in the shipped warm start, which holds out data=arithmetic's default validation and test "
            "questions"
        )
    return ""


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
