"""TRL's ``GRPOConfig`` fields and the kinds of value each takes, read from a snapshot (``grpo_fields.json``).

``trainer.args`` passes fields straight to ``GRPOConfig(**kwargs)`` on the compute node; a misspelt or ill-typed
one must fail on the login node instead, in one line, where importing trl (and so torch) is not allowed. The
snapshot is made from the installed TRL by ``python -m grpo_sweep.config.grpo_fields --write`` and a test holds it
equal to TRL's dataclass, so a TRL upgrade that adds or changes a field fails that test, not a queued job.
"""

from __future__ import annotations

import difflib
import json
import math
import re
import types
import typing
from enum import Enum
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, NamedTuple

SNAPSHOT = Path(__file__).with_name("grpo_fields.json")
KINDS = ("bool", "int", "float", "str", "list", "dict", "none", "any")
# Fields Unsloth's GRPOConfig adds to TRL's (unsloth/models/rl.py, 2026.10.9): accepted with backend=unsloth only.
UNSLOTH_FIELDS = {
    "vllm_sampling_params": ["any"],
    "unsloth_num_chunks": ["int", "none"],
    "unsloth_logit_chunk_multiplier": ["int", "none"],
    "unsloth_grpo_mini_batch": ["int", "none"],
    "max_seq_length": ["int", "none"],
}

# OptimizerConfig fields that are GRPOConfig fields of the same name.
OPTIMIZER_FIELDS = (
    "optim",
    "learning_rate",
    "adam_beta1",
    "adam_beta2",
    "weight_decay",
    "warmup_steps",
    "lr_scheduler_type",
    "max_grad_norm",
)
# TrainerConfig fields that are GRPOConfig fields of the same name.
TRAINER_FIELDS = (
    "num_generations",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "steps_per_generation",
    "max_completion_length",
    "max_steps",
    "save_steps",
    "beta",
    "loss_type",
    "temperature",
    "top_p",
    "logging_steps",
    "seed",
    "mask_truncated_completions",
    "gradient_checkpointing",
    "use_vllm",
    "vllm_mode",
    "vllm_gpu_memory_utilization",
    "disable_tqdm",
)
# GRPOConfig fields a run sets itself, and where to set them instead.
SET_BY_RUN = {
    "output_dir": "checkpoints go to the run directory's checkpoints/, where a resumed run finds them",
    "reward_weights": "set each weight as reward_mix.<name>.weight",
    "bf16": "set trainer.bf16",
    "deepspeed": "choose distributed=zero2 (its distributed.deepspeed holds the DeepSpeed config)",
    "ddp_timeout": "set distributed.timeout_s",
}
# GRPOConfig fields that would split the weights across a run's processes: rank 0 evaluates and saves the whole model
# alone (run/distributed.py), which it would not have
NOT_OFFERED = {
    name: "FSDP splits the weights across the processes, and rank 0 evaluates and saves the whole model alone; use "
    "distributed=ddp or zero2"
    for name in ("fsdp", "fsdp_config")
}


class Domain(NamedTuple):
    """The values a numeric GRPOConfig field can work with: from ``low`` to ``high`` (None: unbounded), each end
    included (``[`` / ``]``) or not (``(`` / ``)``), and what the field is, for the message."""

    low: float | None
    high: float | None = None
    ends: str = "[]"
    what: str = ""

    def holds(self, value: float) -> bool:
        low_ok = self.low is None or (value >= self.low if self.ends[0] == "[" else value > self.low)
        high_ok = self.high is None or (value <= self.high if self.ends[1] == "]" else value < self.high)
        return low_ok and high_ok

    def text(self) -> str:
        if self.high is None:
            return f"must be {'>=' if self.ends[0] == '[' else '>'} {self.low:g}"
        if self.low is None:
            return f"must be {'<=' if self.ends[1] == ']' else '<'} {self.high:g}"
        return f"must be in {self.ends[0]}{self.low:g}, {self.high:g}{self.ends[1]}"


def _count(what: str) -> Domain:
    return Domain(1, what=what)


# GRPOConfig's fields whose values have a domain, as TRL, transformers and torch use them: a value outside it passes
# GRPOConfig(**kwargs) (whose __post_init__ checks only the batch arithmetic) and crashes at the first step or
# silently trains something else (a negative clip range, a negative grad-norm bound that flips the gradient).
# torch's optimizer checks: lr >= 0 (0 trains nothing here), eps >= 0, betas in [0, 1), weight_decay >= 0.
DOMAINS: dict[str, Domain] = {
    "per_device_train_batch_size": _count("completions a process takes a micro-batch"),
    "per_device_eval_batch_size": _count("completions a process takes an evaluation batch"),
    "gradient_accumulation_steps": _count("micro-batches an optimizer step"),
    "steps_per_generation": _count("micro-batches a generation"),
    "generation_batch_size": _count("completions a generation"),
    "num_generations_eval": _count("completions a prompt in TRL's evaluation"),
    "num_iterations": _count("optimizer passes over a generation"),
    "max_completion_length": _count("tokens a completion"),
    "max_steps": Domain(0, ends="(]"),
    "save_steps": Domain(0, ends="(]", what="steps between checkpoints, or a ratio of max_steps"),
    "logging_steps": Domain(0, ends="(]", what="steps between logged rows, or a ratio of max_steps"),
    "eval_steps": Domain(0, ends="(]", what="steps between evaluations, or a ratio of max_steps"),
    "eval_accumulation_steps": _count("evaluation steps"),
    "torch_empty_cache_steps": _count("steps between emptying the CUDA cache"),
    "ref_model_sync_steps": _count("steps between reference-model syncs"),
    "pad_to_multiple_of": _count("tokens"),
    "dataloader_num_workers": Domain(0, what="0: load in the training process"),
    "dataloader_prefetch_factor": _count("batches each worker loads ahead"),
    "learning_rate": Domain(0, ends="(]"),
    "adam_beta1": Domain(0, 1, "[)", "Adam's first-moment decay"),
    "adam_beta2": Domain(0, 1, "[)", "Adam's second-moment decay"),
    "adam_epsilon": Domain(0, what="Adam's denominator term"),
    "weight_decay": Domain(0),
    "max_grad_norm": Domain(0, what="0: no clipping; a negative bound flips the gradient"),
    "warmup_steps": Domain(0, what="steps, or a ratio of max_steps below 1"),
    "beta": Domain(0, what="the KL coefficient; 0: no reference model"),
    "epsilon": Domain(0, what="the lower clipping range of the ratio"),
    "epsilon_high": Domain(0, what="the upper clipping range of the ratio"),
    "delta": Domain(0, ends="(]", what="the two-sided clipping bound"),
    "temperature": Domain(0, ends="(]", what="the sampling temperature; it divides the logits"),
    "top_p": Domain(0, 1, "(]", what="the nucleus' probability mass; 1: off"),
    "top_k": Domain(0, what="0: off"),
    "min_p": Domain(0, 1, what="a share of the likeliest token's probability"),
    "repetition_penalty": Domain(0, ends="(]", what="1: off"),
    "top_entropy_quantile": Domain(0, 1, what="the share of tokens kept by entropy"),
    "ref_model_mixup_alpha": Domain(0, 1),
    "sapo_temperature_neg": Domain(0, ends="(]", what="a temperature"),
    "sapo_temperature_pos": Domain(0, ends="(]", what="a temperature"),
    "off_policy_mask_threshold": Domain(0, ends="(]"),
    "vllm_importance_sampling_clip_min": Domain(0),
    "vllm_importance_sampling_clip_max": Domain(0, ends="(]"),
    "vllm_gpu_memory_utilization": Domain(0, 1, "(]", "a share of the GPU's memory"),
    "vllm_tensor_parallel_size": _count("GPUs"),
    "vllm_max_model_length": _count("tokens"),
    "vllm_server_timeout": Domain(0, ends="(]", what="seconds"),
    "vllm_server_port": Domain(1, 65535, what="a TCP port"),
    "vllm_group_port": Domain(1, 65535, what="a TCP port"),
    "label_smoothing_factor": Domain(0, 1),
    "neftune_noise_alpha": Domain(0),
}


# Fields that multiply (or divide) the float32/bf16 numbers a step computes: beyond these bounds the product overflows
# (inf, then nan: a loss and grad norm of 0, and the run "finishes") or vanishes (no step changes anything), whatever
# the field's DOMAINS allow. (low, high, why); a value of 0 stays DOMAINS' to judge.
SCALES: dict[str, tuple[float, float, str]] = {
    "learning_rate": (
        1e-9,
        1.0,
        "Adam moves each weight by about the learning rate a step: above 1 the weights overflow to inf/nan, below "
        "1e-9 a step is under float32's resolution of a weight",
    ),
    "beta": (1e-6, 1e6, "it multiplies the KL term; 0 turns it off"),
    "temperature": (1e-6, 1e6, "it divides the logits"),
}


def scale_error(where: str, value: float, low: float, high: float, why: str) -> str | None:
    """The one line for a nonzero multiplier ``value`` (set as ``where``) outside ``[low, high]``; None inside."""
    if value == 0 or low <= abs(value) <= high:
        return None
    return f"{where}={value:g}: a nonzero value must be in [{low:g}, {high:g}] ({why})"


def kinds_of(annotation: Any) -> list[str]:
    """The kinds of config value (`KINDS`) a field's type annotation accepts: ``int | None`` -> int, none."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return sorted({kind for arg in typing.get_args(annotation) for kind in kinds_of(arg)}, key=KINDS.index)
    if origin is typing.Literal:
        return sorted({kinds_of(type(value))[0] for value in typing.get_args(annotation)}, key=KINDS.index)
    if annotation is type(None) or annotation is None:
        return ["none"]
    base = origin or annotation
    if isinstance(base, type):
        if issubclass(base, Enum):
            return ["str"]  # TRL's enums take their string values (`lr_scheduler_type: cosine`)
        for kind, types_ in (
            ("bool", bool),
            ("int", int),
            ("float", float),
            ("str", str),
            ("list", (list, tuple)),
            ("dict", dict),
        ):
            if issubclass(base, types_):
                return [kind]
    return ["any"]  # a class of its own (accelerate's ParallelismConfig): not given from YAML, not checked


def from_trl() -> dict:
    """The snapshot of the installed TRL's ``GRPOConfig`` (imports trl: for the script and the test)."""
    import dataclasses

    import trl
    from trl import GRPOConfig

    hints = typing.get_type_hints(GRPOConfig)
    fields = {f.name: kinds_of(hints[f.name]) for f in dataclasses.fields(GRPOConfig) if f.init}
    # An annotation can say less than the field takes: scale_rewards is `str`, yet its docstring says "`str` or
    # `bool`" and __post_init__ maps True/False to "group"/"none". The docstring's kinds are added.
    for match in re.finditer(r"^\s+(\w+) \(([^)]*)\):", GRPOConfig.__doc__ or "", re.M):
        if match.group(1) in fields:
            named = re.findall(r"`(bool|int|float|str)\b", match.group(2).split("*optional*")[0])
            fields[match.group(1)] = sorted({*fields[match.group(1)], *named}, key=KINDS.index)
    return {"trl": trl.__version__, "fields": dict(sorted(fields.items()))}


@lru_cache(maxsize=1)
def snapshot() -> dict:
    return json.loads(SNAPSHOT.read_text())


def _where_set(name: str, where: str) -> str:
    if name in TRAINER_FIELDS:
        return f"trainer.{name}"
    return f"optimizer.{name}" if name in OPTIMIZER_FIELDS else f"{where}.{name}"


def dumps(made: dict) -> str:
    """The snapshot's text: a field a line, so a TRL upgrade's diff reads field by field."""
    lines = ",\n".join(f"  {json.dumps(name)}: {json.dumps(kinds)}" for name, kinds in made["fields"].items())
    return f'{{"trl": {json.dumps(made["trl"])}, "fields": {{\n{lines}\n}}}}\n'


def value_kind(value: Any) -> str:
    if value is None:
        return "none"
    for kind, types_ in (
        ("bool", bool),
        ("int", int),
        ("float", float),
        ("str", str),
        ("list", (list, tuple)),
        ("dict", Mapping),
    ):
        if isinstance(value, types_):
            return kind
    return "any"


def check_args(args: Mapping[str, Any], backend: str, where: str = "trainer.args") -> None:
    """Raise a one-line ValueError for the first field of ``args`` GRPOConfig does not have, or whose value is of a
    kind the field does not take (an int is a float too; a bool is not an int)."""
    known = dict(snapshot()["fields"])
    if backend == "unsloth":
        known.update(UNSLOTH_FIELDS)
    for name, value in args.items():
        if name in NOT_OFFERED:
            raise ValueError(f"{where}.{name}: {NOT_OFFERED[name]}")
        if name in SET_BY_RUN or name in TRAINER_FIELDS or name in OPTIMIZER_FIELDS:
            instead = SET_BY_RUN.get(name) or (
                f"set trainer.{name}" if name in TRAINER_FIELDS else f"set optimizer.{name}"
            )
            raise ValueError(f"{where}.{name} is set by grpo-sweep from its own config: {instead}")
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"; did you mean {_where_set(close[0], where)}?" if close else ""
            raise ValueError(f"{where}.{name}: TRL {snapshot()['trl']}'s GRPOConfig has no such field{hint}")
        accepted, kind = known[name], value_kind(value)
        if "any" in accepted or kind in accepted or (kind == "int" and "float" in accepted):
            check_value(name, value, f"{where}.{name}")
            continue
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
        raise ValueError(f"{where}.{name}={shown}: GRPOConfig's {name} takes {' or '.join(accepted)}, not {kind}")


def check_value(name: str, value: Any, where: str) -> None:
    """A one-line ValueError when ``value`` of GRPOConfig's field ``name`` (set as ``where``) is a number it cannot
    work with: not finite (any float field), or outside the field's ``DOMAINS`` entry."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    if not math.isfinite(value):
        raise ValueError(f"{where}={value}: must be a finite number")
    domain = DOMAINS.get(name)
    if domain is not None and not domain.holds(value):
        raise ValueError(f"{where}={value}: {domain.text()}" + (f" ({domain.what})" if domain.what else ""))
    if name in SCALES:
        error = scale_error(where, value, *SCALES[name])
        if error:
            raise ValueError(error)


def check_values(values: Mapping[str, Any], where: str) -> None:
    """``check_value`` for each GRPOConfig field of ``values`` (a config group's values, set as ``where.<name>``)."""
    for name, value in values.items():
        check_value(name, value, f"{where}.{name}")


if __name__ == "__main__":
    import sys

    made = from_trl()
    if "--write" in sys.argv:
        SNAPSHOT.write_text(dumps(made))
        print(f"wrote {SNAPSHOT}: {len(made['fields'])} fields of trl {made['trl']}'s GRPOConfig")
    else:
        print(json.dumps(made, indent=1))
