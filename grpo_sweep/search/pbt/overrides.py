"""A member's command line for a round (its directory, seed, pause, values, reward weights as step schedules over
the whole run) and a whole lineage as one plain run's overrides (``trainer.phases``): the replay and the
head-to-head's schedule arm."""

from __future__ import annotations

from typing import Any, Sequence

from .members import MEMBERS_DIR
from .settings import Param, Settings


def _value(x: float) -> str:
    return repr(float(x))


def weight_schedule(history: Sequence[float], steps_per_round: int, max_steps: int) -> dict | None:
    """A weight's rounds so far (``history[k]``: its weight in round k) as a ``step`` schedule over the whole run:
    each round's weight from its first step, in the progress the trainer computes (``rewards.schedule.progress_of``),
    and the last one carried on into the next round (so a member's weight is a schedule, logged at every step,
    from round 0 on). None when the run has one round."""
    rounds = max_steps // steps_per_round
    if rounds < 2:
        return None
    knots = range(1, min(len(history), rounds - 1) + 1)
    return {
        "kind": "step",
        "at": [k * steps_per_round / (max_steps - 1) for k in knots],
        "values": [float(history[min(k, len(history) - 1)]) for k in knots],
    }


def member_overrides(
    member: int,
    history: Sequence[dict[str, float]],
    params: Sequence[Param],
    settings: Settings,
    base_seed: int,
    pause: bool = True,
) -> list[str]:
    """The overrides of ``member``'s run for the round ``len(history) - 1`` (``history``: its lineage's values,
    one dict a round): its directory, seed, learning rate, weights, and where it pauses (``pause`` False: it runs
    to the end, then the test split)."""
    round_ = len(history) - 1
    out = [
        f"hydra.sweep.subdir={MEMBERS_DIR}/{member}",
        f"trainer.seed={base_seed + member}",
        f"trainer.max_steps={settings.max_steps}",
        f"trainer.pause_at_step={(round_ + 1) * settings.steps_per_round if pause else 'null'}",
    ]
    return (
        out + [p.override(history[-1][p.key]) for p in params if p.term is None] + _weights(history, params, settings)
    )


def _weights(history: Sequence[dict[str, float]], params: Sequence[Param], settings: Settings) -> list[str]:
    """The lineage's reward weights: each its round-0 weight and a step schedule of the rounds so far."""
    out = []
    for p in params:
        if p.term is None:
            continue
        weights = [h[p.key] for h in history]
        out.append(p.override(weights[0]))
        schedule = weight_schedule(weights, settings.steps_per_round, settings.max_steps)
        if schedule:
            at = ",".join(map(_value, schedule["at"]))
            values = ",".join(map(_value, schedule["values"]))
            out.append(f"++reward_mix.{p.term}.schedule={{kind:step,at:[{at}],values:[{values}]}}")
    return out


def phases_value(phases: list[dict]) -> str:
    """``trainer.phases`` in Hydra's override grammar, on one line (dotted keys, numbers as Python writes them)."""

    def grammar(value: Any) -> str:
        if isinstance(value, dict):
            return "{" + ",".join(f"{k}:{grammar(v)}" for k, v in value.items()) + "}"
        if isinstance(value, list):
            return "[" + ",".join(grammar(v) for v in value) + "]"
        return repr(value)

    return grammar(phases)


def lineage_overrides(
    history: Sequence[dict[str, float]],
    params: Sequence[Param],
    settings: Settings,
    seeds: Sequence[int] | None = None,
    weights_inline: bool = True,
) -> list[str]:
    """A whole lineage (``history``: its values round by round) as one plain run's overrides: round 0's values,
    the weights as step schedules (``weights_inline``; else the mix comes from a file), and from each later round's
    first step that round's other values (``trainer.phases``), with ``seeds[r]`` as round r's seed when given."""
    moved = [p for p in params if p.term is None]
    out = [f"trainer.max_steps={settings.max_steps}", "trainer.pause_at_step=null"]
    if seeds is not None:
        out.append(f"trainer.seed={seeds[0]}")
    out += [p.override(history[0][p.key]) for p in moved]
    if weights_inline:
        out += _weights(history, params, settings)
    phases = [
        {
            "from_step": r * settings.steps_per_round,
            "set": {
                **{p.key: int(round(history[r][p.key])) if p.integer else float(history[r][p.key]) for p in moved},
                **({"trainer.seed": seeds[r]} if seeds is not None else {}),
            },
        }
        for r in range(1, len(history))
    ]
    if any(phase["set"] for phase in phases):
        out.append(f"trainer.phases={phases_value(phases)}")
    return out
