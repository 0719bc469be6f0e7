"""report.md of a population-based training: its rounds with the ranking look's noise, the lineage tree, how its
exploits stood against that noise, the moved values' plot, the best member's test, the replay, and the answer to
"does the schedule beat the best fixed starting point?" (the head-to-head's verdicts)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ...reading.report import REPORT
from ...reading.tables import markdown_table
from .lineage import Lineage
from .members import BEST_SCHEDULE, LINEAGE, PLOT
from .plot import look_se
from .settings import Param, Settings

# when a member's decision was made, as report.md and the terminal say it
RANKED = {
    True: "synchronous (`hydra.sweeper.synchronous=true`): a round's decisions were made once every member had "
    "reported it, the population ranked together",
    False: "asynchronous (`hydra.sweeper.synchronous=false`): each member was ranked as its own round ended, against "
    "the others' latest looks, and went on at once; the table holds each member's latest look of each round",
}


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


def guard_text(settings: Settings) -> str:
    if settings.noise_guard:
        return (
            f"on: a member copies a donor only when the donor's lead is more than {settings.noise_z:g} "
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


def timeline(lineage: Lineage, params: Sequence[Param], bullet: str = "- ") -> list[str]:
    """The PBT as it happened: each member's report of a round, in the order they came, and what the member did
    then (took over whom, went on, was held back, finished), said on its report's line."""
    short = short_names(params)
    z, spr = lineage.settings.noise_z, lineage.settings.steps_per_round
    lines: list[str] = []
    line_of: dict[int, int] = {}  # member -> the line of its latest report
    for row in lineage.timeline:
        m, r = row["member"], row["round"]
        if row["event"] == "report":
            away = "" if row.get("trained", True) else " (trained while the driver was away)"
            line_of[m] = len(lines)
            lines.append(f"{bullet}m{m} round {r + 1} (step {row['step']}): {_score(row['score'])}{away}")
            if r == lineage.rounds_total - 1 and row["score"] is not None:
                lines[-1] += "; finished"
        elif row["event"] == "decide":
            t, held = row.get("take_over"), row.get("held_back")
            if t is not None:
                how = "; ".join(f"{short.get(k, k)} {h}" for k, h in t["how"].items())
                said = (
                    f"; takes m{t['donor']}'s checkpoint of step {(t['donor_round'] + 1) * spr}{lead_text(t, z)}, "
                    f"then {_values(t['values'], short)} ({how})"
                )
            elif row.get("out"):
                said = "; out (no member could give it a checkpoint)"
            elif held:
                said = f"; goes on from its own weights: its nearest donor m{held['donor']}{lead_text(held, z)}"
            else:
                said = "; goes on"
            lines[line_of[m]] += said
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
    from ...run.files import write_text_atomic

    s = lineage.settings
    spr = s.steps_per_round
    members = lineage.population
    rows = []
    for r, scores in sorted(lineage.scores.items()):
        cells = []
        for m, x in enumerate(scores):
            se = look_se((looks.get(r) or [None] * members)[m])
            cells.append(_score(x) + (f" ± {se:.3f}" if se is not None and x is not None else ""))
        rows.append([str(r + 1), str((r + 1) * spr), *cells])
    test = lineage.test or {}
    best = lineage.best or {}
    text = [
        f"# PBT {lineage.start['name']!r}",
        "",
        f"{s.population} members × {s.rounds} rounds of {spr} steps, ranked on `{metric}` ({s.direction}), "
        f"{RANKED[s.synchronous].split(':', 1)[0]}; the bottom {s.exploit_fraction:g} (rounded up, at most half) may "
        f"take over the top's checkpoint, then explore ({s.explore}). Noise guard {guard_text(s)}. The lineage: "
        f"`{LINEAGE}`.",
        "",
        "## Rounds",
        "",
        f"Each member's `{metric}` at the end of each round, ± the ranking look's standard error "
        "(per-question sd / √questions):",
        "",
        *markdown_table(["round", "step", *(f"member {m}" for m in range(members))], rows),
        "",
        f"{RANKED[s.synchronous][0].upper()}{RANKED[s.synchronous][1:]}. As it happened:",
        "",
        *timeline(lineage, params),
        "",
        f"**Exploits against the look's noise:** {exploits_text(lineage.exploits())}.",
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
        f"Member {best.get('member')}: `{metric}` {_score(best.get('score'))} at step {s.rounds * spr}. "
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
    write_text_atomic(path, "\n".join(text))
    return path


def shell_line(overrides: list[str]) -> str:
    """The overrides as one shell command line's arguments (a list's commas and braces quoted from the shell)."""
    import shlex

    return " ".join(shlex.quote(o) for o in overrides)


def terminal_report(lineage: Lineage, params: list[Param], sweep_dir: Path, metric: str, replay: list[str]) -> str:
    """The PBT's end on the terminal: its rounds as they happened, the best member, its test, the replay."""
    s = lineage.settings
    short = short_names(params)

    def values(v: dict) -> str:
        return " ".join(f"{short.get(k, k)}={x:.3g}" for k, x in v.items())

    lines = [
        f"PBT {lineage.start['name']!r}: {s.population} members x {s.rounds} rounds of {s.steps_per_round} steps, "
        f"ranked on {metric} ({s.direction}) -> {sweep_dir}",
        f"  {RANKED[s.synchronous].replace('`', '')}",
        *timeline(lineage, params, bullet="    "),
        f"  exploits: {exploits_text(lineage.exploits())}; noise guard {guard_text(s)}",
    ]
    best, test = lineage.best, lineage.test or {}
    lines.append(
        f"  best: m{best['member']} ({metric} {_score(best['score'])} at step {s.rounds * s.steps_per_round}); "
        f"its lineage: " + " | ".join(values(v) for v in best["values"])
    )
    if test:
        k = (
            f", pass@{test['test_k']} {_score(test['test_pass_at_k'])}, "
            f"maj@{test['test_k']} {_score(test['test_maj_at_k'])}"
            if test.get("test_k")
            else ""
        )
        lines.append(
            f"  test ({test.get('test_samples')} prompts, measured once, on the best member only): accuracy "
            f"{_score(test.get('test_accuracy_before'))} -> {_score(test.get('test_accuracy'))}{k}"
        )
    lines.append(f"  lineage: {sweep_dir / LINEAGE}, {sweep_dir / PLOT}; best mix: {sweep_dir / BEST_SCHEDULE}")
    lines.append(f"  replay as a plain run: python launch.py {shell_line(replay)}")
    return "\n".join(lines)
