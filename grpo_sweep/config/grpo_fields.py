"""TRL's ``GRPOConfig`` fields and the kinds of value each takes, read from a snapshot (``grpo_fields.json``).

``trainer.args`` passes fields straight to ``GRPOConfig(**kwargs)`` on the compute node; a misspelt or ill-typed
one must fail on the login node instead, in one line, where importing trl (and so torch) is not allowed. The
snapshot is made from the installed TRL by ``python -m grpo_sweep.config.grpo_fields --write`` and a test holds it
equal to TRL's dataclass, so a TRL upgrade that adds or changes a field fails that test, not a queued job.
"""
from __future__ import annotations

import difflib
import json
import re
import types
import typing
from enum import Enum
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

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
        for kind, types_ in (("bool", bool), ("int", int), ("float", float), ("str", str), ("list", (list, tuple)),
                             ("dict", dict)):
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
    for kind, types_ in (("bool", bool), ("int", int), ("float", float), ("str", str), ("list", (list, tuple)),
                         ("dict", Mapping)):
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
            instead = SET_BY_RUN.get(name) or (f"set trainer.{name}" if name in TRAINER_FIELDS else f"set optimizer.{name}")
            raise ValueError(f"{where}.{name} is set by grpo-sweep from its own config: {instead}")
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"; did you mean {_where_set(close[0], where)}?" if close else ""
            raise ValueError(f"{where}.{name}: TRL {snapshot()['trl']}'s GRPOConfig has no such field{hint}")
        accepted, kind = known[name], value_kind(value)
        if "any" in accepted or kind in accepted or (kind == "int" and "float" in accepted):
            continue
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
        raise ValueError(f"{where}.{name}={shown}: GRPOConfig's {name} takes {' or '.join(accepted)}, not {kind}")


if __name__ == "__main__":
    import sys

    made = from_trl()
    if "--write" in sys.argv:
        SNAPSHOT.write_text(dumps(made))
        print(f"wrote {SNAPSHOT}: {len(made['fields'])} fields of trl {made['trl']}'s GRPOConfig")
    else:
        print(json.dumps(made, indent=1))
