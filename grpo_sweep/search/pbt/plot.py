"""pbt.png: the population over its rounds, drawn with the report's plotting helpers (reading/plots.py)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ...reading.plots import palette, pyplot, save_figure
from ...reading.stats import standard_error
from .lineage import Lineage
from .settings import Param


def look_se(look: dict | None) -> float | None:
    """The standard error of a member's ranking look: its per-question values' sd over the square root of their
    number (None without per-question outcomes)."""
    return standard_error([v for v in (look or {}).values() if v is not None])


def plot_pbt(
    lineage: Lineage,
    params: Sequence[Param],
    metric: str,
    out_path: Path,
    looks: dict[int, Sequence[dict | None]] | None = None,
) -> None:
    """Top: each member's score at the end of each round with the ranking look's noise band (± ``noise_z``
    standard errors, from ``looks[round][member]``), a solid line where it went on from its own weights, a dotted
    one from the donor's point where it took over another's checkpoint; a member that failed a round has no point
    there. Below, one panel per moved value: each member's value over the steps, as its lineage trained it. The
    best member's lineage is black and thick in every panel."""
    plt = pyplot()
    colors = palette(plt)
    scores = lineage.scores
    steps_per_round, noise_z = lineage.settings.steps_per_round, lineage.settings.noise_z
    fig, axes = plt.subplots(1 + len(params), 1, figsize=(7, 3 + 2 * len(params)), sharex=True, squeeze=False)
    axes = [row[0] for row in axes]
    ax = axes[0]
    rounds = sorted(scores)
    members = max((len(s) for s in scores.values()), default=0)
    best = (lineage.best or {}).get("member")
    for m in range(members):
        color = colors[m % len(colors)]
        points = [((r + 1) * steps_per_round, scores[r][m], r) for r in rounds if scores[r][m] is not None]
        if points:
            xs, ys, rs = zip(*points)
            se = [look_se(((looks or {}).get(r) or [None] * members)[m]) for r in rs]
            err = [noise_z * e if e is not None else 0.0 for e in se]
            ax.errorbar(xs, ys, yerr=err, linestyle="none", marker="o", color=color, capsize=3, label=f"member {m}")
        for x0, y0, x1, y1, took in _segments(lineage, m, steps_per_round):
            ax.plot([x0, x1], [y0, y1], color=color, linestyle=":" if took else "-")
    if best is not None and lineage.trained_by:
        path = lineage.trained_by[best]
        # the best lineage's scores: the member that trained each round, at that round's end
        pts = [((r + 1) * steps_per_round, scores[r][path[r]]) for r in rounds if r < len(path)]
        pts = [(x, y) for x, y in pts if y is not None]
        if pts:
            ax.plot(*zip(*pts), color="black", linewidth=2.2, label=f"best lineage (member {best})", zorder=0)
    ax.set_ylabel(metric)
    ax.set_title(
        f"PBT lineage; bars: ±{noise_z:g} se of the ranking look; dotted: went on from another member's checkpoint",
        fontsize=9,
    )
    ax.legend(fontsize=7)
    last_step = (max(rounds) + 1) * steps_per_round if rounds else steps_per_round
    for ax, p in zip(axes[1:], params):
        for m, history in enumerate(lineage.values):
            xs, ys = _steps(history, p.key, steps_per_round, last_step)
            ax.plot(xs, ys, color=colors[m % len(colors)], alpha=0.7, drawstyle="steps-post")
        if best is not None and best < len(lineage.values):
            xs, ys = _steps(lineage.values[best], p.key, steps_per_round, last_step)
            ax.plot(xs, ys, color="black", linewidth=2.2, drawstyle="steps-post")
        if p.log:
            ax.set_yscale("log")
        ax.set_ylabel(p.key.replace("reward_mix.", "").replace(".weight", " weight"), fontsize=8)
    axes[-1].set_xlabel("step")
    save_figure(fig, out_path)


def _segments(lineage: Lineage, member: int, steps_per_round: int) -> list[tuple]:
    """``member``'s segments: each round it trained, from the score its round started from (its own last look, or
    its donor's, at the round's first step) to its report; whether it took over to start it."""
    out, took = [], False
    for row in lineage.timeline:
        if row["member"] != member:
            continue
        if row["event"] == "decide":
            took = row.get("take_over") is not None
        elif row["event"] == "carried_out" and row.get("abandoned"):
            took = False
        elif row["event"] == "report":
            if row["round"] > 0 and row.get("start") is not None and row["score"] is not None:
                out.append((row["round"] * steps_per_round, row["start"], row["step"], row["score"], took))
    return out


def _steps(history: Sequence[dict], key: str, steps_per_round: int, last_step: int) -> tuple[list, list]:
    """A lineage's value of ``key`` as a step function: each round's from its first step, the last to ``last_step``."""
    values = [h[key] for h in history if key in h]
    if not values:
        return [], []
    return [r * steps_per_round for r in range(len(values))] + [last_step], [*values, values[-1]]
