"""The verdicts in words: notes, the method sentence, a table cell's text, made from stats' typed results.

stats.compare and stats.judge compute every verdict (``Comparison.reason`` says why it is what it is); this module
only says it, so the table, report.md, verdicts.json, W&B and the study report word the same numbers the same way.
No numpy, no scipy.
"""

from __future__ import annotations

from typing import Sequence

from .stats import MAX_SEEDS, Comparison, Design, seed_text

DEFAULT_SEED_HINT = "trainer.seed=1,2,3"
ORDINALS = {2: "second", 3: "third", 4: "fourth", 5: "fifth", 6: "sixth", 7: "seventh", 8: "eighth"}


def signed(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:+.3g}" if 0 < abs(value) < 1e-2 else f"{value:+.3f}"


def ci_text(row: Comparison) -> str:
    """``[low, high]`` of the difference from the reference, ``-`` without one (the reference, no verdict)."""
    return "-" if row.low is None or row.high is None else f"[{signed(row.low)}, {signed(row.high)}]"


def verdict_text(row: Comparison) -> str:
    """The verdict with its note, for a table cell: ``indistinguishable (no difference larger than 0.081 ...)``."""
    return f"{row.verdict} ({row.note})" if row.note and row.verdict != "-" else row.verdict


def describe(rows: Sequence[Comparison], seed_hint: str = DEFAULT_SEED_HINT) -> list[Comparison]:
    """Fill each row's ``note`` and ``method`` from its numbers and reason (in place; returns the rows)."""
    for row in rows:
        row.note = note(row, seed_hint)
        row.method = method(row.design) if row.design is not None else ""
    return list(rows)


def note(row: Comparison, seed_hint: str = DEFAULT_SEED_HINT) -> str:
    against = f"against {row.against}" if row.against else ""
    if row.verdict == "reference":
        return "; ".join(p for p in (reference_note(row), spread_text(row)) if p)
    if row.verdict in ("better", "worse"):
        return "; ".join(p for p in (against, spread_text(row)) if p)
    text = {
        "incomplete": "missing " + ", ".join(seed_text(s) for s in row.missing_seeds),
        "no result": "no finished run with an objective",
        "one seed": f"one seed: run more ({seed_hint}) to tell a difference from seed noise",
        "no noise": "every run scored the same: no noise to measure a difference against",
        "no look": "no look with another configuration",
    }.get(row.reason)
    if text is not None:
        return text
    if row.reason == "running":
        return row.note or "still running"
    if row.verdict != "indistinguishable" or row.mde is None:
        return against
    if row.reason == "not confirmed":
        head = "test does not confirm validation"
    elif row.reason == "validation does not call it":
        head = "validation's sequential test at this look does not call it"
    else:
        head = f"no difference larger than {row.mde:.3f} at 80% power"
    parts = [head, needed_text(row), few_seeds_text(row), against, spread_text(row)]
    return "; ".join(p for p in parts if p)


def spread_text(row: Comparison) -> str:
    """A warning where this configuration's run-to-run spread looks outside the moderated mode's family."""
    if row.spread is None:
        return ""
    from .moderation import SPREAD_LIMIT

    side = "noisier" if row.spread > 1 else "quieter"
    return (
        f"WARNING: its run-to-run variance is {row.spread:.3g}x the others' (looks more than {SPREAD_LIMIT:g}x "
        f"{side} in SD): the moderated verdicts promise their error only up to {SPREAD_LIMIT:g}x; "
        "check with --verdicts strict"
    )


def needed_text(row: Comparison) -> str:
    seeds = row.design.seeds if row.design else len(row.seeds)
    if row.delta is None or row.delta == 0:
        return ""
    if row.seeds_needed is None:
        return f"more than {MAX_SEEDS} seeds (or more questions) to resolve {signed(row.delta)}"
    return f"~{row.seeds_needed} seeds (now {seeds}) to resolve {signed(row.delta)}"


def few_seeds_text(row: Comparison) -> str:
    """What one more seed buys where the seeds, not the questions, limit the design (2 or 3 seeds give each
    configuration's own noise 1 or 2 degrees of freedom: nothing can say yet whether one is noisier than another)."""
    if row.design is None or row.mde_one_more is None or row.design.seeds > 3 or (row.seed_share or 0) < 0.5:
        return ""
    s = row.design.seeds
    return (
        f"{s} seeds leave each configuration's own noise {s - 1} degree{'s' if s > 2 else ''} of freedom: a "
        f"{ORDINALS.get(s + 1, f'{s + 1}th')} seed would bring the detectable difference to {row.mde_one_more:.3f}"
    )


def reference_note(reference: Comparison) -> str:
    """Why it is the reference. Validation cannot pick among configurations that tie on it: the first in the sweep's
    order is then the reference, said as such (the intervals hold whichever of them is the reference)."""
    if reference.design is not None and reference.design.adaptive:
        return "best on validation at the last look"
    if not reference.tied:
        return "best on validation"
    complete = reference.design.configurations if reference.design else len(reference.tied) + 1
    if len(reference.tied) == complete - 1:
        return (
            f"all {complete} configurations tie on validation ({reference.rank_mean:.3g}): the first listed is "
            "the reference, an arbitrary pick"
        )
    return (
        f"tied best on validation with {', '.join(map(str, reference.tied))}: the first listed is the reference, "
        "an arbitrary pick"
    )


def method(design: Design) -> str:
    """One sentence: what Δ is, what the intervals hold over, where the noise comes from."""
    what = "test" if design.on_test else "validation objective (not every run has a test value)"
    level = f"{100 * (1 - design.alpha):g}%"
    if design.questions:
        noise = (
            f"each configuration's own run-to-run variance over its {design.seeds} seeds "
            f"({design.seeds - 1} df) plus the pair's configuration x question part over {design.questions} "
            f"paired questions"
        )
    else:
        noise = f"each configuration's own variance of per-run values over {design.seeds} seeds ({design.seeds - 1} df)"
        if design.floored:
            noise += ", floored at the binomial p(1-p)/n of its questions"
    head = f"Δ = {what} difference from the reference"
    if design.adaptive:
        low, high = design.adaptive
        head = (
            f"adaptive seeds (min {low}, max {high}); Δ = test difference from the leader of the configuration's "
            f"last look; a call needs validation's sequential test (alpha {design.alpha:g} shared by the looks) "
            "and test to agree"
        )
    if design.mode == "moderated":
        return f"{head}; {level} family-wise intervals over {design.configurations} configurations, " + moderated_text(
            design
        )
    return (
        f"{head}; {level} family-wise intervals over {design.configurations} configurations, valid whichever is "
        f"the reference and however their noise differs (strict: Tukey's studentized range at each variance part's "
        f"degrees of freedom, Dunnett's C); noise from {noise}"
    )


def moderated_text(design: Design) -> str:
    """What the moderated mode did and what it promises, for the method sentence."""
    from .moderation import SPREAD_LIMIT

    pairing = (
        f"the seed-paired variance of each pair's run-mean differences over its {design.seeds} shared seeds"
        if design.paired
        else f"each configuration's own run-to-run variance over its {design.seeds} seeds"
    )
    if design.paired and design.configurations == 2:
        return (
            f"valid whichever is the reference and whatever their noise and correlation (moderated: with two "
            f"configurations, the paired t over their {design.seeds} shared seeds, {design.seeds - 1} df: nothing to "
            "borrow from; strict mode: hydra.sweeper.verdicts=strict)"
        )
    borrowed = design.prior_df or 0.0
    strength = (
        "nothing borrowed (too few configurations, or their noise differs too much)"
        if borrowed <= 0
        else f"{'more than 1000' if borrowed > 1000 else f'{borrowed:.1f}'} degrees of freedom borrowed from the "
        f"other configurations beside its own {design.seeds - 1}"
    )
    return (
        f"valid whichever is the reference for configurations up to {SPREAD_LIMIT:g}x noisier than each other and "
        f"seeds shared at any correlation (moderated: {pairing}, moderated across configurations and never below "
        f"its own, {strength}; critical value calibrated by simulation for {design.configurations} configurations x "
        f"{design.seeds} seeds; strict mode: hydra.sweeper.verdicts=strict)"
    )
