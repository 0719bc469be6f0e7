"""pbt.jsonl, a PBT's record, and the one state machine its members move through.

One vocabulary, whether rounds are synchronous or not (a synchronous PBT is the asynchronous one with a barrier,
as Ray Tune's): ``start`` (settings, ranges, the first population), then for each member and round a ``report``
(its score at the round's end), a ``decide`` (goes on, takes over a donor's look, held back by the noise guard, or
out) and, after a take-over, a ``carried_out`` (the bytes copied, or why it was abandoned); at the end ``best``,
``test`` and ``head_to_head``. A member's state (``Due``) follows from those rows alone.

A PBT written before the vocabulary was one (a synchronous one's ``round``, ``decide`` of the whole round and
``carried_out`` of the round; an asynchronous one's ``member_decide`` and ``member_carried_out``) is read as the
rows it would be today (``_today``), so it reports and continues; its file is never rewritten. No torch here.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path

from ...run.files import append_jsonl, read_jsonl
from .settings import Settings

EVENTS = ("start", "report", "decide", "carried_out", "best", "test", "head_to_head")
# the rows of a member's rounds, in the order they came (report.md's timeline)
MEMBER_EVENTS = ("report", "decide", "carried_out")


class Due(enum.Enum):
    """What a member waits for."""

    TRAIN = "train"  # its next round
    DECIDE = "decide"  # its round reported: whether it goes on or takes over (synchronous: once all have reported)
    CARRY = "carry"  # a take-over decided, not yet carried out
    FINISHED = "finished"  # its last round reported
    OUT = "out"  # it failed a round and no member could give it a checkpoint


@dataclass
class Lineage:
    """pbt.jsonl read back: the PBT's start, every member's reports and decisions, the best member and its test."""

    path: Path
    start: dict | None = None
    values: list[list[dict]] = field(default_factory=list)  # values[m][r]: member m's values in round r
    # trained_by[m][r]: the member whose job trained round r of member m's lineage (its seed, its data order)
    trained_by: list[list[int]] = field(default_factory=list)
    reports: list[dict] = field(default_factory=list)  # every member's report of a round, in the order they came
    # member -> its last report, while its weights are those the report looked at (a take-over ends that)
    current: dict[int, dict] = field(default_factory=dict)
    due: dict[int, Due] = field(default_factory=dict)
    # member -> the score of the state its next round starts from (its own last look, or its donor's)
    from_score: dict[int, float | None] = field(default_factory=dict)
    takes: dict[int, int] = field(default_factory=dict)  # member -> take-overs it made so far
    decided: dict[int, dict] = field(default_factory=dict)  # member -> its last decision
    decisions: dict[int, list] = field(default_factory=dict)  # round -> its take-overs
    held_back: dict[int, list] = field(default_factory=dict)  # round -> the members the noise guard kept
    timeline: list[dict] = field(default_factory=list)  # the reports, decisions and carried-out take-overs, in order
    _before: dict[int, tuple] = field(default_factory=dict)  # member -> its lineage before a take-over not yet done
    _rounds_before: dict[int, dict] = field(default_factory=dict)  # a synchronous PBT's old round rows, by round
    best: dict | None = None
    test: dict | None = None
    head_to_head: dict | None = None

    @classmethod
    def read(cls, path: Path) -> Lineage:
        lineage = cls(Path(path))
        for row in read_jsonl(path):
            for today in lineage._today(row):
                lineage._apply(today)
        return lineage

    def write(self, row: dict) -> None:
        if row.get("event") not in EVENTS:
            raise ValueError(f"pbt.jsonl: no event {row.get('event')!r} (one of {', '.join(EVENTS)})")
        append_jsonl(self.path, row)
        self._apply(row)

    @property
    def settings(self) -> Settings:
        """The settings its start row recorded (one it predates: the default)."""
        return Settings.recorded(self.start["settings"])

    @property
    def population(self) -> int:
        return len(self.values)

    @property
    def rounds_total(self) -> int:
        return int(self.start["settings"]["rounds"])

    @property
    def scores(self) -> dict[int, list]:
        """round -> each member's score at its end: its latest report of the round (None: it failed, or has not
        reported it)."""
        out: dict[int, list] = {}
        for row in self.reports:
            out.setdefault(row["round"], [None] * self.population)[row["member"]] = row["score"]
        return dict(sorted(out.items()))

    def report_of(self, member: int, round_: int) -> dict | None:
        """``member``'s latest report of ``round_``."""
        found = [row for row in self.reports if row["member"] == member and row["round"] == round_]
        return found[-1] if found else None

    def next_round(self, member: int) -> int:
        """The round ``member``'s lineage trains next."""
        return len(self.values[member]) - 1

    def history(self, member: int, round_: int) -> list[dict]:
        """The values of ``member``'s lineage in rounds 0..``round_``."""
        return self.values[member][: round_ + 1]

    def observations(self, direction: str, upto: int | None = None) -> list[dict]:
        """PB2's data: each round a member trained (up to round ``upto``), its values against its improvement (its
        score less the score its round started from, better up)."""
        sign = 1.0 if direction == "maximize" else -1.0
        return [
            {"round": row["round"], "values": row["values"], "improvement": sign * (row["score"] - row["start"])}
            for row in self.reports
            if (upto is None or row["round"] <= upto)
            and row.get("values") is not None
            and row["score"] is not None
            and row.get("start") is not None
        ]

    def exploits(self) -> dict[str, int]:
        """How the take-overs of the bottom members stood against the ranking look's noise: ``beyond`` (the donor's
        lead was more than noise_z standard errors), ``within`` (it was not: a plain PBT copied noise), ``unjudged``
        (no per-question outcomes to judge it by), ``held_back`` (the guard kept the member on its own weights);
        ``failed``: take-overs of members that failed their round."""
        out = {"beyond": 0, "within": 0, "unjudged": 0, "held_back": 0, "failed": 0}
        for round_, moves in self.decisions.items():
            for t in moves:
                if t.get("gap", 0.0) is None:
                    out["failed"] += 1
                else:
                    out[{True: "beyond", False: "within", None: "unjudged"}[t.get("beyond_noise")]] += 1
            out["held_back"] += len(self.held_back.get(round_, []))
        return out

    # -- the state machine ---------------------------------------------------------------------------------------
    def _apply(self, row: dict) -> None:
        event = row.get("event")
        if event in MEMBER_EVENTS:
            self.timeline.append(row)
        if event == "start":
            self.start = row
            self.values = [[dict(v)] for v in row["population"]]
            self.trained_by = [[m] for m in range(len(row["population"]))]
            self.due = {m: Due.TRAIN for m in range(len(row["population"]))}
        elif event == "report":
            m = row["member"]
            self.reports.append(row)
            self.current[m] = row
            last = row["round"] == self.rounds_total - 1
            self.due[m] = Due.FINISHED if last and row["score"] is not None else Due.DECIDE
        elif event == "decide":
            self._decided(row)
        elif event == "carried_out":
            m = row["member"]
            values, trained_by, current = self._before.pop(m)
            if row.get("abandoned"):  # the donor's checkpoint was gone: the member goes on from its own weights
                self.values[m] = [*values, dict(values[-1])]
                self.trained_by[m] = [*trained_by, m]
                self.current[m] = current
                self.from_score[m] = current["score"]
            self.due[m] = Due.TRAIN
        elif event == "best":
            self.best = row
        elif event == "test":
            self.test = row
        elif event == "head_to_head":
            self.head_to_head = row

    def _decided(self, row: dict) -> None:
        m, r, t = row["member"], row["round"], row.get("take_over")
        self.decided[m] = row
        if t is not None:
            self.decisions.setdefault(r, []).append(t)
        if row.get("held_back"):
            self.held_back.setdefault(r, []).append(row["held_back"])
        self.from_score[m] = row.get("from_score")
        if row.get("out"):
            self.due[m] = Due.OUT
        elif t is not None:
            d, dr = t["donor"], t["donor_round"]
            self._before[m] = (self.values[m][: r + 1], self.trained_by[m][: r + 1], self.current.pop(m, None))
            self.values[m] = [*self.values[d][: dr + 1], dict(t["values"])]
            self.trained_by[m] = [*self.trained_by[d][: dr + 1], m]
            self.takes[m] = self.takes.get(m, 0) + 1
            self.due[m] = Due.CARRY
        else:
            self.values[m] = [*self.values[m][: r + 1], dict(self.values[m][r])]
            self.trained_by[m] = [*self.trained_by[m][: r + 1], m]
            self.due[m] = Due.TRAIN

    # -- a PBT written before one vocabulary ---------------------------------------------------------------------
    def _today(self, row: dict) -> list[dict]:
        """``row`` as today's rows: a synchronous round's row as its members' reports, its round's decision as
        each member's, its carried-out round as each take-over's; an asynchronous member's rows renamed."""
        event = row.get("event")
        if event == "member_decide":
            return [{**row, "event": "decide"}]
        if event == "member_carried_out":
            return [{**row, "event": "carried_out"}]
        if event == "round":
            r, n = row["round"], self.population
            self._rounds_before[r] = row
            starts, values, trained = row.get("start") or [None] * n, row.get("values"), row.get("trained")
            return [
                {
                    "event": "report",
                    "member": m,
                    "round": r,
                    "step": row["step"],
                    "score": row["scores"][m],
                    "start": starts[m],
                    "values": values[m] if values else self.values[m][r],
                    "trained": trained is None or m in trained,
                    "seconds": row.get("seconds"),
                }
                for m in range(n)
            ]
        if event == "decide" and "member" not in row:
            r = row["round"]
            before = self._rounds_before[r]
            scores, step = before["scores"], before["step"]
            takes = {t["member"]: t for t in row["take_overs"]}
            held = {h["member"]: h for h in row.get("held_back") or []}
            ranked = {str(j): [r, score] for j, score in enumerate(scores)}
            return [
                {
                    "event": "decide",
                    "member": m,
                    "round": r,
                    "ranked": ranked,
                    "take_over": {**takes[m], "donor_round": r} if m in takes else None,
                    "held_back": held.get(m),
                    "from_score": scores[takes[m]["donor"]] if m in takes else scores[m],
                    "out": False,  # a member that failed and took over no one trained on from its own weights
                    "archive": f"step-{step}",
                }
                for m in range(self.population)
            ]
        if event == "carried_out" and "member" not in row:
            # the round's bytes on its first take-over's row: their sum by round stays what was copied
            return [
                {
                    "event": "carried_out",
                    "member": t["member"],
                    "round": row["round"],
                    "bytes": 0 if i else row.get("bytes"),
                }
                for i, t in enumerate(self.decisions.get(row["round"], []))
            ]
        return [row]
