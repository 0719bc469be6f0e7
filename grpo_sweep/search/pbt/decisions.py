"""A PBT's decisions: the first population, the ranking (with the look's noise), who takes over whom after a
round, and the values a recipient goes on with (explore). Every draw is seeded by where it is made, so a decision
made again after a kill is the same decision. No torch here."""

from __future__ import annotations

import json
import math
import random
from dataclasses import asdict
from typing import Any, Callable, Mapping, Sequence

from ...reading.stats import standard_error
from .settings import Param, Settings


def _rng(seed: int, *where: Any) -> random.Random:
    return random.Random(":".join(map(str, ("pbt", seed, *where))))  # a str seed: the same draws in every process


def initial_population(params: Sequence[Param], settings: Settings) -> list[dict[str, float]]:
    """Each member's values for round 0, drawn in the ranges (log ranges on a log scale)."""
    rng = _rng(settings.seed, "init")
    return [{p.key: p.draw(rng) for p in params} for _ in range(settings.population)]


def start_row(name: str, settings: Settings, params: Sequence[Param], metric: str, base_seed: int) -> dict:
    """pbt.jsonl's first row: the settings, the ranges and the first population, as pbt.jsonl gives it back
    (tuples are lists there), so that a continued PBT's row compares equal to it."""
    row = {
        "event": "start",
        "name": name,
        "settings": settings.design(),
        "params": [asdict(p) for p in params],
        "metric": metric,
        "base_seed": int(base_seed),
        "population": initial_population(params, settings),
    }
    return json.loads(json.dumps(row))


def ranked(scores: Sequence[float | None], direction: str) -> list[int]:
    """Members best first; a member without a score (it failed) last; ties keep the lower member first."""
    sign = -1 if direction == "maximize" else 1
    return sorted(range(len(scores)), key=lambda m: (scores[m] is None, sign * (scores[m] or 0.0), m))


def ranking_gap(
    donor: float,
    recipient: float,
    donor_outcomes: Mapping[str, float | None] | None,
    recipient_outcomes: Mapping[str, float | None] | None,
    direction: str,
) -> tuple[float, float | None]:
    """The donor's lead over the recipient on the ranking look (positive: better, in ``direction``) and its
    standard error, paired by question as the sweep's verdicts pair runs: the standard deviation of the
    per-question differences over the square root of their number. None where a member has no per-question
    outcomes of the look (a metric that is not an accuracy) or fewer than two questions are judged for both."""
    sign = 1.0 if direction == "maximize" else -1.0
    gap = sign * (donor - recipient)
    if not donor_outcomes or not recipient_outcomes:
        return gap, None
    diffs = [
        sign * (donor_outcomes[q] - recipient_outcomes[q])
        for q in donor_outcomes
        if donor_outcomes[q] is not None and recipient_outcomes.get(q) is not None
    ]
    if len(diffs) < 2:
        return gap, None
    return gap, standard_error(diffs)


def beyond_noise(gap: float, se: float | None, z: float) -> bool | None:
    """Whether ``gap`` is more than ``z`` standard errors (None: no standard error to judge it by)."""
    if se is None:
        return None
    return gap > z * se if se > 0 else gap > 0


# propose(donor's values, the values going on this round, rng) -> (new values, how): the model-based explore (PB2)
Propose = Callable[[dict[str, float], list[dict[str, float]], random.Random], tuple[dict[str, float], dict[str, str]]]


def decide(
    scores: Sequence[float | None],
    values: Sequence[dict[str, float]],
    params: Sequence[Param],
    settings: Settings,
    round_: int,
    outcomes: Sequence[Mapping[str, float | None] | None] | None = None,
    propose: Propose | None = None,
    only: int | None = None,
) -> tuple[list[dict], list[dict]]:
    """After ``round_``: which members take over which, and the values each goes on with (explored); and which
    were held back by the noise guard. Every member that failed takes over one of the top ``exploited``, drawn;
    each of the bottom ``exploited`` that scored below every one of them takes over one drawn from those whose lead
    over it is beyond the ranking look's noise (``outcomes[m]``: member m's per-question values of the look), or
    from any of them with ``noise_guard`` off. Each take-over and each held-back member records the donor's
    ``gap``, its ``se`` and whether it was ``beyond_noise``. ``propose``: the values a recipient goes on with
    (PB2's model), else the donor's perturbed or drawn afresh (``explore``).

    ``only``: the decision of that member alone, its round just ended (an asynchronous PBT): ``scores`` holds the
    latest look of every member ranked (None for one not ranked now), and the quantile is of those ranked, as Ray's
    asynchronous PBT takes it; ``only`` without a score failed its round."""
    order = ranked(scores, settings.direction)
    scored = [m for m in order if scores[m] is not None]
    k = settings.exploited if only is None else settings.exploited_among(len(scored))
    if not scored or k == 0:
        return [], []
    donors = scored[:k]
    failed = [m for m in order if scores[m] is None and (only is None or m == only)]
    # a member scoring as well as a donor has nothing to gain from its state: a tie is no evidence (all 0 early on)
    worst_donor = scores[donors[-1]]
    bottom = [m for m in scored[-k:] if m not in donors and scores[m] != worst_donor and only in (None, m)]
    looks = list(outcomes) if outcomes is not None else [None] * len(scores)
    rng = _rng(settings.seed, "round", round_) if only is None else _rng(settings.seed, "member", only, "round", round_)
    take_overs, held_back = [], []
    judged: dict[int, dict] = {}
    for m in bottom:
        judged[m] = {}
        for d in donors:
            gap, se = ranking_gap(scores[d], scores[m], looks[d], looks[m], settings.direction)
            judged[m][d] = {"gap": gap, "se": se, "beyond_noise": beyond_noise(gap, se, settings.noise_z)}
    chosen: dict[int, int] = {m: rng.choice(donors) for m in failed}  # nothing to compare: no state to go on from
    for m in bottom:
        eligible = [d for d in donors if judged[m][d]["beyond_noise"] is not False] if settings.noise_guard else donors
        if eligible:
            chosen[m] = rng.choice(eligible)
        else:  # the lead of every donor is within the look's noise: the member goes on from its own weights
            nearest = max(donors, key=lambda d: judged[m][d]["gap"] / judged[m][d]["se"] if judged[m][d]["se"] else 0)
            held_back.append({"member": m, "donor": nearest, **judged[m][nearest]})
    # the values going on this round unchanged, then each new one as it is chosen: PB2 spreads its picks over them
    going_on = [dict(values[m]) for m in range(len(scores)) if m not in chosen]
    for m, donor in chosen.items():
        if propose is None:
            new, how = explore(values[donor], params, settings, rng)
        else:
            new, how = propose(values[donor], going_on, rng)
            new, how = hold_weights_total(values[donor], new, how, params, settings)
        going_on.append(new)
        lead = judged[m][donor] if m in judged else {"gap": None, "se": None, "beyond_noise": None}
        take_overs.append({"member": m, "donor": donor, "values": new, "how": how, **lead})
    return take_overs, held_back


def explore(
    values: dict[str, float], params: Sequence[Param], settings: Settings, rng: random.Random
) -> tuple[dict[str, float], dict[str, str]]:
    """``values`` moved: each key times one of the factors, or drawn afresh, within its range; then
    ``hold_weights_total``. ``how`` says what each key got, a bound that clipped it included."""
    new, how, asked = {}, {}, {}
    for p in params:
        if rng.random() < settings.resample_probability:
            new[p.key], how[p.key] = p.draw(rng), "resampled"
        else:
            factor = rng.choice(settings.perturb_factors)
            asked[p.key] = values[p.key] * factor
            new[p.key], how[p.key] = p.clip(asked[p.key]), f"x{factor:g}"
    for p in params:
        if p.key in asked and not math.isclose(new[p.key], asked[p.key]):
            how[p.key] += f", clipped to {new[p.key]:g}"
    return hold_weights_total(values, new, how, params, settings)


def hold_weights_total(
    before: dict[str, float],
    new: dict[str, float],
    how: dict[str, str],
    params: Sequence[Param],
    settings: Settings,
) -> tuple[dict[str, float], dict[str, str]]:
    """Reward weights (two or more, ``settings.weights_by_ratio``) rescaled so their total is ``before``'s: GRPO
    normalises the weighted reward within a group, so only their ratios move; ``how`` says the factor each got."""
    weights = [p for p in params if p.term is not None]
    if not settings.weights_by_ratio or len(weights) < 2:
        return new, how
    total, moved = sum(before[p.key] for p in weights), sum(new[p.key] for p in weights)
    if moved <= 0 or math.isclose(total, moved):
        return new, how
    new, how = dict(new), dict(how)
    for p in weights:
        asked = new[p.key] * total / moved
        new[p.key] = p.clip(asked)
        if before[p.key]:
            how[p.key] += f", x{asked / before[p.key]:.3g} with the weights' total held"
        if not math.isclose(new[p.key], asked):
            how[p.key] += f", clipped to {new[p.key]:g}"
    return new, how
