"""Scheduled reward weights (``reward_mix.<term>.schedule``, grpo_sweep/rewards/schedule.py): the curves, the gate's
one-line refusals, and a run whose logged reward is the weighted sum under the weights it logs step by step, which
a resumed run continues."""

from __future__ import annotations

import json
import shutil

import pytest

from grpo_sweep.rewards import RewardError
from grpo_sweep.rewards.mix import check_mix
from grpo_sweep.rewards.schedule import parse_schedule, progress_of

from .conftest import FAST, launch_here

MIX = {"format": {"weight": 1.0}, "correct": {"weight": 2.0}}


def weights(raw: dict, at: list[float], weight: float = 1.0) -> list[float]:
    schedule = parse_schedule("format", weight, raw)
    return [round(schedule.weight(p), 6) for p in at]


@pytest.mark.parametrize(
    "raw, expected",
    [
        ({"kind": "linear", "end": 0}, [1.0, 0.75, 0.5, 0.25, 0.0]),
        ({"kind": "linear", "end": 3, "start_at": 0.25, "until": 0.75}, [1.0, 1.0, 2.0, 3.0, 3.0]),
        ({"kind": "cosine", "end": 0}, [1.0, 0.853553, 0.5, 0.146447, 0.0]),
        ({"kind": "step", "at": [0.5], "values": [0.25]}, [1.0, 1.0, 0.25, 0.25, 0.25]),
        ({"kind": "step", "at": [0, 0.6], "values": [2, 0]}, [2.0, 2.0, 2.0, 0.0, 0.0]),
        ({"kind": "piecewise", "points": [[0, 1.0], [0.5, 0.5], [1, 0]]}, [1.0, 0.75, 0.5, 0.25, 0.0]),
        # the first point's weight before it (numpy.interp), not reward_mix.<term>.weight
        ({"kind": "piecewise", "points": [[0.5, 0], [1, 2]]}, [0.0, 0.0, 0.0, 1.0, 2.0]),
        ({"kind": "piecewise", "points": [[0.25, 2], [0.5, 1]]}, [2.0, 2.0, 1.0, 1.0, 1.0]),
    ],
)
def test_each_kind_of_schedule(raw, expected):
    assert weights(raw, [0, 0.25, 0.5, 0.75, 1]) == expected


def test_progress_is_0_at_the_first_step_and_1_at_the_last():
    assert [progress_of(s, 5) for s in range(5)] == [0, 0.25, 0.5, 0.75, 1]
    assert progress_of(0, 1) == 0 and progress_of(9, 5) == 1


# (the schedule, or the whole mix, and the line the gate says)
BAD = [
    ({"kind": "expo", "end": 0}, "reward_mix.format.schedule.kind='expo': use one of linear, cosine, step, piecewise"),
    (
        {"kind": "linear"},
        "reward_mix.format.schedule.end is missing: the weight kind=linear ends at (it starts at "
        "reward_mix.format.weight=1)",
    ),
    ({"kind": "linear", "end": -1}, "reward_mix.format.schedule.end=-1: must be a weight >= 0"),
    (
        {"kind": "linear", "end": 0, "until": 1.5},
        "reward_mix.format.schedule.until=1.5: must be progress in [0, 1] (a fraction of the run)",
    ),
    (
        {"kind": "cosine", "end": 0, "start_at": 0.5, "until": 0.5},
        "reward_mix.format.schedule.until=0.5 is not after start_at=0.5: progress must increase",
    ),
    (
        {"kind": "linear", "end": 0, "points": [[0, 1]]},
        "reward_mix.format.schedule.points is for kind=piecewise; kind=linear takes end, start_at, until",
    ),
    (
        {"kind": "step", "at": [0.5, 0.2], "values": [1, 0]},
        "reward_mix.format.schedule.at=[0.5, 0.2]: progress must increase (0.2 after 0.5)",
    ),
    (
        {"kind": "step", "at": [0.5], "values": [1, 0]},
        "reward_mix.format.schedule: at has 1 progress points and values 2 weights; give one weight for each point",
    ),
    (
        {"kind": "piecewise", "points": [0.3, 0.5]},
        "reward_mix.format.schedule.points[0]=0.3: give a pair [progress, weight], e.g. [0.3, 0.5]",
    ),
    (
        {"kind": "piecewise", "points": [[0, 1], [0.5, "half"]]},
        "reward_mix.format.schedule.points[1][1]='half': must be a finite number",
    ),
    (
        {"kind": "linear", "end": 0, "every": 3},
        "reward_mix.format.schedule.every: unknown key; a schedule takes kind, "
        "end, start_at, until, at, values, points",
    ),
    ("linear", "reward_mix.format.schedule='linear': give a mapping such as {kind: linear, end: 0}"),
]


@pytest.mark.parametrize("raw, line", BAD, ids=[line.split(":")[0] for _, line in BAD])
def test_a_bad_schedule_is_one_line_naming_the_value(raw, line):
    with pytest.raises(RewardError) as err:
        check_mix({**MIX, "format": {"weight": 1.0, "schedule": raw}})
    assert str(err.value) == line


def test_a_schedule_on_a_term_the_mix_lacks_or_one_that_zeroes_every_weight_is_refused():
    with pytest.raises(
        RewardError,
        match=r"^reward_mix\.formt\.schedule: the mix has no term 'formt' \(its terms: "
        r"format, correct\); a schedule changes the weight of a term the mix has$",
    ):
        check_mix({**MIX, "formt": {"schedule": {"kind": "linear", "end": 0}}})
    both = {
        "format": {"weight": 1.0, "schedule": {"kind": "step", "at": [0.5], "values": [0]}},
        "correct": {"weight": 2.0, "schedule": {"kind": "linear", "end": 0, "until": 0.5}},
    }
    with pytest.raises(
        RewardError,
        match=r"^reward_mix: every weight is 0 at progress 0\.5 of the run \(the schedules "
        r"of format, correct\), so those steps learn nothing; keep one weight > 0 "
        r"throughout$",
    ):
        check_mix(both)
    # zero at the end only for one term, the other still pays: fine
    check_mix({**MIX, "format": {"weight": 1.0, "schedule": {"kind": "linear", "end": 0}}})


def test_the_gate_refuses_a_bad_schedule_before_anything_runs(tmp_path):
    out = launch_here(
        [
            "reward_mix=format_correct",
            "++reward_mix.format.schedule.kind=linear",
            "++reward_mix.format.schedule.end=0",
            "++reward_mix.format.schedule.until=2",
            *FAST,
        ],
        tmp_path,
    )
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert out.returncode != 0 and lines == [
        "grpo-sweep: reward_mix.format.schedule.until=2: must be progress in [0, 1] (a fraction of the run)"
    ], out.stderr
    assert not (tmp_path / "grpo").exists()


# the main job's mix with xmlcount phased in from 0 to 1; the shipped warm start writes the tags (xmlcount ~1) and
# answers some questions right: every step's reward has both terms in it
SCHEDULED = [
    "++reward_mix.xmlcount.schedule.kind=linear",
    "++reward_mix.xmlcount.schedule.end=1",
    "trainer.max_steps=6",
    "trainer.save_steps=3",
    *[o for o in FAST if not o.startswith(("model.tiny.warm_start", "trainer.max_steps", "trainer.save_steps"))],
]


def _train_rows(run_dir) -> list[dict]:
    return [row for row in map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines()) if "reward" in row]


def test_a_scheduled_run_scores_every_step_with_the_weights_it_logs_and_a_resume_continues_them(tmp_path):
    run_dir = tmp_path / "run"
    out = launch_here([*SCHEDULED, f"hydra.run.dir={run_dir}"], tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = _train_rows(run_dir)
    assert [r["reward_weights/xmlcount"] for r in rows] == pytest.approx([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
    assert [r["reward_weights/correct"] for r in rows] == [1.0] * 6
    for r in rows:  # TRL weighted this step's rewards with the weights logged for it
        assert r["reward"] == pytest.approx(
            r["reward_weights/xmlcount"] * r["rewards/xmlcount/mean"] + r["rewards/correct/mean"], abs=1e-6
        ), r
    assert all(r["rewards/xmlcount/mean"] > 0.5 for r in rows)  # so the check above can fail
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["reward_schedule"] == {"xmlcount": {"kind": "linear", "knots": [[0.0, 0.0], [1.0, 1.0]]}}

    # a kill after step 3's checkpoint: the same command resumes there and the schedule goes on from step 4
    shutil.rmtree(run_dir / "checkpoints" / "checkpoint-6")
    (run_dir / "summary.json").unlink()
    again = launch_here([*SCHEDULED, f"hydra.run.dir={run_dir}"], tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads((run_dir / "summary.json").read_text())["resumed_from_steps"] == [3]
    resumed = _train_rows(run_dir)
    assert [r["step"] for r in resumed] == [1, 2, 3, 4, 5, 6]
    assert [r["reward_weights/xmlcount"] for r in resumed] == pytest.approx([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
    assert resumed[:3] == rows[:3]  # the steps before the checkpoint are the first attempt's


def test_the_schedule_callback_adds_the_weights_to_the_row_and_tells_the_tracker():
    from types import SimpleNamespace

    from grpo_sweep.rewards.mix import scheduled_weights
    from grpo_sweep.run.train import RewardSchedule

    class Tracker:
        rows: list = []

        def log_metrics(self, row):
            self.rows.append(row)

    class Trainer:
        reward_weights = [1.0, 2.0]

    tracker = Tracker()
    schedule = RewardSchedule(
        *scheduled_weights({**MIX, "format": {"weight": 1.0, "schedule": {"kind": "linear", "end": 0}}}), tracker
    )
    schedule.bind(Trainer())
    state = SimpleNamespace(global_step=2, max_steps=5, is_world_process_zero=True)
    schedule.on_step_begin(None, state, None)
    assert Trainer.reward_weights == [0.5, 2.0]
    logs = {"reward": 1.0}
    schedule.on_log(None, SimpleNamespace(global_step=3, is_world_process_zero=True), None, logs=logs)
    assert logs == {"reward": 1.0, "reward_weights/format": 0.5, "reward_weights/correct": 2.0}
    assert tracker.rows == [{"step": 3, "reward_weights/format": 0.5, "reward_weights/correct": 2.0}]
    schedule.on_log(None, state, None, logs={"val/accuracy": 0.5})  # an evaluation row: no weights
    assert len(tracker.rows) == 1 and schedule.shown() == {"w_format": "0.50"}


@pytest.mark.slow  # a whole grid and a study: the README's command keeps to 5 minutes
def test_a_grid_and_a_study_search_a_schedules_parameters(tmp_path):
    fast = [o for o in FAST if not o.startswith("model.tiny.warm_start")]
    (tmp_path / "grid").mkdir()
    (tmp_path / "study").mkdir()
    out = launch_here(
        ["-m", "reward_mix=format_then_correct", "reward_mix.format.schedule.until=0.3,0.6", *fast], tmp_path / "grid"
    )
    assert out.returncode == 0, out.stderr[-3000:]
    untils = sorted(
        json.loads(p.read_text())["reward_schedule"]["format"]["knots"][1][0]
        for p in (tmp_path / "grid").glob("grpo/multiruns/*/*/summary.json")
    )
    assert untils == [0.3, 0.6]
    out = launch_here(["-m", "hparams_search=reward_schedule", "hydra.sweeper.n_trials=1", *fast], tmp_path / "study")
    assert out.returncode == 0, out.stderr[-3000:]
    [summary] = [
        json.loads(p.read_text()) for p in (tmp_path / "study").glob("grpo/studies/reward_schedule/**/summary.json")
    ]
    assert summary["status"] == "completed" and set(summary["reward_schedule"]) == {"format", "correct"}
