"""A PBT written before PBT's one event vocabulary (tests/fixtures/pbt_before/, written by that code) reports as it
did and continues with today's driver: a synchronous one's ``round``/``decide``/``carried_out`` rows and an
asynchronous one's ``member_decide``/``member_carried_out`` are read as today's rows, the file never rewritten."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from grpo_sweep.run.files import read_jsonl
from grpo_sweep.search.pbt.lineage import Due, Lineage
from grpo_sweep.search.pbt.members import LINEAGE, member_dir
from grpo_sweep.search.pbt.plot import plot_pbt
from grpo_sweep.search.pbt.report import write_report
from grpo_sweep.search.pbt.settings import Param

from .test_pbt_async import LR, StandIn, driver

BEFORE = Path(__file__).parent / "fixtures" / "pbt_before"
WEIGHTS = [
    Param("reward_mix.format.weight", 0.1, 4.0, log=True),
    Param("reward_mix.correct.weight", 0.1, 4.0, log=True),
    Param("optimizer.learning_rate", 1e-4, 3e-3, log=True),
]


def _section(report: str, title: str) -> str:
    return report.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def _looks(sweep: Path) -> dict:
    return {int(p.stem.split("-")[1]): json.loads(p.read_text())["members"] for p in (sweep / "looks").glob("*.json")}


def _report_again(kind: str, params: list[Param], tmp_path: Path) -> tuple[str, str, Lineage]:
    sweep = tmp_path / kind
    shutil.copytree(BEFORE / kind, sweep)
    before = (sweep / "report.md").read_text()
    lineage = Lineage.read(sweep / LINEAGE)
    replay = re.search(r"```\npython launch.py (.*)\n```", before).group(1)
    head_to_head = _section(before, "Does the schedule beat a fixed mix?").strip().strip("`").strip()
    write_report(sweep, lineage, params, "val_accuracy", replay, head_to_head, _looks(sweep))
    plot_pbt(lineage, params, "val_accuracy", sweep / "pbt.png", _looks(sweep))
    assert (sweep / "pbt.png").read_bytes()[:4] == b"\x89PNG"
    assert (sweep / LINEAGE).read_bytes() == (BEFORE / kind / LINEAGE).read_bytes()  # never rewritten
    return before, (sweep / "report.md").read_text(), lineage


def test_a_synchronous_pbt_written_before_reports_as_it_did(tmp_path):
    before, now, lineage = _report_again("synchronous", WEIGHTS, tmp_path)
    for title in ("Rounds", "Lineage tree", "The best member"):
        table_or_tree = _section(before, title).split("\n- after round", 1)[0].split("\n**Exploits", 1)[0]
        assert table_or_tree in now, title
    exploits = re.search(r"\*\*Exploits against the look's noise:\*\* .*", before).group(0)
    assert exploits in now
    # each take-over as it was said then (who, whose checkpoint, its lead and moves), now on its member's report line
    for member, donor, rest in re.findall(
        r"- after round \d+: member (\d+) took member (\d+)'s checkpoint(.*)", before
    ):
        assert re.search(
            rf"- m{member} round \d+ \(step \d+\): [\d.]+; takes m{donor}'s checkpoint of step \d+" + re.escape(rest),
            now,
        )
    assert all(due is Due.FINISHED for due in lineage.due.values())
    assert lineage.best["member"] == 1 and lineage.test is not None


def test_an_asynchronous_pbt_written_before_reports_as_it_did(tmp_path):
    before, now, lineage = _report_again("asynchronous", [LR], tmp_path)
    assert _section(before, "Rounds").split("\nAsynchronous", 1)[0] in now
    for title in ("Lineage tree", "The best member"):
        assert _section(before, title) in now, title
    # the timeline, line by line, as it was told
    timeline = [line for line in _section(before, "Rounds").splitlines() if line.startswith("- m")]
    assert timeline and all(line in now for line in timeline)
    assert re.search(r"\*\*Exploits against the look's noise:\*\* .*", before).group(0) in now


def test_a_synchronous_pbt_killed_before_carrying_out_its_take_over_continues(tmp_path):
    """The real synchronous PBT's record cut where a kill would leave it: round 1 reported and decided, the take-over
    not carried out. Today's driver carries out that decision (member 0 becomes member 1 at step 3), trains round 2
    of every member and nothing of round 1 again, and finishes."""
    sweep = tmp_path / "pbt"
    sweep.mkdir()
    rows = read_jsonl(BEFORE / "synchronous" / LINEAGE)
    cut = next(i for i, row in enumerate(rows) if row["event"] == "carried_out")
    (sweep / LINEAGE).write_text("".join(json.dumps(row) + "\n" for row in rows[:cut]))
    lineage = Lineage.read(sweep / LINEAGE)
    assert lineage.due == {0: Due.CARRY, 1: Due.TRAIN, 2: Due.TRAIN}
    settings = lineage.settings
    cluster = StandIn(sweep, lineage, lambda m, r: 1, steps=settings.steps_per_round)
    for m in range(3):  # what round 1 left in each member's directory
        cluster.train(m, 0, lineage.report_of(m, 0)["values"])
    donor_rows = read_jsonl(member_dir(sweep, 1) / "metrics.jsonl")
    run = driver(sweep, lineage, settings, cluster)
    run.pbt.params[:] = WEIGHTS
    run.run()
    assert sorted((m, r) for m, r, _ in cluster.started) == [(0, 1), (1, 1), (2, 1)]
    assert all(due is Due.FINISHED for due in lineage.due.values()), lineage.due
    taken = [row for row in read_jsonl(member_dir(sweep, 0) / "metrics.jsonl") if row["step"] <= 3]
    assert taken == [row for row in donor_rows if row["step"] <= 3]
    [carried] = [row for row in read_jsonl(sweep / LINEAGE) if row["event"] == "carried_out"]
    assert (carried["member"], carried["round"]) == (0, 0) and carried["bytes"] > 0
    assert read_jsonl(sweep / LINEAGE)[:cut] == rows[:cut]  # the old rows stay as they were


def test_an_asynchronous_pbt_killed_before_continues(tmp_path):
    """An asynchronous PBT's driver killed at its sixth job (its directory as that code left it): today's driver
    finishes it, reporting from disk what was trained, training no reported round again."""
    sweep = tmp_path / "pbt"
    shutil.copytree(BEFORE / "asynchronous_killed", sweep)
    lineage = Lineage.read(sweep / LINEAGE)
    reported = {(row["member"], row["round"]) for row in lineage.reports}
    cluster = StandIn(sweep, lineage, lambda m, r: 1 + m)
    kept = json.loads((sweep / "standin_looks.json").read_text())
    cluster.looks = {tuple(map(int, key.split(","))): look for key, look in kept.items()}
    driver(sweep, lineage, lineage.settings, cluster).run()
    assert all(due is Due.FINISHED for due in lineage.due.values()), lineage.due
    went_back = {
        (row["member"], row["take_over"]["donor_round"] + 1) for row in lineage.decided.values() if row["take_over"]
    }
    again = {(m, r) for m, r, _ in cluster.started} & reported
    assert again <= went_back, again
    events = [row["event"] for row in read_jsonl(sweep / LINEAGE)]
    assert "member_decide" in events and events[-1] in ("report", "decide", "carried_out")
