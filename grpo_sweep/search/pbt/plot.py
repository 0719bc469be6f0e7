"""pbt.png: the population's lineage, drawn with the report's plotting helpers (reading/plots.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ...reading.plots import palette, pyplot, save_figure


def plot_lineage(
    scores: dict[int, Sequence],
    take_overs: dict[int, Sequence[dict]],
    steps_per_round: int,
    out_path: Path,
    metric: str,
) -> None:
    """A population-based training's lineage (population.py): each member's score at the end of each round, a
    solid line where it went on from its own weights, a dotted one from the donor's point where it took over
    another member's checkpoint; a member that failed a round has no point there."""
    plt = pyplot()
    colors = palette(plt)
    fig, ax = plt.subplots(figsize=(7, 4))
    rounds = sorted(scores)
    members = max((len(s) for s in scores.values()), default=0)
    for m in range(members):
        color = colors[m % len(colors)]
        points = [((r + 1) * steps_per_round, scores[r][m]) for r in rounds if scores[r][m] is not None]
        if points:
            ax.plot(*zip(*points), linestyle="none", marker="o", color=color, label=f"member {m}")
        for r in rounds:
            after = scores.get(r + 1)
            if not after or after[m] is None:
                continue
            moved = {t["member"]: t["donor"] for t in take_overs.get(r, [])}
            start = scores[r][moved.get(m, m)]
            if start is not None:
                ax.plot(
                    [(r + 1) * steps_per_round, (r + 2) * steps_per_round],
                    [start, after[m]],
                    color=color,
                    linestyle=":" if m in moved else "-",
                )
    ax.set_xlabel("step (end of round)")
    ax.set_ylabel(metric)
    ax.set_title("PBT lineage; dotted: went on from another member's checkpoint", fontsize=10)
    ax.legend(fontsize=8)
    save_figure(fig, out_path)
