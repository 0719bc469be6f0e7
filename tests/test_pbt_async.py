"""A PBT's rounds (search/pbt/rounds.py), asynchronous (hydra.sweeper.synchronous=false) and synchronous (the
same driver with a barrier), driven by a stand-in launcher whose jobs take uneven times (counted in the driver's
polls, so the tests do not depend on the machine's speed): a slow member holds no one, a member ranks against the
others' latest looks, takes its donor's latest look's checkpoint and goes on from the donor's step, a synchronous
round decides once all have reported, and a killed driver continues with nothing trained twice."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from grpo_sweep.run.files import read_jsonl
from grpo_sweep.search.pbt import rounds as driving
from grpo_sweep.search.pbt.decisions import start_row
from grpo_sweep.search.pbt.lineage import Due, Lineage
from grpo_sweep.search.pbt.members import LINEAGE, member_dir
from grpo_sweep.search.pbt.rounds import PBTRun, Rounds
from grpo_sweep.search.pbt.settings import Param, Settings, check_settings

from .conftest import launch_here

LR = Param("optimizer.learning_rate", 1e-4, 3e-3, log=True)
STEPS = 40
QUESTIONS = 64


def async_settings(population=4, rounds=3, **changes):
    raw = dict(
        population=population,
        rounds=rounds,
        steps_per_round=STEPS,
        exploit_fraction=0.25,
        perturb_factors=[0.8, 1.25],
        resample_probability=0.25,
        direction="maximize",
        seed=0,
        synchronous=False,
    )
    return check_settings(Settings(**{**raw, **changes}), population * STEPS)


def gain(values: dict) -> float:
    """What a round adds to a member's accuracy: most near lr 1e-3, in whole questions."""
    return max(0.0, 0.15 - 0.1 * abs(math.log10(values[LR.key]) + 3))


class StandIn:
    """A launcher whose job trains a member's round by writing what a paused run leaves (its checkpoint of the
    round's last step, its metrics with the validation there), once the driver has polled it ``ticks`` times."""

    def __init__(self, sweep: Path, lineage: Lineage, ticks, steps: int = STEPS):
        self.sweep, self.lineage, self.ticks, self.steps = sweep, lineage, ticks, steps
        self.started: list[tuple[int, int, float]] = []  # (member, round, lr)
        self.polls = 0
        self.looks: dict[tuple[int, int], dict] = {}

    def start_job(self, m: int, r: int):
        values = self.lineage.history(m, r)[-1]
        self.started.append((m, r, values[LR.key]))
        return _Job(self, m, r, values, self.ticks(m, r))

    def train(self, m: int, r: int, values: dict) -> None:
        run = member_dir(self.sweep, m)
        rows = list(read_jsonl(run / "metrics.jsonl")) or [{"step": 0, "val/accuracy": 0.25}]
        rows = [row for row in rows if row["step"] <= r * self.steps]
        before = [row["val/accuracy"] for row in rows if "val/accuracy" in row][-1]
        score = round(min(1.0, before + gain(values)) * QUESTIONS) / QUESTIONS
        step = (r + 1) * self.steps
        rows += [{"step": s, "reward": 0.1} for s in range(r * self.steps + 1, step + 1)]
        rows.append({"step": step, "val/accuracy": score})
        run.mkdir(parents=True, exist_ok=True)
        (run / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
        checkpoint = run / "checkpoints" / f"checkpoint-{step}"
        checkpoint.mkdir(parents=True, exist_ok=True)
        (checkpoint / "trainer_state.json").write_text(json.dumps({"global_step": step, "lr": values[LR.key]}))

    def look(self, m: int, r: int, score):
        if score is None:
            return None
        right = round(score * QUESTIONS)
        self.looks[(m, r)] = {f"q{i}": float(i < right) for i in range(QUESTIONS)}
        return self.looks[(m, r)]

    def kept_look(self, m: int, r: int):
        return self.looks.get((m, r))


class _Job:
    def __init__(self, cluster: StandIn, m: int, r: int, values: dict, ticks: int):
        self.cluster, self.m, self.r, self.values, self.left = cluster, m, r, values, ticks

    def done(self) -> bool:
        self.cluster.polls += 1
        if self.left > 0:
            self.left -= 1
            if self.left == 0:
                self.cluster.train(self.m, self.r, self.values)
        return self.left == 0

    def results(self):
        return [SimpleNamespace(return_value=0.0)]


def begin(sweep: Path, settings) -> Lineage:
    lineage = Lineage.read(sweep / LINEAGE)
    lineage.write(start_row("t", settings, [LR], "val_accuracy", 42))
    return lineage


def decided(lineage: Lineage, member: int) -> list[dict]:
    """``member``'s decisions, in order."""
    return [row for row in lineage.timeline if row["event"] == "decide" and row["member"] == member]


def driver(sweep: Path, lineage: Lineage, settings, cluster: StandIn, capacity: int | None = None) -> Rounds:
    return Rounds(
        PBTRun(sweep, lineage, [LR], settings, "val_accuracy", 42),
        cluster.start_job,
        cluster.look,
        cluster.kept_look,
        capacity or settings.population,
        poll_s=0,
    )


def test_a_slow_member_holds_no_one(tmp_path):
    """Member 3's jobs take ten times as long: the others report all their rounds before its first report, and
    whoever ranks while it trains is ranked without it (it has no look yet)."""
    settings = async_settings()
    lineage = begin(tmp_path, settings)
    cluster = StandIn(tmp_path, lineage, lambda m, r: 10 if m == 3 else 1)
    driver(tmp_path, lineage, settings, cluster).run()
    reports = [(row["member"], row["round"]) for row in lineage.reports]
    first_of_3 = reports.index((3, 0))
    assert {(m, 2) for m in (0, 1, 2)} <= set(reports[:first_of_3]), reports
    before = [row for row in lineage.timeline[: lineage.timeline.index(lineage.reports[first_of_3])]]
    assert all("3" not in row["ranked"] for row in before if row["event"] == "decide")
    assert all(due is Due.FINISHED for due in lineage.due.values())
    assert set(lineage.scores) == {0, 1, 2} and None not in lineage.scores[2]


def test_a_member_takes_its_donors_latest_look_and_goes_on_from_the_donors_step(tmp_path):
    """Member 0 is slow and its lr is far from the best: by the time its first round ends, a fast member is rounds
    ahead; member 0 takes that member's checkpoint of its latest look (a later step than its own), its metrics up
    to it, and trains on from there. A finished member is not ranked (Ray's quantiles)."""
    settings = async_settings(population=4, rounds=4, noise_guard=False)
    lineage = begin(tmp_path, settings)
    lineage.values[0][0][LR.key] = 1e-4  # member 0 learns least
    for m in (1, 2, 3):
        lineage.values[m][0][LR.key] = 1e-3
    cluster = StandIn(tmp_path, lineage, lambda m, r: 7 if (m, r) == (0, 0) else 2)
    driver(tmp_path, lineage, settings, cluster).run()
    first = decided(lineage, 0)[0]
    t = first["take_over"]
    assert first["round"] == 0 and t is not None and t["donor_round"] > 0, first
    assert str(t["donor"]) in first["ranked"] and first["ranked"][str(t["donor"])][0] == t["donor_round"]
    # member 0's next job started at its donor's step, not at its own
    assert (0, t["donor_round"] + 1) in [(m, r) for m, r, _ in cluster.started]
    superseded = member_dir(tmp_path, 0) / "superseded" / f"step-{STEPS}"
    assert json.loads((superseded / "superseded.json").read_text())["by_member"] == t["donor"]
    ranked_finished = [
        j
        for row in lineage.timeline
        if row["event"] == "decide"
        for j, (r, _) in row["ranked"].items()
        if int(j) != row["member"] and r == settings.rounds - 1
    ]
    assert ranked_finished == []  # a member whose last round is reported is never ranked
    history = lineage.history(0, settings.rounds - 1)
    assert history[: t["donor_round"] + 1] == lineage.values[t["donor"]][: t["donor_round"] + 1]


def test_on_a_one_at_a_time_launcher_a_donor_trains_before_its_recipient_goes_again(tmp_path, monkeypatch):
    """Member 0 always scores lowest and member 1 highest, one job at a time: member 0 takes member 1's round-0
    look and is as far behind as member 1; the one that has waited longer (member 1) starts first, so member 1
    moves on and the PBT ends, in few jobs, where starting member 0 first would copy the same look forever."""
    fixed = {0: 0.1, 1: 0.9, 2: 0.5}
    real = driving.round_score
    monkeypatch.setattr(
        driving,
        "round_score",
        lambda run_dir, step, metric: None if real(run_dir, step, metric) is None else fixed[int(Path(run_dir).name)],
    )
    settings = async_settings(population=3, rounds=3, noise_guard=False)
    lineage = begin(tmp_path, settings)
    cluster = StandIn(tmp_path, lineage, lambda m, r: 1)
    starts = cluster.start_job

    def bounded(m, r):
        assert len(cluster.started) < 30, cluster.started
        return starts(m, r)

    cluster.start_job = bounded
    driver(tmp_path, lineage, settings, cluster, capacity=1).run()
    assert all(due is Due.FINISHED for due in lineage.due.values()), lineage.due
    first = decided(lineage, 0)[1]
    assert first["take_over"]["donor"] == 1
    order = [(m, r) for m, r, _ in cluster.started]
    assert order.index((1, 1)) < order.index((0, 1), order.index((0, 1)) + 1)


def test_only_members_with_a_look_are_ranked_and_the_quantile_is_of_them(tmp_path):
    """Two members: the first report is ranked alone (no exploitation), as Ray's asynchronous PBT does."""
    settings = async_settings(population=2, rounds=2, exploit_fraction=0.5)
    lineage = begin(tmp_path, settings)
    cluster = StandIn(tmp_path, lineage, lambda m, r: 1 + 3 * m)
    driver(tmp_path, lineage, settings, cluster).run()
    first = decided(lineage, 0)[0]
    assert list(first["ranked"]) == ["0"] and first["take_over"] is None


class Killed(BaseException):
    """The driver's process killed (SIGKILL: nothing after it runs)."""


def test_a_killed_driver_continues_with_nothing_trained_twice(tmp_path, monkeypatch):
    """The driver dies three times: mid-loop with jobs in flight (one of which finishes while it is away), between
    a take-over's decision and carrying it out, and again; the same driver started anew from pbt.jsonl finishes
    the PBT, trains no round whose result is on disk again, and carries out every decision once."""
    settings = async_settings(noise_guard=False)
    lineage = begin(tmp_path, settings)
    cluster = StandIn(tmp_path, lineage, lambda m, r: 1 + m)
    starts = cluster.start_job

    def dies_at_the_sixth_start(m, r):
        if len(cluster.started) == 5:
            raise Killed
        return starts(m, r)

    cluster.start_job = dies_at_the_sixth_start
    with pytest.raises(Killed):
        driver(tmp_path, lineage, settings, cluster).run()
    in_flight = {(m, r) for m, r, _ in cluster.started} - {(row["member"], row["round"]) for row in lineage.reports}
    assert in_flight, "the test needs a job in flight at the kill"
    away = sorted(in_flight)[0]  # its job goes on without the driver and finishes (a SLURM job)
    cluster.train(*away, Lineage.read(tmp_path / LINEAGE).history(*away)[-1])
    started_before = list(cluster.started)

    real_take_over = driving.take_over
    calls = []

    def dies_before_copying(*args, **kwargs):
        calls.append(args)
        if len(calls) == 1:
            raise Killed
        return real_take_over(*args, **kwargs)

    monkeypatch.setattr(driving, "take_over", dies_before_copying)
    for _ in range(3):
        lineage = Lineage.read(tmp_path / LINEAGE)
        cluster = StandIn(tmp_path, lineage, lambda m, r: 1 + m)
        cluster.looks = {k: v for k, v in (cluster.looks or {}).items()}
        try:
            driver(tmp_path, lineage, settings, cluster).run()
            break
        except Killed:
            started_before += cluster.started
            continue
    started_before += cluster.started
    lineage = Lineage.read(tmp_path / LINEAGE)
    assert all(due is Due.FINISHED for due in lineage.due.values()), lineage.due
    [report] = [row for row in lineage.reports if (row["member"], row["round"]) == away]
    assert report["trained"] is False  # reported from its directory, not trained again
    assert started_before.count((*away, report["values"][LR.key])) == 1
    # every decision is carried out once: one carried-out row per take-over, the archive made once
    takes = [row for row in lineage.timeline if row["event"] == "decide" and row["take_over"]]
    carried = [row for row in lineage.timeline if row["event"] == "carried_out"]
    assert takes and len(carried) == len(takes)
    # a round is trained again only by a member that went back to it after a take-over
    trained = [(row["member"], row["round"]) for row in lineage.reports if row["trained"]]
    went_back = {(row["member"], row["take_over"]["donor_round"] + 1) for row in takes}
    repeats = {k for k in trained if trained.count(k) > 1}
    assert repeats <= went_back, (repeats, went_back)


@pytest.mark.parametrize("kept", [True, False])
def test_a_donor_whose_checkpoint_is_gone_is_not_ranked(tmp_path, kept):
    """A run that keeps few checkpoints (save_total_limit) may drop the one of its latest look while it trains on:
    it cannot give it, so member 0 ranks without it (and goes on) rather than decide a take-over it cannot do."""
    settings = async_settings(population=2, rounds=3, exploit_fraction=0.5, noise_guard=False)
    lineage = begin(tmp_path, settings)
    cluster = StandIn(tmp_path, lineage, lambda m, r: 1)
    rounds = driver(tmp_path, lineage, settings, cluster)
    for m, lr in ((1, 1e-3), (0, 1e-4)):
        lineage.values[m][0][LR.key] = lr
        cluster.train(m, 0, lineage.values[m][0])
        rounds._reported(m, 0, 1.0, trained=True) if m == 0 else None
        if m == 1:
            lineage.write({**_report(lineage, 1, 0), "event": "report"})
            rounds._decide(1)  # member 1 leads: it goes on, and trains its next round
            if not kept:
                import shutil

                shutil.rmtree(member_dir(tmp_path, 1) / "checkpoints")
    [decision] = decided(lineage, 0)
    if kept:
        assert decision["take_over"]["donor"] == 1 and decision["take_over"]["donor_round"] == 0
    else:
        assert decision["ranked"] == {"0": [0, decision["ranked"]["0"][1]]} and decision["take_over"] is None


def _report(lineage: Lineage, m: int, r: int) -> dict:
    from grpo_sweep.search.pbt.members import round_score

    step = (r + 1) * STEPS
    score = round_score(member_dir(lineage.path.parent, m), step, "val_accuracy")
    return {"member": m, "round": r, "step": step, "score": score, "start": 0.25, "values": lineage.values[m][r]}


@pytest.mark.slow  # a whole sweep and its continuation: the README's command keeps to 5 minutes
def test_asynchronous_rounds_on_the_local_launcher_take_over_and_continue(tmp_path, monkeypatch):
    """hydra.sweeper.synchronous=false through launch.py on hydra/launcher=local (one job at a time, each run
    before the next starts): the bottom member takes its donor's latest look's checkpoint and goes on from its
    step, the best member's test runs once, report.md tells it as it happened; the same command trains nothing."""
    from .test_pbt import PBT, _rows

    real, fixed = driving.round_score, {0: 0.1, 1: 0.9}
    monkeypatch.setattr(
        driving,
        "round_score",
        lambda run_dir, step, metric: (
            None if real(run_dir, step, metric) is None else fixed[int(Path(run_dir).name)] + step / 1000
        ),
    )
    args = [
        *(a for a in PBT if "population" not in a and "exploit_fraction" not in a),
        "hydra.sweeper.population=2",
        "hydra.sweeper.exploit_fraction=0.5",
        "hydra.sweeper.rounds=3",
        "hydra.sweeper.synchronous=false",
        "hydra.sweeper.noise_guard=false",
    ]
    out = launch_here(args, tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    sweep = tmp_path / "grpo" / "pbt" / "small"
    lineage = Lineage.read(sweep / LINEAGE)
    assert all(due is Due.FINISHED for due in lineage.due.values()), lineage.due
    first = next(row for row in lineage.timeline if row["event"] == "decide" and row["take_over"])
    t = first["take_over"]
    assert (first["member"], t["donor"]) == (0, 1)
    # the recipient went on from the donor's step: its steps up to it are the donor's
    donor_step = (t["donor_round"] + 1) * 2
    recipient = [r for r in _rows(member_dir(sweep, 0)) if "reward" in r and r["step"] <= donor_step]
    donor_rows = [r for r in _rows(member_dir(sweep, 1)) if "reward" in r and r["step"] <= donor_step]
    assert recipient == donor_rows
    assert [row["event"] for row in read_jsonl(sweep / LINEAGE)].count("test") == 1
    report = (sweep / "report.md").read_text()
    assert "Asynchronous (`hydra.sweeper.synchronous=false`)" in report and "takes m1's checkpoint" in report
    assert "asynchronous (hydra.sweeper.synchronous=false): each member was ranked as its own round ended" in out.stdout

    again = launch_here(args, tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert Lineage.read(sweep / LINEAGE).reports == lineage.reports  # nothing reported, so nothing trained, again


def test_synchronous_must_be_a_boolean():
    with pytest.raises(ValueError, match=r"hydra.sweeper.synchronous='no': must be true or false"):
        async_settings(synchronous="no")


# -- synchronous: the same driver with a barrier -------------------------------------------------------------
def _without_seconds(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in row.items() if k != "seconds"} for row in rows]


def test_a_synchronous_round_decides_once_every_member_has_reported_it(tmp_path):
    """Member 3 is four times slower: with synchronous=true no member decides a round before member 3 has reported
    it, every member trains each round once, and each round's decisions are the population ranked together (the
    same decide() over the round's reports as a whole)."""
    from grpo_sweep.search.pbt.decisions import decide

    settings = async_settings(synchronous=True, noise_guard=False)
    lineage = begin(tmp_path, settings)
    cluster = StandIn(tmp_path, lineage, lambda m, r: 1 + 3 * (m == 3))
    driver(tmp_path, lineage, settings, cluster).run()
    assert all(due is Due.FINISHED for due in lineage.due.values()), lineage.due
    rows = lineage.timeline
    for r in range(settings.rounds - 1):
        last_report = max(i for i, row in enumerate(rows) if row["event"] == "report" and row["round"] == r)
        first_decision = min(i for i, row in enumerate(rows) if row["event"] == "decide" and row["round"] == r)
        assert first_decision > last_report, r  # the barrier: no decision before the round's last report
        reports = [lineage.report_of(m, r) for m in range(4)]
        looks = [cluster.looks[(m, r)] for m in range(4)]
        expected, _ = decide([x["score"] for x in reports], [x["values"] for x in reports], [LR], settings, r, looks)
        made = [row["take_over"] for row in rows if row["event"] == "decide" and row["round"] == r and row["take_over"]]
        assert [{k: v for k, v in t.items() if k != "donor_round"} for t in made] == expected
        assert all(t["donor_round"] == r for t in made)
    assert sorted((m, r) for m, r, _ in cluster.started) == [(m, r) for m in range(4) for r in range(3)]


def test_a_synchronous_round_half_decided_at_a_kill_is_completed_with_the_same_decisions(tmp_path, monkeypatch):
    """The driver is killed after writing the second of round 1's four decisions: the same driver started anew
    writes the other two as the first would have (the round's draws), carries out the take-overs, and the PBT's
    record is the one a driver never killed writes."""
    settings = async_settings(synchronous=True, noise_guard=False)
    whole = tmp_path / "whole"
    whole.mkdir()
    lineage = begin(whole, settings)
    driver(whole, lineage, settings, StandIn(whole, lineage, lambda m, r: 1 + m)).run()

    killed = tmp_path / "killed"
    killed.mkdir()
    lineage = begin(killed, settings)
    write, decisions = Lineage.write, []

    def dies_at_the_second_decision(self, row):
        write(self, row)
        if row["event"] == "decide":
            decisions.append(row)
            if len(decisions) == 2:
                raise Killed

    monkeypatch.setattr(Lineage, "write", dies_at_the_second_decision)
    cluster = StandIn(killed, lineage, lambda m, r: 1 + m)
    with pytest.raises(Killed):
        driver(killed, lineage, settings, cluster).run()
    monkeypatch.setattr(Lineage, "write", write)
    lineage = Lineage.read(killed / LINEAGE)
    assert [due for due in lineage.due.values()].count(Due.DECIDE) == 2
    again = StandIn(killed, lineage, lambda m, r: 1 + m)
    again.looks = dict(cluster.looks)
    driver(killed, lineage, settings, again).run()
    assert not [(m, r) for m, r, _ in again.started if r == 0]  # round 1 is not trained again
    assert _without_seconds(read_jsonl(killed / LINEAGE)) == _without_seconds(read_jsonl(whole / LINEAGE))
