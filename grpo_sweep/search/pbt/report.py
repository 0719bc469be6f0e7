"""report.md of a population-based training: its rounds with the ranking look's noise, the lineage tree, how its
exploits stood against that noise, the moved values' plot, the best member's test, the replay, and the answer to
"does the schedule beat the best fixed starting point?" (the head-to-head's verdicts)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ...reading.report import REPORT
from ...reading.tables import markdown_table
from .plot import look_se
from .population import LINEAGE, PLOT, Lineage, Param


def short_names(params: Sequence[Param]) -> dict[str, str]:
    """``reward_mix.format.weight`` -> ``format``, ``optimizer.learning_rate`` -> ``lr``, else the last part."""
    return {p.key: p.term or ("lr" if p.key == "optimizer.learning_rate" else p.key.rsplit(".", 1)[-1]) for p in params}


def _values(values: dict, short: dict[str, str]) -> str:
    return ", ".join(f"{short.get(k, k)} {v:.3g}" for k, v in values.items())


def _score(x) -> str:
    return "failed" if x is None else f"{x:.3f}"


def lead_text(t: dict, z: float) -> str:
    """A take-over's or held-back member's lead, as ``(lead +0.203, se 0.060: beyond 1.645 se)``."""
    if t.get("gap") is None:
        return " (it failed its round)" if "gap" in t else ""
    if t.get("se") is None:
        return f" (lead {t['gap']:+.3f}, no per-question outcomes to weigh it)"
    return f" (lead {t['gap']:+.3f}, se {t['se']:.3f}: {'beyond' if t['beyond_noise'] else 'within'} {z:g} se)"


def exploits_text(counts: dict[str, int]) -> str:
    return (
        f"{counts['beyond']} beyond the ranking look's noise, {counts['within']} within it, {counts['unjudged']} not "
        f"judged (no per-question outcomes), {counts['held_back']} held back by the guard; {counts['failed']} "
        "take-overs of members that failed their round"
    )


def guard_text(settings: dict) -> str:
    if settings.get("noise_guard"):
        return (
            f"on: a member copies a donor only when the donor's lead is more than {settings.get('noise_z', 1.645):g} "
            "standard errors of the ranking look, paired by question"
        )
    return "off (plain PBT: the bottom copies the top whatever the gap)"


def lineage_tree(lineage: Lineage, params: Sequence[Param], steps_per_round: int) -> list[str]:
    """Each member's lineage as it ended, round by round: whose job trained the round (its seed and data order),
    the values it trained with, the score at the round's end; the best member first."""
    short = short_names(params)
    best = (lineage.best or {}).get("member")
    order = sorted(range(len(lineage.values)), key=lambda m: (m != best, m))
    lines = []
    for m in order:
        head = f"- member {m}" + (" (best)" if m == best else "")
        lines.append(head)
        for r, (values, by) in enumerate(zip(lineage.values[m], lineage.trained_by[m])):
            score = (lineage.scores.get(r) or [None] * (by + 1))[by]
            came = "" if by == m else f" as member {by}"
            lines.append(
                f"  - steps {r * steps_per_round + 1}-{(r + 1) * steps_per_round}{came}: "
                f"{_values(values, short)} -> {_score(score)}"
            )
    return lines


def timeline(lineage: Lineage, params: Sequence[Param], z: float, bullet: str = "- ") -> list[str]:
    """An asynchronous PBT as it happened: each member's report of a round, in the order they came, and what the
    member did then (took over whom, went on, finished)."""
    short = short_names(params)
    spr = lineage.start["settings"]["steps_per_round"]
    lines: list[str] = []
    for row in lineage.timeline:
        m, r = row["member"], row["round"]
        if row["event"] == "report":
            away = "" if row.get("trained", True) else " (trained while the driver was away)"
            lines.append(f"{bullet}m{m} round {r + 1} (step {row['step']}): {_score(row['score'])}{away}")
            if r == lineage.rounds_total - 1 and row["score"] is not None:
                lines[-1] += "; finished"
        elif row["event"] == "member_decide":
            t, held = row.get("take_over"), row.get("held_back")
            if t is not None:
                how = "; ".join(f"{short.get(k, k)} {h}" for k, h in t["how"].items())
                lines[-1] += (
                    f"; takes m{t['donor']}'s checkpoint of step {(t['donor_round'] + 1) * spr}{lead_text(t, z)}, "
                    f"then {_values(t['values'], short)} ({how})"
                )
            elif row.get("out"):
                lines[-1] += "; out (no member could give it a checkpoint)"
            elif held:
                lines[-1] += f"; goes on from its own weights: its nearest donor m{held['donor']}{lead_text(held, z)}"
            else:
                lines[-1] += "; goes on"
        elif row.get("abandoned"):
            lines.append(f"{bullet}m{m}: the take-over was abandoned ({row['abandoned']}); it goes on from its own")
    return lines


def write_report(
    sweep_dir: Path,
    lineage: Lineage,
    params: Sequence[Param],
    metric: str,
    replay: str,
    head_to_head: str,
    looks: dict[int, Sequence[dict | None]],
) -> Path:
    """``<sweep>/report.md``; returns its path."""
    s = lineage.start["settings"]
    spr, z = s["steps_per_round"], s.get("noise_z", 1.645)
    counts = lineage.exploits()
    members = len(lineage.values)
    rows = []
    for r, scores in sorted(lineage.scores.items()):
        cells = []
        for m, x in enumerate(scores):
            se = look_se((looks.get(r) or [None] * members)[m])
            cells.append(_score(x) + (f" ± {se:.3f}" if se is not None and x is not None else ""))
        rows.append([str(r + 1), str((r + 1) * spr), *cells])
    short = short_names(params)
    moves = []
    for r, decided in sorted(lineage.decisions.items()):
        for t in decided:
            how = "; ".join(f"{short.get(k, k)} {h}" for k, h in t["how"].items())
            moves.append(
                f"- after round {r + 1}: member {t['member']} took member {t['donor']}'s checkpoint"
                f"{lead_text(t, z)}, then {_values(t['values'], short)} ({how})"
            )
        for t in lineage.held_back.get(r, []):
            moves.append(
                f"- after round {r + 1}: member {t['member']} went on from its own weights: its nearest donor, member "
                f"{t['donor']}{lead_text(t, z)}"
            )
    if lineage.reports:
        moves = [
            "Asynchronous (`hydra.sweeper.synchronous=false`): each member was ranked as its own round ended, "
            "against the others' latest looks, and went on at once; the table holds each member's latest look of "
            "each round. As it happened:",
            "",
            *timeline(lineage, params, z),
        ]
    test = lineage.test or {}
    best = lineage.best or {}
    text = [
        f"# PBT {lineage.start['name']!r}",
        "",
        f"{s['population']} members × {s['rounds']} rounds of {spr} steps, ranked on `{metric}` ({s['direction']}) "
        + ("after each round" if s.get("synchronous", True) else "as each member's round ended (asynchronous)")
        + f"; the bottom {s['exploit_fraction']:g} (rounded up, at most half) may take over the top's "
        f"checkpoint, then explore ({s.get('explore', 'perturb')}). Noise guard {guard_text(s)}. The lineage: "
        f"`{LINEAGE}`.",
        "",
        "## Rounds",
        "",
        f"Each member's `{metric}` at the end of each round, ± the ranking look's standard error "
        "(per-question sd / √questions):",
        "",
        *markdown_table(["round", "step", *(f"member {m}" for m in range(members))], rows),
        "",
        *(moves or ["No member took over another."]),
        "",
        f"**Exploits against the look's noise:** {exploits_text(counts)}.",
        "",
        "## Lineage tree",
        "",
        "Each member's history as it ended: the job that trained each round (its seed and data order are that "
        "member's), its values, and the score at the round's end.",
        "",
        *lineage_tree(lineage, params, spr),
        "",
        "## Moved values",
        "",
        f"![the population's scores and moved values over steps; the best lineage in black]({PLOT})",
        "",
        "## The best member",
        "",
        f"Member {best.get('member')}: `{metric}` {_score(best.get('score'))} at step {s['rounds'] * spr}. "
        + (
            f"Test ({test.get('test_samples')} prompts, measured once, on this member only): accuracy "
            f"{_score(test.get('test_accuracy_before'))} → {_score(test.get('test_accuracy'))}."
            if test
            else "Its test has not run."
        ),
        "",
        "Replayed as one plain run (its weights, learning rate, every moved value and seed, round by round):",
        "",
        "```",
        f"python launch.py {replay}",
        "```",
        "",
        "## Does the schedule beat a fixed mix?",
        "",
        "```",
        head_to_head,
        "```",
        "",
    ]
    path = Path(sweep_dir) / REPORT
    from ...run.files import write_text_atomic

    write_text_atomic(path, "\n".join(text))
    return path
