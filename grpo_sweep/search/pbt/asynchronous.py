"""Asynchronous rounds (``hydra.sweeper.synchronous=false``), as Ray Tune's PBT runs by default: a member decides as
soon as its own round ends, against the other members' latest looks, and goes on at once, so a slow node holds
no one but its own member.

The decision is ``population.decide`` for that member alone: ranked among the members that have a look of the
weights they hold now and a round left to train (a finished member is not ranked, nor one that took over another
since its look: Ray's ``_quantiles``), the bottom quantile of those takes over one of the top, under the same noise
guard. The recipient takes its donor's latest look's checkpoint and goes on from the donor's step, as Ray's
exploit does; it may then train a round again that it had trained before (its own record of it kept, superseded).

Every report and decision is a row of pbt.jsonl (``report``, ``member_decide``, ``member_carried_out``) written
before what follows from it, so the same command continues a driver that was killed: what a member trained while
the driver was gone is reported from its directory, not trained again, and a job SLURM still runs is waited for.
No torch here (the login node runs this).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from .population import (
    Lineage,
    Param,
    PBTError,
    Settings,
    decide,
    logged_score,
    member_dir,
    round_score,
    take_over,
)

log = logging.getLogger(__name__)

# start_job(member, round) -> the launcher's started batch of that member's round (``done()``, ``results()``)
StartJob = Callable[[int, int], Any]
# look(member, round, score) -> the member's per-question values of its ranking look at the round's end (kept, as
# the round's looks file), or None; kept_look(member, round) -> the look kept then
Look = Callable[[int, int, "float | None"], "dict | None"]
KeptLook = Callable[[int, int], "dict | None"]


class AsyncRounds:
    """The members' rounds, each member on its own clock, at most ``capacity`` jobs in flight (the launcher's
    ``concurrent_runs``); the member furthest behind starts first (``_queue``)."""

    def __init__(
        self,
        sweep_dir: Path,
        lineage: Lineage,
        params: Sequence[Param],
        settings: Settings,
        metric: str,
        start_job: StartJob,
        look: Look,
        kept_look: KeptLook,
        capacity: int,
        propose_for: Callable[[int], Any] | None = None,
        poll_s: float = 0.5,
    ) -> None:
        self.sweep_dir, self.lineage, self.params, self.settings = Path(sweep_dir), lineage, list(params), settings
        self.metric, self.start_job, self.capacity = metric, start_job, max(1, capacity)
        self.look, self.kept_look = look, kept_look
        self.propose_for, self.poll_s = propose_for, poll_s
        self.looks: dict[tuple[int, int], dict | None] = {}  # (member, round) -> its look, as reported
        self.trained = 0  # jobs this driver started

    def step_of(self, round_: int) -> int:
        return (round_ + 1) * self.settings.steps_per_round

    # -- the loop ------------------------------------------------------------------------------------------------
    def run(self) -> None:
        for m in range(self.settings.population):  # a killed driver's pending reports and decisions first
            self._settle(m)
        in_flight: dict[int, tuple[Any, int, float]] = {}
        while True:
            ready = []
            if len(in_flight) < self.capacity:  # else the poll loop reads no timeline
                ready = self._queue(m for m, due in self.lineage.due.items() if due == "train" and m not in in_flight)
            for m in ready:
                if len(in_flight) >= self.capacity:
                    break
                r = self.lineage.next_round(m)
                if round_score(member_dir(self.sweep_dir, m), self.step_of(r), self.metric) is not None:
                    self._reported(m, r, None, trained=False)  # trained while the driver was gone
                    continue
                log.info("PBT member %d trains round %d to step %d", m, r + 1, self.step_of(r))
                in_flight[m] = (self.start_job(m, r), r, time.time())
                self.trained += 1
            if not in_flight:
                if any(due == "train" for due in self.lineage.due.values()):
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
        """What a killed driver left half done for member ``m``: its decision, or carrying it out."""
        if self.lineage.due.get(m) == "decide":
            self._decide(m)
        if self.lineage.due.get(m) == "carry":
            self._carry_out(m)

    # -- a member's round ended ----------------------------------------------------------------------------------
    def _reported(self, m: int, r: int, seconds: float | None, trained: bool) -> None:
        step = self.step_of(r)
        run_dir = member_dir(self.sweep_dir, m)
        score = round_score(run_dir, step, self.metric)
        start = logged_score(run_dir, 0, self.metric) if r == 0 else self.lineage.from_score.get(m)
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
        log.info("PBT member %d, round %d: %s %s", m, r + 1, self.metric, "failed" if score is None else f"{score:.3f}")
        self._settle(m)

    def _decide(self, m: int) -> None:
        report = self.lineage.current[m]
        r = report["round"]
        population = range(self.settings.population)
        # ranked: a look of the weights it holds, and a round left (the member deciding is ranked, failed or not)
        rankable = {
            j: row for j, row in self.lineage.current.items() if j == m or self.lineage.due.get(j) not in ("finished",)
        }
        # a donor's checkpoint of its look must be there to take (a run that keeps few checkpoints may have dropped it)
        rankable = {j: row for j, row in rankable.items() if j == m or self._checkpoint(j, row["round"]).is_dir()}
        scores = [rankable[j]["score"] if j in rankable else None for j in population]
        # a donor's values of its look; the others' as they train now (what PB2 spreads its pick away from)
        values = [self.lineage.values[j][rankable[j]["round"] if j in rankable else -1] for j in population]
        looks = [self._look(j, rankable[j]) if j in rankable else None for j in population]
        propose = self.propose_for(r) if self.propose_for is not None else None
        take_overs, held_back = decide(scores, values, self.params, self.settings, r, looks, propose, only=m)
        take = None
        if take_overs:
            [t] = take_overs
            take = {**t, "donor_round": rankable[t["donor"]]["round"]}
        from_score = rankable[take["donor"]]["score"] if take else report["score"]
        self.lineage.write(
            {
                "event": "member_decide",
                "member": m,
                "round": r,
                "ranked": {str(j): [row["round"], row["score"]] for j, row in sorted(rankable.items())},
                "take_over": take,
                "held_back": held_back[0] if held_back else None,
                "from_score": from_score,
                "out": report["score"] is None and take is None,
                "archive": f"step-{report['step']}" + (f"-{n}" if (n := self.lineage.takes.get(m, 0)) else ""),
            }
        )
        if report["score"] is None and take is None:
            log.warning("PBT member %d failed round %d and no member can give it a checkpoint: it is out", m, r + 1)

    def _carry_out(self, m: int) -> None:
        row = self.lineage.decided[m]
        t = row["take_over"]
        try:
            copied = take_over(
                self.sweep_dir,
                m,
                t["donor"],
                self.step_of(row["round"]),
                donor_step=self.step_of(t["donor_round"]),
                archive=row["archive"],
            )
        except (PBTError, OSError) as exc:  # the donor dropped that checkpoint meanwhile (save_total_limit)
            log.warning("PBT member %d goes on from its own weights: %s", m, exc)
            self.lineage.write(
                {"event": "member_carried_out", "member": m, "round": row["round"], "abandoned": str(exc)}
            )
            return
        self.lineage.write({"event": "member_carried_out", "member": m, "round": row["round"], "bytes": copied})

    # -- what it reads -------------------------------------------------------------------------------------------
    def _checkpoint(self, m: int, r: int) -> Path:
        from ...run.resume import CHECKPOINTS

        return member_dir(self.sweep_dir, m) / CHECKPOINTS / f"checkpoint-{self.step_of(r)}"

    def _look(self, m: int, report: dict) -> dict | None:
        key = (m, report["round"])
        if key not in self.looks:  # a report of an earlier driver: its look as it was kept then
            self.looks[key] = self.kept_look(m, report["round"])
        return self.looks[key]
