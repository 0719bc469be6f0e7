"""A run whose config changes at given steps: ``trainer.phases``, each ``{from_step: N, set: {dotted.key: value}}``,
the values set from that step on (on top of the earlier phases'). A PBT's best member replays this way as one plain
run: each round's learning rate, seed and every other moved value from the round's first step, as its rounds ran.

A phase is trained as a PBT round is: the run pauses at the phase's last step with its checkpoint
(``trainer.pause_at_step``), and goes on from that checkpoint with the next phase's config, so what a round can
change is what a phase can (``FIXED``: what a checkpoint holds cannot). A run killed part-way goes on from its last
checkpoint in the phase that holds it. No torch here: the gate checks phases on the launching machine.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf, read_write

from ..config.show import first_line, shown


class PhaseError(ValueError):
    """A phase that cannot work; the message names it (validate reports it as the config's error)."""


# Values a run continued from its checkpoint cannot change: the checkpoint holds them, or the resumed trainer's state
# was counted in them. (prefix, why): the first prefix a key starts with answers; an empty why: it can change.
FIXED: tuple[tuple[str, str], ...] = (
    # the run sets the checkpoint's rates to the config's (train.LearningRateFromConfig)
    ("optimizer.learning_rate", ""),
    ("optimizer.max_grad_norm", ""),  # read at every step
    ("lora.", "the adapter's shape and targets are in the checkpoint"),
    ("model.", "the weights are the checkpoint's"),
    ("optimizer.", "the optimizer's and the scheduler's state (betas, weight decay, warm-up) is the checkpoint's"),
    (
        "trainer.num_generations",
        "the trainer's batch shape: a resumed run skips the data it has seen in batches of the shape it was saved with",
    ),
    ("trainer.per_device_train_batch_size", "the trainer's batch shape, which a resumed run's data order counts in"),
    ("trainer.gradient_accumulation_steps", "the trainer's batch shape, which a resumed run's data order counts in"),
    ("trainer.steps_per_generation", "the trainer's batch shape, which a resumed run's data order counts in"),
    ("trainer.max_steps", "a schedule's progress and the learning rate's decay count to it"),
    ("trainer.pause_at_step", "it says where the run stops, not how it trains"),
    ("trainer.phases", "phases do not nest"),
    ("trainer.save_steps", "each phase's last checkpoint is what the next one goes on from"),
    ("trainer.eval.", "the evaluations must measure the whole run alike"),
    ("data.", "the data a run trains on is the same from its first step to its last"),
    ("backend.", "the backend is the run's, not a training value"),
    ("distributed.", "the processes are the run's, not a training value"),
    ("logger.", "the logger is the run's, not a training value"),
)


# what the one line of a refused phase key says a phase may set instead
MAY_SET = (
    "a phase may set single values a checkpoint does not hold, such as optimizer.learning_rate, trainer.beta, "
    "trainer.temperature, trainer.seed or reward_mix.<name>.weight"
)


def why_fixed(key: str) -> str | None:
    """Why a run continued from its checkpoint cannot change ``key``; None where it can. A whole group (``model``,
    ``trainer``) cannot change where anything in it cannot."""
    for prefix, why in FIXED:
        if key == prefix.rstrip(".") or key.startswith(prefix):
            return why or None
    inside = next((prefix.rstrip(".") for prefix, why in FIXED if why and prefix.startswith(f"{key}.")), None)
    return f"it is a group holding {inside}" if inside else None


def phases_of(cfg: Any) -> list[dict]:
    """``trainer.phases`` as plain dicts (none: [])."""
    raw = OmegaConf.select(cfg, "trainer.phases", default=None) if OmegaConf.is_config(cfg) else None
    if raw is None:
        return []
    return OmegaConf.to_container(raw, resolve=True) if OmegaConf.is_config(raw) else list(raw)


def check_phases(cfg: Any) -> None:
    """Each phase's ``from_step`` inside the run and after the one before, and each key it sets a config key that a
    continued run can change; one-line PhaseError naming the bad value."""
    phases = phases_of(cfg)
    if not isinstance(phases, list):
        raise PhaseError(f"trainer.phases={phases!r}: give a list of {{from_step: N, set: {{key: value}}}}")
    before = 0
    for i, phase in enumerate(phases):
        where = f"trainer.phases[{i}]"
        if not isinstance(phase, dict) or set(phase) != {"from_step", "set"}:
            raise PhaseError(f"{where}={phase!r}: give {{from_step: N, set: {{key: value}}}}")
        step = phase["from_step"]
        if isinstance(step, bool) or not isinstance(step, int) or not before < step < cfg.trainer.max_steps:
            raise PhaseError(
                f"{where}.from_step={step!r}: must be a step after {before} and before "
                f"trainer.max_steps={cfg.trainer.max_steps}"
            )
        before = step
        if not isinstance(phase["set"], dict) or not phase["set"]:
            raise PhaseError(f"{where}.set={phase['set']!r}: give the values the phase sets, {{key: value}}")
        for key, value in phase["set"].items():
            why = why_fixed(str(key))
            if why:
                raise PhaseError(f"{where}.set.{key}: a run cannot change {key} from a step on ({why}); {MAY_SET}")
            node = OmegaConf.select(cfg, str(key), default=_ABSENT)
            if node is _ABSENT:
                raise PhaseError(f"{where}.set.{key}: not a config key of this run")
            if OmegaConf.is_config(node) or isinstance(value, (dict, list)):
                raise PhaseError(f"{where}.set.{key}: {key} is not a single value; {MAY_SET}")
            probe = copy.deepcopy(cfg)
            try:  # the schema's type: each phase's config is built so (phase_configs)
                with read_write(probe):
                    OmegaConf.update(probe, str(key), value, merge=False)
            except Exception as exc:  # noqa: BLE001 - OmegaConf's ValidationError and its kin: one line naming it
                raise PhaseError(f"{where}.set.{key}={shown(value)}: {first_line(exc)}") from None


_ABSENT = object()


def phase_configs(cfg: Any) -> list[Any]:
    """Each phase's config, the run's own first: the phases' values up to it set, without phases (what each phase
    trains, and what its checkpoints are recorded with)."""
    base = _without_phases(cfg, None)
    out = [base]
    for phase in phases_of(cfg):
        base = copy.deepcopy(base)
        with read_write(base):
            for key, value in phase["set"].items():
                OmegaConf.update(base, str(key), value, merge=False)
        out.append(base)
    return out


def _without_phases(cfg: Any, pause: int | None) -> Any:
    out = copy.deepcopy(cfg)
    with read_write(out):
        out.trainer.phases = []
        out.trainer.pause_at_step = pause
    return out


def _bounds(cfg: Any) -> tuple[list[int], list[int]]:
    starts = [0, *(p["from_step"] for p in phases_of(cfg))]
    return starts, [*starts[1:], cfg.trainer.max_steps]


def config_at(cfg: Any, step: int) -> Any:
    """The config that trained up to ``step`` (a checkpoint's): the phase that ends at it or holds it."""
    starts, ends = _bounds(cfg)
    configs = phase_configs(cfg)
    return configs[next((j for j in range(len(configs)) if starts[j] < step <= ends[j]), 0)]


def check_resumable(run_dir: Path, cfg: Any) -> None:
    """``resume.check_same_run`` for a run with phases too: its last checkpoint against the phase that saved it,
    or, for a checkpoint at a phase's last step, the next phase's, which ``run_phases`` records as the directory's
    config before it trains: a kill inside that phase before its first checkpoint leaves that record."""
    from .resume import ResumeError, check_same_run, last_checkpoint

    if not phases_of(cfg):
        check_same_run(run_dir, cfg)
        return
    found = last_checkpoint(run_dir)
    step = found[1] if found else 0
    starts, _ = _bounds(cfg)
    configs = phase_configs(cfg)
    try:
        check_same_run(run_dir, config_at(cfg, step))
    except ResumeError as saved_by:
        if step not in starts[1:]:
            raise
        try:
            check_same_run(run_dir, configs[starts.index(step)])
        except ResumeError:
            raise saved_by from None


def run_phases(cfg: Any, run_dir: Path, train: Callable[[Any], Any], main: bool = True) -> Any:
    """Train ``cfg``'s phases in order with ``train`` (one run's training, which resumes from the run directory's
    last checkpoint), each paused at its last step; returns the last record. A run started before (a kill) goes on
    in the phase that holds its last checkpoint, once that checkpoint is found to be of this run's phase (as a plain
    resume is checked). ``trainer.pause_at_step`` still pauses the whole run there. ``main``: this process writes
    the run's files (rank 0); the others train each phase alongside it."""
    from .resume import last_checkpoint, remember_config

    configs = phase_configs(cfg)
    starts, ends = _bounds(cfg)
    stop = cfg.trainer.pause_at_step or cfg.trainer.max_steps
    found = last_checkpoint(run_dir)
    summary = None
    for config, start, end in zip(configs, starts, ends):
        done = found[1] if found else 0
        if done >= end or start >= stop:
            continue
        pause = min(end, stop)
        phase = _without_phases(config, None if pause == cfg.trainer.max_steps else pause)
        if found is not None and main:
            check_resumable(run_dir, cfg)
            remember_config(run_dir, phase)  # what the next phase trains with is this directory's config now
        summary = train(phase)
        if pause == stop or (summary is not None and summary.status != "paused"):
            return summary
        found = last_checkpoint(run_dir)
    return summary
