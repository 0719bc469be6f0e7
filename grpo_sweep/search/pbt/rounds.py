"""The PBT's driver: the members' rounds, each a job on the launcher, at most ``capacity`` in flight (the launcher's
``concurrent_runs``), the member furthest behind first.

A member decides as its round ends. ``synchronous=false`` (Ray Tune's default): at once, against the other
members' latest looks, so a slow node holds no one but its own member. ``synchronous=true``: a barrier, as Ray's
synchronous flag, which changes only *when* a decision fires: once every member has reported the round, the
population is ranked together and every member's decision of the round written.

The decision is ``decisions.decide``: the bottom quantile of the members ranked (those with a look of the weights
they hold now and a round left: Ray's ``_quantiles``) takes over one of the top, under the noise guard. A recipient
takes its donor's latest look's checkpoint and goes on from the donor's step, as Ray's exploit does; asynchronous,
it may then train a round again that it had trained before (its own record of it kept, superseded).

Every report and decision is a row of pbt.jsonl (lineage.py) written before what follows from it, so the same
command continues a driver that was killed: what a member trained while the driver was gone is reported from its
directory, not trained again, a job SLURM still runs is waited for, and a round's decisions half written are
completed with the same draws. No torch here (the login node runs this).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .decisions import decide
from .lineage import Due, Lineage
from .members import logged_score, member_dir, round_score, take_over
from .settings import Param, PBTError, Settings

log = logging.getLogger(__name__)

# start_job(member, round) -> the launcher's started batch of that member's round (``done()``, ``results()``)
StartJob = Callable[[int, int], Any]
# look(member, round, score) -> the member's per-question values of its ranking look at the round's end (kept, as
# the round's looks file), or None; kept_look(member, round) -> the look kept then
Look = Callable[[int, int, "float | None"], "dict | None"]
KeptLook = Callable[[int, int], "dict | None"]


@dataclass
class PBTRun:
    """What every step of a PBT reads, told once: its directory, its record, the keys it moves, its settings, the
    metric it ranks on, the first member's seed, and the command line's arguments its jobs start from."""

    sweep_dir: Path
    lineage: Lineage
    params: list[Param]
    settings: Settings
    metric: str
    base_seed: int
    arguments: list[str] = field(default_factory=list)

    def step_of(self, round_: int) -> int:
        return (round_ + 1) * self.settings.steps_per_round


class Rounds:
    """The members' rounds, each member on its own clock up to the barrier of a synchronous PBT."""

    def __init__(
        self,
        run: PBTRun,
        start_job: StartJob,
        look: Look,
        kept_look: KeptLook,
        capacity: int,
        propose_for: Callable[[int], Any] | None = None,
        poll_s: float = 0.5,
    ) -> None:
        self.pbt, self.lineage, self.settings = run, run.lineage, run.settings
        self.start_job, self.capacity = start_job, max(1, capacity)
        self.look, self.kept_look = look, kept_look
        self.propose_for, self.poll_s = propose_for, poll_s
        self.looks: dict[tuple[int, int], dict | None] = {}  # (member, round) -> its look, as reported
        self.trained = 0  # jobs this driver started

    def step_of(self, round_: int) -> int:
        return self.pbt.step_of(round_)

    # -- the loop ------------------------------------------------------------------------------------------------
    def run(self) -> None:
        for m in range(self.settings.population):  # a killed driver's pending reports and decisions first
            self._settle(m)
        in_flight: dict[int, tuple[Any, int, float]] = {}
        while True:
            ready = []
            if len(in_flight) < self.capacity:  # else the poll loop reads no timeline
                ready = self._queue(m for m, due in self.lineage.due.items() if due is Due.TRAIN and m not in in_flight)
            for m in ready:
                if len(in_flight) >= self.capacity:
                    break
                r = self.lineage.next_round(m)
                if round_score(member_dir(self.pbt.sweep_dir, m), self.step_of(r), self.pbt.metric) is not None:
                    self._reported(m, r, None, trained=False)  # trained while the driver was gone
                    continue
                log.info("PBT member %d trains round %d to step %d", m, r + 1, self.step_of(r))
                in_flight[m] = (self.start_job(m, r), r, time.time())
                self.trained += 1
            if not in_flight:
                if any(due is Due.TRAIN for due in self.lineage.due.values()):
                    continue  # reported from disk just now: its decision may have made it due again
                return
            finished = [m for m, (job, _, _) in in_flight.items() if job.done()]
            if not finished:
                time.sleep(self.poll_s)
                continue
            for m in sorted(finished):
                job, r, began = in_flight.pop(m)
                try:
                    for returned in job.results():
                        _ = returned.return_value
                except Exception as exc:  # noqa: BLE001 - a job that died: its member has no look this round
                    log.error("PBT member %d's round %d failed: %s: %s", m, r + 1, type(exc).__name__, exc)
                self._reported(m, r, time.time() - began, trained=True)

    def _queue(self, members) -> list[int]:
        """Who starts first when the launcher has fewer slots than members: the member furthest behind, as Ray's
        ``choose_trial_to_run``; among those level, the one that has waited longest. Without that tie-break a
        recipient that went back to its donor's round would start again before its donor, copy the same look
        again, and, on a one-at-a-time launcher, never let the donor train."""
        waiting_since = {}
        for i, row in enumerate(self.lineage.timeline):
            waiting_since[row["member"]] = i
        return sorted(members, key=lambda m: (self.lineage.next_round(m), waiting_since.get(m, -1), m))

    def _settle(self, m: int) -> None:
        """What follows member ``m``'s report: its decision (synchronous: the round's, once every member has
        reported it), then carrying out each take-over decided."""
        due = self.lineage.due
        if not self.settings.synchronous:
            if due.get(m) is Due.DECIDE:
                self._decide(m)
            if due.get(m) is Due.CARRY:
                self._carry_out(m)
            return
        if due.get(m) is Due.DECIDE and (round_ := self._round_reported()) is not None:
            self._decide_round(round_)
        # a round's take-overs once all its decisions are written (a driver killed between them: once completed)
        if not any(state is Due.DECIDE for state in due.values()):
            for j in range(self.settings.population):
                if due.get(j) is Due.CARRY:
                    self._carry_out(j)

    # -- a member's round ended ----------------------------------------------------------------------------------
    def _reported(self, m: int, r: int, seconds: float | None, trained: bool) -> None:
        step = self.step_of(r)
        run_dir = member_dir(self.pbt.sweep_dir, m)
        score = round_score(run_dir, step, self.pbt.metric)
        start = logged_score(run_dir, 0, self.pbt.metric) if r == 0 else self.lineage.from_score.get(m)
        self.looks[(m, r)] = self.look(m, r, score)
        self.lineage.write(
            {
                "event": "report",
                "member": m,
                "round": r,
                "step": step,
                "score": score,
                "start": start,
                "values": self.lineage.values[m][r],
                "trained": trained,
                "seconds": None if seconds is None else round(seconds, 3),
            }
        )
        shown = "failed" if score is None else f"{score:.3f}"
        log.info("PBT member %d, round %d: %s %s", m, r + 1, self.pbt.metric, shown)
        self._settle(m)

    def _round_reported(self) -> int | None:
        """The round a synchronous PBT decides now: every member still in it has reported it (or decided it,
        before a kill); None while one still trains it."""
        waiting = [m for m, due in self.lineage.due.items() if due is Due.DECIDE]
        if not waiting:
            return None
        r = min(self.lineage.current[m]["round"] for m in waiting)
        for m, due in self.lineage.due.items():
            if due in (Due.DECIDE, Due.FINISHED, Due.OUT) or self.lineage.decided.get(m, {}).get("round") == r:
                continue
            return None
        return r

    def _decide_round(self, r: int) -> None:
        """Every undecided member's decision of round ``r``, the population ranked together (the draws are the
        round's, so decisions completed after a kill are those that would have been written)."""
        lineage, population = self.lineage, range(self.settings.population)
        reports = {m: lineage.report_of(m, r) for m in population}
        reports = {m: row for m, row in reports.items() if row is not None}
        scores = [reports[m]["score"] if m in reports else None for m in population]
        values = [reports[m]["values"] if m in reports else lineage.values[m][-1] for m in population]
        looks = [self._look(m, reports[m]) if m in reports else None for m in population]
        propose = self.propose_for(r) if self.propose_for is not None else None
        take_overs, held_back = decide(scores, values, self.pbt.params, self.settings, r, looks, propose)
        takes = {t["member"]: {**t, "donor_round": r} for t in take_overs}
        held = {h["member"]: h for h in held_back}
        ranked = {str(m): [r, row["score"]] for m, row in sorted(reports.items())}
        for m in population:
            if lineage.due[m] is Due.DECIDE:
                self._write_decision(m, r, ranked, takes.get(m), held.get(m), scores)

    def _decide(self, m: int) -> None:
        """Member ``m``'s decision alone, against the others' latest looks (an asynchronous PBT)."""
        r = self.lineage.current[m]["round"]
        population = range(self.settings.population)
        # ranked: a look of the weights it holds, and a round left (the member deciding is ranked, failed or not)
        rankable = {
            j: row for j, row in self.lineage.current.items() if j == m or self.lineage.due.get(j) is not Due.FINISHED
        }
        # a donor's checkpoint of its look must be there to take (a run that keeps few checkpoints may have dropped it)
        rankable = {j: row for j, row in rankable.items() if j == m or self._checkpoint(j, row["round"]).is_dir()}
        scores = [rankable[j]["score"] if j in rankable else None for j in population]
        # a donor's values of its look; the others' as they train now (what PB2 spreads its pick away from)
        values = [self.lineage.values[j][rankable[j]["round"] if j in rankable else -1] for j in population]
        looks = [self._look(j, rankable[j]) if j in rankable else None for j in population]
        propose = self.propose_for(r) if self.propose_for is not None else None
        take_overs, held_back = decide(scores, values, self.pbt.params, self.settings, r, looks, propose, only=m)
        take = {**take_overs[0], "donor_round": rankable[take_overs[0]["donor"]]["round"]} if take_overs else None
        ranked = {str(j): [row["round"], row["score"]] for j, row in sorted(rankable.items())}
        self._write_decision(m, r, ranked, take, held_back[0] if held_back else None, scores)

    def _write_decision(self, m: int, r: int, ranked: dict, take: dict | None, held: dict | None, scores: list) -> None:
        own = self.lineage.current[m]
        out = own["score"] is None and take is None
        self.lineage.write(
            {
                "event": "decide",
                "member": m,
                "round": r,
                "ranked": ranked,
                "take_over": take,
                "held_back": held,
                "from_score": scores[take["donor"]] if take else own["score"],
                "out": out,
                "archive": f"step-{own['step']}" + (f"-{n}" if (n := self.lineage.takes.get(m, 0)) else ""),
            }
        )
        if out:
            log.warning("PBT member %d failed round %d and no member can give it a checkpoint: it is out", m, r + 1)

    def _carry_out(self, m: int) -> None:
        row = self.lineage.decided[m]
        t = row["take_over"]
        try:
            copied = take_over(
                self.pbt.sweep_dir,
                m,
                t["donor"],
                self.step_of(row["round"]),
                donor_step=self.step_of(t["donor_round"]),
                archive=row["archive"],
            )
        except (PBTError, OSError) as exc:  # the donor dropped that checkpoint meanwhile (save_total_limit)
            log.warning("PBT member %d goes on from its own weights: %s", m, exc)
            self.lineage.write({"event": "carried_out", "member": m, "round": row["round"], "abandoned": str(exc)})
            return
        self.lineage.write({"event": "carried_out", "member": m, "round": row["round"], "bytes": copied})

    # -- what it reads -------------------------------------------------------------------------------------------
    def _checkpoint(self, m: int, r: int) -> Path:
        from ...run.resume import CHECKPOINTS

        return member_dir(self.pbt.sweep_dir, m) / CHECKPOINTS / f"checkpoint-{self.step_of(r)}"

    def _look(self, m: int, report: dict) -> dict | None:
        key = (m, report["round"])
        if key not in self.looks:  # a report of an earlier driver: its look as it was kept then
            self.looks[key] = self.kept_look(m, report["round"])
        return self.looks[key]
