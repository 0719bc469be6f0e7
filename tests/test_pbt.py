"""Population-based training over reward weights and the learning rate (search/pbt/)
and what it stands on: a run that pauses and goes on (trainer.pause_at_step), a resume that takes the config's
learning rate, a run whose last step is in its checkpoint that does not train again."""

from __future__ import annotations

import json
import random
import shlex
import statistics
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from grpo_sweep.rewards.schedule import parse_schedule, progress_of
from grpo_sweep.search.pbt.decisions import decide, explore, initial_population, ranked, ranking_gap
from grpo_sweep.search.pbt.lineage import Due, Lineage
from grpo_sweep.search.pbt.members import BEST_SCHEDULE, LINEAGE, member_dir, round_score, take_over
from grpo_sweep.search.pbt.overrides import member_overrides, weight_schedule
from grpo_sweep.search.pbt.rounds import PBTRun
from grpo_sweep.search.pbt.settings import Param, PBTError, Settings, check_settings, parse_params

from .conftest import FAST, ROOT, kill_pbt_driver_when, launch_here

MIX = {
    "format": {"weight": 1.0},
    "correct": {"weight": 2.0},
    "timed": {"weight": 1.0, "schedule": {"kind": "linear", "end": 0}},
}
# the parts of a run's config parse_params reads (the composed config in the sweeper)
CONFIG = {
    "lora": {"r": 16},
    "optimizer": {"learning_rate": 3e-4, "max_grad_norm": 1.0, "weight_decay": 0.0},
    "trainer": {"beta": 0.0, "num_generations": 4, "max_completion_length": 32, "loss_type": "dapo"},
}
SETTINGS = dict(
    population=4,
    rounds=3,
    steps_per_round=None,
    exploit_fraction=0.25,
    perturb_factors=[0.8, 1.25],
    resample_probability=0.25,
    direction="maximize",
    seed=0,
)


def settings(**changes):
    return check_settings(Settings(**{**SETTINGS, **changes}), 120)


@pytest.mark.parametrize(
    "params, message",
    [
        ({}, "hydra.sweeper.params is empty"),
        (
            {"lora.r": {"low": 8, "high": 32}},
            "hydra.sweeper.params.lora.r: PBT cannot move lora.r between rounds (the adapter's shape",
        ),
        (
            {"trainer.num_generations": {"low": 2, "high": 8}},
            "PBT cannot move trainer.num_generations between rounds (the trainer's batch shape",
        ),
        ({"optimizer.weight_decay": {"low": 0, "high": 0.1}}, "the optimizer's and the scheduler's state"),
        ({"trainer.nope": {"low": 0, "high": 1}}, "params.trainer.nope: trainer.nope is not a config key"),
        ({"trainer.loss_type": {"low": 0, "high": 1}}, "trainer.loss_type='dapo' is not a number"),
        ({"trainer.max_completion_length": {"low": 1.2, "high": 1.8}}, "is a whole number and [1.2, 1.8] holds none"),
        ({"reward_mix.length.weight": {"low": 0.1, "high": 1}}, "the mix has no term 'length'"),
        ({"reward_mix.timed.weight": {"low": 0.1, "high": 1}}, "reward_mix.timed has a schedule of its own"),
        ({"reward_mix.format.weight": [0.1, 1]}, "give {low: <number>, high: <number>}"),
        ({"reward_mix.format.weight": {"low": 0.1, "hi": 1}}, "give {low: <number>, high: <number>}"),
        ({"reward_mix.format.weight": {"low": 1, "high": 1}}, "low=1 must be below high=1"),
        (
            {"reward_mix.format.weight": {"low": "a", "high": 1}},
            "hydra.sweeper.params.reward_mix.format.weight.low='a'",
        ),
        ({"reward_mix.format.weight": {"low": 0, "high": 1, "log": True}}, ".low=0: must be > 0 (a log scale)"),
        ({"reward_mix.format.weight": {"low": -1, "high": 1}}, ".low=-1: a weight must be >= 0"),
        ({"optimizer.learning_rate": {"low": 0, "high": 1e-3}}, ".low=0: must be > 0 (a learning rate)"),
        ({"optimizer.learning_rate": {"low": 1e-4, "high": 1e-3, "log": "yes"}}, ".log='yes': must be true or false"),
    ],
)
def test_bad_params_are_refused_naming_the_key(params, message):
    with pytest.raises(PBTError, match=None) as caught:
        parse_params(params, MIX, CONFIG)
    assert message in str(caught.value)


def test_any_number_a_round_can_change_moves_an_int_as_an_int():
    params = parse_params(
        {
            "trainer.beta": {"low": 0.0, "high": 0.1},
            "trainer.max_completion_length": {"low": 16, "high": 64},
            "optimizer.max_grad_norm": {"low": 0.1, "high": 1},
        },
        MIX,
        CONFIG,
    )
    assert [(p.key, p.integer) for p in params] == [
        ("trainer.beta", False),
        ("trainer.max_completion_length", True),
        ("optimizer.max_grad_norm", False),
    ]
    length = params[1]
    rng = random.Random(0)
    assert all(float(length.draw(rng)).is_integer() for _ in range(50))
    assert length.override(31.6) == "trainer.max_completion_length=32"
    assert params[0].override(0.05) == "trainer.beta=0.05"


@pytest.mark.parametrize(
    "change, message",
    [
        ({"population": 1}, "hydra.sweeper.population=1: must be a whole number >= 2"),
        ({"rounds": 0}, "hydra.sweeper.rounds=0"),
        ({"rounds": 7}, "hydra.sweeper.rounds=7 does not divide trainer.max_steps=120"),
        ({"steps_per_round": 0}, "hydra.sweeper.steps_per_round=0"),
        ({"exploit_fraction": 0.6}, "hydra.sweeper.exploit_fraction=0.6: must be in [0, 0.5]"),
        ({"exploit_fraction": -0.1}, "hydra.sweeper.exploit_fraction=-0.1: must be in [0, 0.5]"),
        ({"noise_z": -1}, "hydra.sweeper.noise_z=-1: must be >= 0"),
        ({"noise_guard": "yes"}, "hydra.sweeper.noise_guard='yes': must be true or false"),
        ({"explore": "bayes"}, "hydra.sweeper.explore='bayes'; use one of: perturb, pb2"),
        ({"perturb_factors": []}, "hydra.sweeper.perturb_factors is empty"),
        ({"perturb_factors": [0.8, -1]}, "each must be > 0"),
        ({"resample_probability": 2}, "hydra.sweeper.resample_probability=2: must be in [0, 1]"),
        ({"direction": "up"}, "hydra.sweeper.direction='up'"),
    ],
)
def test_bad_settings_are_refused_naming_the_value(change, message):
    with pytest.raises(PBTError) as caught:
        settings(**change)
    assert message in str(caught.value)


def test_rounds_divide_the_run_or_set_its_length():
    assert settings().steps_per_round == 40 and settings().max_steps == 120
    assert settings(steps_per_round=25).max_steps == 75  # trainer.max_steps becomes rounds x steps_per_round


@pytest.mark.parametrize(
    "population, fraction, exploited",
    # Ray Tune's rounding: up (ceil), at most half the population; 0 exploits nothing
    [(8, 0.25, 2), (3, 0.25, 1), (4, 0.3, 2), (3, 0.34, 1), (5, 0.5, 2), (30, 0.1, 3), (10, 0.1, 1), (4, 0.0, 0)],
)
def test_the_bottom_quantile_rounds_up_to_at_most_half_the_population(population, fraction, exploited):
    assert settings(population=population, exploit_fraction=fraction).exploited == exploited


def test_an_exploit_fraction_of_0_takes_nothing_over():
    s = settings(population=4, exploit_fraction=0.0)
    values = [{"optimizer.learning_rate": 1e-3}] * 4
    assert decide([0.9, None, 0.1, 0.5], values, [Param("optimizer.learning_rate", 1e-4, 1e-2)], s, 0) == ([], [])


def test_the_bottom_and_every_failed_member_take_over_from_the_top():
    s = settings(population=6, exploit_fraction=1 / 3)
    values = [{"optimizer.learning_rate": 1e-3 * (m + 1)} for m in range(6)]
    params = [Param("optimizer.learning_rate", 1e-4, 1e-2, log=True)]
    scores = [0.5, 0.9, 0.1, None, 0.7, 0.3]
    assert ranked(scores, "maximize") == [1, 4, 0, 5, 2, 3] and ranked(scores, "minimize")[:2] == [2, 5]
    moves, held = decide(scores, values, params, s, round_=0)
    assert held == []  # no per-question outcomes: nothing to weigh a lead against, so none is held back
    assert [t["member"] for t in moves] == [3, 5, 2]  # the failed one, then the bottom two of those with a score
    assert {t["donor"] for t in moves} <= {1, 4}
    for t in moves:
        before = values[t["donor"]]["optimizer.learning_rate"]
        after = t["values"]["optimizer.learning_rate"]
        how = t["how"]["optimizer.learning_rate"]
        assert how == "resampled" or after == pytest.approx(before * float(how[1:]))
    assert (moves, held) == decide(scores, values, params, s, round_=0)  # the same draws: a restarted driver agrees
    assert moves != decide(scores, values, params, s, round_=1)[0]
    assert decide([None] * 6, values, params, s, 0) == ([], [])
    # a tie with the donors is no evidence: only the failed member is replaced
    assert [t["member"] for t in decide([0.0, 0.0, 0.0, None, 0.0, 0.0], values, params, s, 0)[0]] == [3]
    assert [t["member"] for t in decide([0.5, 0.9, 0.9, 0.1, 0.9, 0.3], values, params, s, 0)[0]] == [5, 3]


def test_pb2_proposes_from_every_rounds_improvement_and_spreads_over_what_goes_on(tmp_path):
    from grpo_sweep.search.pbt.sweeper import _pb2

    s = settings(population=4, explore="pb2")
    lr = Param("optimizer.learning_rate", 1e-4, 1e-2, log=True)
    first = [{lr.key: v} for v in (1e-4, 1e-3, 3e-3, 1e-2)]
    rows = synchronous_rows(first, [([0.2, 0.6, 0.5, None], []), ([None] * 4, [])])[:5]
    for row in rows[1:]:
        row["start"] = 0.1
    (tmp_path / LINEAGE).write_text("".join(json.dumps(r) + "\n" for r in rows))
    lineage = Lineage.read(tmp_path / LINEAGE)
    seen = []

    def spy(donor, going_on, rng):
        seen.append([dict(v) for v in going_on])
        return propose(donor, going_on, rng)

    propose = _pb2(PBTRun(tmp_path, lineage, [lr], s, "val_accuracy", 42), 0)
    moves, _ = decide(lineage.scores[0], first, [lr], s, 0, None, spy)
    # the failed member 3 and the bottom member 0 both move; the second proposal sees the first as going on
    assert [t["member"] for t in moves] == [3, 0]
    assert all(t["how"][lr.key].startswith("pb2 (") and 1e-4 <= t["values"][lr.key] <= 1e-2 for t in moves)
    assert len(seen[1]) == len(seen[0]) + 1 and seen[1][-1] == moves[0]["values"]


def _look(correct: int, n: int = 64, offset: int = 0) -> dict:
    """A member's per-question look: questions offset..offset+correct-1 right (of n, wrapping)."""
    right = {(offset + i) % n for i in range(correct)}
    return {f"q{i}": float(i in right) for i in range(n)}


def test_a_member_copies_a_donor_only_when_its_lead_is_beyond_the_looks_noise():
    s = settings(population=4, exploit_fraction=0.25)
    params = [Param("optimizer.learning_rate", 1e-4, 1e-2, log=True)]
    values = [{"optimizer.learning_rate": 1e-3}] * 4
    # 0.500 against 0.453 on 64 questions, the donor's right answers a shifted set: se of the paired gap 0.076
    noisy = [_look(32), _look(30, offset=16), _look(31, offset=8), _look(29, offset=40)]
    scores = [sum(look.values()) / 64 for look in noisy]
    moves, held = decide(scores, values, params, s, 0, noisy)
    assert moves == [] and [(t["member"], t["donor"]) for t in held] == [(3, 0)]
    gap, se = ranking_gap(scores[0], scores[3], noisy[0], noisy[3], "maximize")
    assert held[0]["gap"] == pytest.approx(3 / 64) and held[0]["se"] == pytest.approx(se) and se > gap / 1.645
    assert held[0]["beyond_noise"] is False
    # plain PBT copies it all the same, and says the lead was within noise
    plain, none_held = decide(scores, values, params, settings(population=4, noise_guard=False), 0, noisy)
    assert none_held == [] and [(t["member"], t["donor"], t["beyond_noise"]) for t in plain] == [(3, 0, False)]
    # the donor right on every question the recipient gets right, and on 20 more: beyond noise
    clear = [_look(52), _look(40), _look(36), _look(32)]
    moves, held = decide([52 / 64, 40 / 64, 36 / 64, 32 / 64], values, params, s, 0, clear)
    assert held == [] and [(t["member"], t["donor"], t["beyond_noise"]) for t in moves] == [(3, 0, True)]
    assert moves[0]["gap"] == pytest.approx(20 / 64) and moves[0]["se"] == pytest.approx(
        statistics.stdev([1.0] * 20 + [0.0] * 44) / 8
    )
    # minimize: the lead is the donor's lower value
    assert ranking_gap(0.2, 0.5, None, None, "minimize") == (pytest.approx(0.3), None)


def test_clip_and_the_weights_ratios_are_said_in_how():
    s = settings(resample_probability=0.0, perturb_factors=[2.0])
    lr = Param("optimizer.learning_rate", 1e-4, 1e-3)
    new, how = explore({lr.key: 8e-4}, [lr], s, random.Random(0))
    assert new[lr.key] == 1e-3 and how[lr.key] == "x2, clipped to 0.001"
    # two weights both doubled: their ratio is unchanged, their total held, so neither moves
    a, b = Param("reward_mix.format.weight", 0.1, 4), Param("reward_mix.correct.weight", 0.1, 4)
    new, how = explore({a.key: 1.0, b.key: 2.0}, [a, b], s, random.Random(0))
    assert new == {a.key: pytest.approx(1.0), b.key: pytest.approx(2.0)}
    assert how[a.key] == "x2, x1 with the weights' total held"
    s = settings(resample_probability=0.0, perturb_factors=[0.5, 2.0])
    for seed in range(20):
        new, how = explore({a.key: 1.0, b.key: 2.0}, [a, b], s, random.Random(seed))
        assert new[a.key] + new[b.key] == pytest.approx(3.0)  # only the ratio moves
        # the label is the factor drawn, and where the total was put back, the factor the weight got
        assert (
            how[a.key] in ("x0.5", "x2")
            and new[a.key] == float(how[a.key][1:])
            or how[a.key].endswith(f", x{new[a.key]:.3g} with the weights' total held")
        )
    # scale_rewards=none: the total is a step size of its own, each weight moves alone
    alone = replace(s, weights_by_ratio=False)
    new, _ = explore({a.key: 1.0, b.key: 2.0}, [a, b], alone, random.Random(1))
    assert {new[a.key], new[b.key]} <= {0.5, 1.0, 2.0, 4.0}


def test_explore_stays_in_range_and_uses_the_factors():
    s = settings(resample_probability=0.0, perturb_factors=[0.5, 2.0])
    p = Param("reward_mix.format.weight", 0.1, 1.0)
    rng = random.Random(0)
    seen = set()
    for _ in range(200):
        new, how = explore({p.key: 0.8}, [p], s, rng)
        seen.add(how[p.key])
        assert 0.1 <= new[p.key] <= 1.0 and new[p.key] in (0.4, 1.0)  # 0.8 x 2 is clipped to the range
    assert seen == {"x0.5", "x2, clipped to 1"}
    drawn = [v[p.key] for v in initial_population([p], settings(population=50))]
    assert min(drawn) >= 0.1 and max(drawn) <= 1.0 and len(set(drawn)) == 50


@pytest.mark.parametrize("steps_per_round, rounds", [(40, 3), (7, 5), (1, 4), (3, 2)])
def test_a_members_weights_change_exactly_at_each_rounds_first_step(steps_per_round, rounds):
    """The member's schedule, read as a run reads it, gives round k's weight from step k x steps_per_round on (the
    step the trainer is about to train, as RewardSchedule asks at on_step_begin)."""
    history = [1.0 + k for k in range(rounds)]
    max_steps = steps_per_round * rounds
    schedule = parse_schedule("format", 1.0, weight_schedule(history, steps_per_round, max_steps))
    for step in range(max_steps):
        assert schedule.weight(progress_of(step, max_steps)) == history[step // steps_per_round], step
    # a round's schedule, before the next round is decided: its weight carries on
    for done in range(1, rounds):
        partial = parse_schedule("format", 1.0, weight_schedule(history[:done], steps_per_round, max_steps))
        assert [partial.weight(progress_of(s, max_steps)) for s in range(done * steps_per_round)] == [
            history[s // steps_per_round] for s in range(done * steps_per_round)
        ]
    assert weight_schedule([1.0], steps_per_round, steps_per_round) is None  # one round: no schedule


def test_a_members_overrides_hold_its_lineage():
    s = settings()
    params = parse_params(
        {
            "reward_mix.format.weight": {"low": 0.1, "high": 4},
            "optimizer.learning_rate": {"low": 1e-4, "high": 1e-2, "log": True},
        },
        MIX,
    )
    history = [
        {"reward_mix.format.weight": 1.0, "optimizer.learning_rate": 1e-3},
        {"reward_mix.format.weight": 0.5, "optimizer.learning_rate": 2e-3},
    ]
    out = member_overrides(3, history, params, s, base_seed=42)
    assert out[:4] == [
        "hydra.sweep.subdir=members/3",
        "trainer.seed=45",
        "trainer.max_steps=120",
        "trainer.pause_at_step=80",
    ]
    assert "reward_mix.format.weight=1.0" in out and "optimizer.learning_rate=0.002" in out
    assert f"++reward_mix.format.schedule={{kind:step,at:[{40 / 119!r},{80 / 119!r}],values:[0.5,0.5]}}" in out
    assert "trainer.pause_at_step=null" in member_overrides(3, history, params, s, 42, pause=False)


def _member(sweep: Path, m: int, step: int, accuracy: float | None = 0.5):
    run = member_dir(sweep, m)
    checkpoint = run / "checkpoints" / f"checkpoint-{step}"
    checkpoint.mkdir(parents=True)
    (checkpoint / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    (checkpoint / "adapter_model.safetensors").write_bytes(bytes([m]) * 1000)
    rows = [{"step": s, "reward": 0.1 * m} for s in range(1, step + 1)]
    if accuracy is not None:
        rows.append({"step": step, "val/accuracy": accuracy, "val/accuracy_lenient": accuracy, "val/correct": accuracy})
    rows.append({"step": step, "train_runtime": 1.0})
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run


def test_round_score_needs_the_rounds_checkpoint_and_its_validation(tmp_path):
    _member(tmp_path, 0, 40, 0.625)
    _member(tmp_path, 1, 40, None)  # killed between its last step and its validation
    assert round_score(member_dir(tmp_path, 0), 40, "val_accuracy") == 0.625
    assert round_score(member_dir(tmp_path, 0), 40, "val_rewards.correct") == 0.625
    assert round_score(member_dir(tmp_path, 0), 80, "val_accuracy") is None  # not there yet
    assert round_score(member_dir(tmp_path, 1), 40, "val_accuracy") is None
    assert round_score(member_dir(tmp_path, 2), 40, "val_accuracy") is None  # never started


def test_take_over_makes_the_recipient_the_donor_at_the_step(tmp_path):
    donor = _member(tmp_path, 1, 40)
    recipient = _member(tmp_path, 0, 40)
    (recipient / "summary.json").write_text("{}")
    (recipient / "best").mkdir()
    (recipient / "checkpoints.taking-over").mkdir()  # a take-over a killed driver left half done
    copied = take_over(tmp_path, 0, 1, 40)
    assert copied == sum(f.stat().st_size for f in (donor / "checkpoints" / "checkpoint-40").iterdir())
    assert (recipient / "checkpoints" / "checkpoint-40" / "adapter_model.safetensors").read_bytes() == bytes([1]) * 1000
    rows = [json.loads(line) for line in (recipient / "metrics.jsonl").read_text().splitlines()]
    assert rows[0]["reward"] == pytest.approx(0.1) and not any("train_runtime" in r for r in rows)
    assert not (recipient / "summary.json").exists() and not (recipient / "best").exists()
    assert not (recipient / "checkpoints.taking-over").exists()
    # the recipient's own history stays, marked superseded
    kept = recipient / "superseded" / "step-40"
    assert json.loads((kept / "summary.json").read_text()) == {}
    assert json.loads((kept / "metrics.jsonl").read_text().splitlines()[0])["reward"] == 0.0
    assert json.loads((kept / "superseded.json").read_text()) == {"superseded_at_step": 40, "by_member": 1}
    take_over(tmp_path, 0, 1, 40)  # again (a driver killed after it): the first copy, of its own record, stays
    assert json.loads((kept / "summary.json").read_text()) == {}
    with pytest.raises(PBTError, match="member 1 has no complete checkpoint of step 80"):
        take_over(tmp_path, 0, 1, 80)


def synchronous_rows(first: list[dict], rounds: list[tuple[list, list]], steps: int = 40) -> list[dict]:
    """pbt.jsonl as the driver writes a synchronous PBT: the start, then each round's reports, each member's
    decision (``rounds[r]``: its scores and its take-overs, each taken and carried out) and each take-over carried
    out."""
    values = [[dict(v)] for v in first]
    rows = [{"event": "start", "settings": {"rounds": len(rounds), "steps_per_round": steps}, "population": first}]
    for r, (scores, take_overs) in enumerate(rounds):
        step = (r + 1) * steps
        rows += [
            {
                "event": "report",
                "member": m,
                "round": r,
                "step": step,
                "score": x,
                "start": None,
                "values": values[m][r],
            }
            for m, x in enumerate(scores)
        ]
        if r == len(rounds) - 1:
            break
        takes = {t["member"]: {**t, "donor_round": r} for t in take_overs}
        before = [list(v) for v in values]
        for m in range(len(first)):
            t = takes.get(m)
            rows.append({"event": "decide", "member": m, "round": r, "take_over": t, "archive": f"step-{step}"})
            values[m] = [*before[t["donor"]][: r + 1], t["values"]] if t else [*before[m], dict(before[m][r])]
        rows += [{"event": "carried_out", "member": m, "round": r, "bytes": 10} for m in sorted(takes)]
    return rows


def test_the_lineage_is_read_back_with_each_members_values(tmp_path):
    path = tmp_path / LINEAGE
    first = [{"k": 1.0}, {"k": 2.0}, {"k": 3.0}]
    rows = synchronous_rows(
        first,
        [
            ([0.1, 0.9, 0.5], [{"member": 0, "donor": 1, "values": {"k": 2.5}, "how": {}}]),
            ([0.8, 0.2, 0.5], [{"member": 1, "donor": 0, "values": {"k": 3.1}, "how": {}}]),
            ([0.7, 0.6, 0.5], []),
        ],
    )
    rows = [row for row in rows if row["event"] != "report" or row["round"] < 2]
    last_carried = max(i for i, row in enumerate(rows) if row["event"] == "carried_out")
    text = "".join(json.dumps(r) + "\n" for r in rows[:last_carried])
    path.write_text(text + '{"event": "carried_o')  # a line a kill cut short
    lineage = Lineage.read(path)
    assert lineage.history(0, 1) == [{"k": 2.0}, {"k": 2.5}]  # member 1's round 0, then its own move
    assert lineage.history(1, 2) == [{"k": 2.0}, {"k": 2.5}, {"k": 3.1}]  # member 0's lineage, taken over again
    assert lineage.history(2, 2) == [{"k": 3.0}] * 3
    assert set(lineage.decisions) == {0, 1} and sorted(lineage.scores) == [0, 1]
    # member 1's take-over after round 2 was decided, not carried out: the same command carries it out
    assert lineage.due == {0: Due.TRAIN, 1: Due.CARRY, 2: Due.TRAIN}
    # whose job trained each round of a lineage: its seed and data order are that member's
    assert lineage.trained_by == [[1, 0, 0], [1, 0, 1], [2, 2, 2]]


def test_the_plot_draws_scores_with_their_noise_and_every_moved_value(tmp_path):
    from grpo_sweep.search.pbt.plot import look_se, plot_pbt

    path = tmp_path / LINEAGE
    rows = synchronous_rows(
        [{"k": 1.0}, {"k": 2.0}, {"k": 3.0}],
        [
            ([0.5, 0.9, None], [{"member": 2, "donor": 1, "values": {"k": 2.5}, "how": {}}]),
            ([0.6, 0.8, 0.7], [{"member": 1, "donor": 2, "values": {"k": 3.1}, "how": {}}]),
            ([0.7, None, 0.75], []),
        ],
    )
    rows.append({"event": "best", "member": 2, "score": 0.75, "values": []})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    looks = {0: [_look(32), _look(58), None], 1: [None, None, None], 2: [_look(45), None, _look(48)]}
    assert look_se(_look(32)) == pytest.approx(statistics.stdev([1.0] * 32 + [0.0] * 32) / 8)
    assert look_se(None) is None
    plot_pbt(Lineage.read(path), [Param("k", 0.1, 10, log=True)], "val_accuracy", tmp_path / "pbt.png", looks)
    assert (tmp_path / "pbt.png").read_bytes()[:4] == b"\x89PNG"


# -- what PBT stands on, as real runs ------------------------------------------------------------------------
RUN = [
    *FAST,
    "trainer.max_steps=6",
    "trainer.save_steps=6",
    "trainer.disable_tqdm=true",
    "trainer.eval.every_steps=0",
    "trainer.eval.k=0",
]


def _rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_a_paused_run_goes_on_as_if_it_had_not_stopped(tmp_path):
    whole = launch_here([*RUN, f"hydra.run.dir={tmp_path / 'whole'}"], tmp_path)
    assert whole.returncode == 0, whole.stderr[-2000:]
    paused = launch_here([*RUN, "trainer.pause_at_step=3", f"hydra.run.dir={tmp_path / 'paused'}"], tmp_path)
    assert paused.returncode == 0, paused.stderr[-2000:]
    summary = json.loads((tmp_path / "paused" / "summary.json").read_text())
    assert summary["status"] == "paused" and summary["steps"] == 3 and summary["test_accuracy"] is None
    assert summary["reported_step"] == 3 and summary["val_accuracy"] is not None  # validated at the pause
    assert "run paused" in paused.stdout and "test: not measured yet" in paused.stdout
    assert "n/a" not in paused.stdout and "samples.jsonl" not in paused.stdout  # nothing claimed it did not do
    assert (tmp_path / "paused" / "outcomes" / "val.jsonl").exists()  # the pause's look, question by question
    again = launch_here([*RUN, "trainer.pause_at_step=3", f"hydra.run.dir={tmp_path / 'paused'}"], tmp_path)
    assert json.loads((tmp_path / "paused" / "summary.json").read_text())["steps"] == 3  # no step past the pause
    assert again.returncode == 0
    on = launch_here([*RUN, f"hydra.run.dir={tmp_path / 'paused'}"], tmp_path)  # a later pause (none): accepted
    assert on.returncode == 0, on.stderr[-2000:]
    a, b = (json.loads((tmp_path / d / "summary.json").read_text()) for d in ("whole", "paused"))
    assert b["resumed_from_steps"] == [3, 3]
    for key in ("steps", "reward", "val_accuracy", "test_accuracy", "val_samples"):
        assert a[key] == b[key], key
    rewards = lambda d: [(r["step"], r["reward"]) for r in _rows(tmp_path / d) if "reward" in r]  # noqa: E731
    assert rewards("whole") == rewards("paused") and len(rewards("whole")) == 6


def test_a_resume_takes_the_configs_learning_rate_and_a_finished_checkpoint_is_not_trained_again(tmp_path, cfg_factory):
    from grpo_sweep.run.resume import remember_config

    run_dir = tmp_path / "run"
    first = launch_here(
        [*RUN, "optimizer.learning_rate=0.001", "trainer.pause_at_step=3", f"hydra.run.dir={run_dir}"], tmp_path
    )
    assert first.returncode == 0, first.stderr[-2000:]
    # what the PBT driver does between rounds: the member's config for its next round becomes the directory's own
    remember_config(run_dir, cfg_factory([*RUN, "optimizer.learning_rate=0.0002"]))
    second = launch_here([*RUN, "optimizer.learning_rate=0.0002", f"hydra.run.dir={run_dir}"], tmp_path)
    assert second.returncode == 0, second.stderr[-2000:]
    rates = {r["step"]: r["learning_rate"] for r in _rows(run_dir) if "learning_rate" in r}
    assert rates[3] == pytest.approx(0.001) and all(rates[s] == pytest.approx(0.0002) for s in (4, 5, 6))
    # killed after its last checkpoint, before its summary: the same command evaluates, trains no 7th step
    (run_dir / "summary.json").unlink()
    third = launch_here([*RUN, "optimizer.learning_rate=0.0002", f"hydra.run.dir={run_dir}"], tmp_path)
    assert third.returncode == 0, third.stderr[-2000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["steps"] == 6 and max(r["step"] for r in _rows(run_dir)) == 6
    assert sum(1 for r in _rows(run_dir) if "test/accuracy" in r) == 1  # the first attempt's test row went


PBT = [
    "-m",
    "hparams_search=pbt",
    *RUN,
    "hydra.sweeper.population=3",
    "hydra.sweeper.rounds=2",
    "hydra.sweeper.exploit_fraction=0.34",
    "hydra.sweeper.name=small",
    "hydra.sweeper.head_to_head_seeds=0",
]


def test_pbt_trains_rounds_takes_over_tests_the_best_once_and_its_schedule_replays(tmp_path, monkeypatch):
    import grpo_sweep.search.pbt.rounds as driver

    # the random tiny model scores 0 on every member, and a tie takes nothing over: the ranking is the test's own
    # (each member's real score says whether its round is done; the value ranks it)
    real, fixed = driver.round_score, {0: 0.1, 1: 0.9, 2: 0.5}
    monkeypatch.setattr(
        driver,
        "round_score",
        lambda run_dir, step, metric: (
            None if real(run_dir, step, metric) is None else fixed[int(Path(run_dir).name)] + step / 1000
        ),
    )
    out = launch_here(PBT, tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    sweep = tmp_path / "grpo" / "pbt" / "small"
    lineage = Lineage.read(sweep / LINEAGE)
    assert sorted(lineage.scores) == [0, 1] and all(due is Due.FINISHED for due in lineage.due.values())
    [move] = lineage.decisions[0]
    carried = [row for row in lineage.timeline if row["event"] == "carried_out"]
    assert [(row["member"], row["round"]) for row in carried] == [(0, 0)] and carried[0]["bytes"] > 0
    assert (move["member"], move["donor"]) == (0, 1) and lineage.best["member"] == 1
    # the recipient went on from the donor's step 3: its first three steps are the donor's
    donor_steps = [r for r in _rows(member_dir(sweep, move["donor"])) if "reward" in r and r["step"] <= 3]
    assert [r for r in _rows(member_dir(sweep, move["member"])) if "reward" in r and r["step"] <= 3] == donor_steps
    best = lineage.best["member"]
    statuses = {m: json.loads((member_dir(sweep, m) / "summary.json").read_text()) for m in range(3)}
    assert statuses[best]["status"] == "completed" and statuses[best]["test_accuracy"] is not None
    assert all(s["status"] == "paused" and s["test_accuracy"] is None for m, s in statuses.items() if m != best)
    assert lineage.test["test_accuracy"] == statuses[best]["test_accuracy"]
    assert (sweep / "pbt.png").stat().st_size > 0 and "replay as a plain run: python launch.py" in out.stdout
    assert "Sweep " not in out.stdout  # no grid table over members whose configs changed every round
    assert "exploits: " in out.stdout and "not run (hydra.sweeper.head_to_head_seeds=0)" in out.stdout
    report = (sweep / "report.md").read_text()
    for part in (
        "## Rounds",
        "## Lineage tree",
        "(best)",
        "## Moved values",
        "pbt.png",
        "Exploits against",
        "Replayed as one plain run",
    ):
        assert part in report, part
    assert json.loads((sweep / "looks" / "round-0.json").read_text())["step"] == 3

    # the best member's weights, replayed as a plain run from the file, are the ones it trained with
    replay = shlex.split(out.stdout.split("replay as a plain run: python launch.py ", 1)[1].splitlines()[0])
    assert "reward_mix=best_schedule" in replay and (sweep / BEST_SCHEDULE).exists()
    # the lineage's seeds: round 0 trained by the member it started from, round 1 by the best member itself
    seeds = [42 + m for m in lineage.trained_by[best]]
    assert f"trainer.seed={seeds[0]}" in replay
    ran = launch_here([*RUN, *replay, f"hydra.run.dir={tmp_path / 'replay'}"], tmp_path)
    assert ran.returncode == 0, ran.stderr[-2000:]

    def per_step(run_dir, key):
        return [r[key] for r in _rows(run_dir) if "reward" in r]

    # the replay is the run: every step's weights and learning rate are the lineage's
    for key in ("reward_weights/format", "reward_weights/correct", "learning_rate"):
        assert per_step(tmp_path / "replay", key) == per_step(member_dir(sweep, best), key), key
    history = lineage.history(best, 1)
    assert per_step(tmp_path / "replay", "learning_rate") == [
        pytest.approx(history[(step - 1) // 3]["optimizer.learning_rate"])
        for step in (r["step"] for r in _rows(tmp_path / "replay") if "reward" in r)
    ]
    config = OmegaConf.load(tmp_path / "replay" / ".hydra" / "config.yaml")
    assert [p["set"]["trainer.seed"] for p in config.trainer.phases] == seeds[1:]

    # the same command again: everything is on record, nothing trains
    again = launch_here(PBT, tmp_path)
    assert again.returncode == 0 and Lineage.read(sweep / LINEAGE).scores == lineage.scores
    assert not any(f"members {m}" in again.stderr for m in range(3))


def pbt_file(tmp_path: Path, params: str) -> list[str]:
    """A user's PBT option (hparams_search=mine in --config-dir): hparams_search=pbt with ``params`` (YAML lines)
    added to its space."""
    group = tmp_path / "conf" / "hparams_search"
    group.mkdir(parents=True)
    (group / "mine.yaml").write_text(
        "# @package _global_\ndefaults:\n  - pbt\nhydra:\n  sweeper:\n    params:\n"
        + "".join(f"      {line}\n" for line in params.splitlines())
    )
    return ["--config-dir", str(tmp_path / "conf"), "-m", "hparams_search=mine"]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["hydra.sweeper.population=1"], "hydra.sweeper.population=1: must be a whole number >= 2"),
        (["hydra.sweeper.head_to_head_seeds=1"], "hydra.sweeper.head_to_head_seeds=1: give 0 (not run) or 2 or more"),
        (
            "lora.r: {low: 8, high: 32}",
            "hydra.sweeper.params.lora.r: PBT cannot move lora.r between rounds (the adapter's shape and targets are "
            "in the checkpoint)",
        ),
        ("optimizer.learning_rate: {low: -1, high: 0.1}", ".learning_rate.low=-1: must be > 0 (a log scale)"),
        ("reward_mix.format.weight: {low: 0, high: 0}", "low=0 must be below high=0"),
        (["hydra.sweeper.rounds=4"], "hydra.sweeper.rounds=4 does not divide trainer.max_steps=6"),
        (["optimized_metric=test_accuracy"], "optimized_metric='test_accuracy': PBT ranks members on validation"),
        (["trainer.num_generations=1"], "trainer.num_generations=1"),
        (["hydra/launcher=slurm", "hydra.launcher.detach=true"], "hydra.launcher.detach=true: a PBT's driver ranks"),
    ],
)
def test_a_bad_pbt_is_refused_in_one_line_before_anything_is_written(tmp_path, extra, message):
    args = [*PBT, *extra]
    if isinstance(extra, str):
        args = [*pbt_file(tmp_path, extra), *(a for a in PBT if a not in ("-m", "hparams_search=pbt"))]
    out = launch_here(args, tmp_path)
    lines = [line for line in out.stderr.splitlines() if line.startswith("grpo-sweep:")]
    assert out.returncode != 0 and len(lines) == 1 and "Traceback" not in out.stderr, out.stderr[-2000:]
    if message:
        assert message in lines[0]
    assert not (tmp_path / "grpo").exists()


@pytest.mark.slow
def test_the_schedule_meets_the_best_fixed_start_over_fresh_seeds_with_a_verdict(tmp_path):
    args = [a for a in PBT if "head_to_head" not in a] + ["hydra.sweeper.head_to_head_seeds=2"]
    out = launch_here(args, tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    sweep = tmp_path / "grpo" / "pbt" / "small"
    arms = sorted(p.name for p in (sweep / "head_to_head").iterdir() if (p / "summary.json").exists())
    assert arms == ["fixed-45", "fixed-46", "schedule-45", "schedule-46"]  # seeds no member trained with (42-44)
    lineage = Lineage.read(sweep / LINEAGE)
    assert set(lineage.head_to_head["verdicts"]) == {"schedule", "fixed"}
    report = (sweep / "report.md").read_text()
    assert "## Does the schedule beat a fixed mix?" in report and "Per configuration over seeds" in report
    assert "schedule" in report.split("## Does the schedule beat a fixed mix?")[1]
    # the same command again: the head-to-head's runs are not trained again
    again = launch_here(args, tmp_path)
    assert again.returncode == 0 and "PBT head-to-head:" not in again.stderr


@pytest.mark.slow
def test_a_pbt_over_trainer_beta_moves_it_round_by_round_and_replays_it(tmp_path):
    args = [
        *pbt_file(tmp_path, "trainer.beta: {low: 0.01, high: 0.1}"),
        *(a for a in PBT if a not in ("-m", "hparams_search=pbt")),
    ]
    out = launch_here([*args, "hydra.sweeper.noise_guard=false"], tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    sweep = tmp_path / "grpo" / "pbt" / "small"
    lineage = Lineage.read(sweep / LINEAGE)
    best = lineage.best["member"]
    # each round's job ran with its lineage's beta: the config its checkpoints were continued with
    started = OmegaConf.load(member_dir(sweep, best) / "checkpoints" / "config.yaml")
    assert started.trainer.beta == pytest.approx(lineage.history(best, 1)[-1]["trainer.beta"])
    replay = shlex.split(out.stdout.split("replay as a plain run: python launch.py ", 1)[1].splitlines()[0])
    [phases] = [a for a in replay if a.startswith("trainer.phases=")]
    assert "trainer.beta:" in phases


def test_the_pbt_option_and_its_sweeper_compose(cfg_factory):
    cfg = cfg_factory(["hparams_search=pbt"])
    assert set(cfg.reward_mix) == {"format", "correct"} and cfg.trainer.eval.report == "final"
    assert cfg.trainer.pause_at_step is None  # the sweeper sets it, round by round


@pytest.mark.slow
@pytest.mark.parametrize("explore", ["perturb", "pb2"])
def test_pbt_on_the_pool_survives_a_killed_driver(tmp_path, explore):
    """The issue's command on the pool, its driver killed with SIGKILL once round 1 is taken over; the same command
    finishes it, every round on record once, and ends with report.md and the schedule-or-fixed verdict (perturb:
    the preset's head-to-head; pb2: without it, to keep the stage short)."""
    args = [
        "-m",
        "hparams_search=pbt",
        "hydra/launcher=pool",
        "hydra.sweeper.population=4",
        "hydra.sweeper.rounds=3",
        f"hydra.sweeper.explore={explore}",
        *([] if explore == "perturb" else ["hydra.sweeper.head_to_head_seeds=0"]),
        "trainer.disable_tqdm=true",
        f"output_root={tmp_path}",
    ]
    lineage_path = tmp_path / "grpo" / "pbt" / "pbt" / LINEAGE
    kill_pbt_driver_when(args, tmp_path, lambda lineage: any(r["event"] == "carried_out" for r in lineage.timeline))
    out = subprocess.run(
        [sys.executable, str(ROOT / "launch.py"), *args], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [json.loads(line) for line in lineage_path.read_text().splitlines()]
    # every member reported each round once (a synchronous round is not trained again after the kill)
    reports = sorted((r["member"], r["round"]) for r in rows if r["event"] == "report")
    assert reports == [(m, r) for m in range(4) for r in range(3)]
    decided = [(r["member"], r["round"]) for r in rows if r["event"] == "decide"]
    assert sorted(decided) == [(m, r) for m in range(4) for r in range(2)]  # each member's decision once a round
    takes = [(r["member"], r["round"]) for r in rows if r["event"] == "decide" and r["take_over"]]
    assert sorted((r["member"], r["round"]) for r in rows if r["event"] == "carried_out") == sorted(takes)
    assert [r["event"] for r in rows].count("test") == 1
    lineage = Lineage.read(lineage_path)
    best = member_dir(lineage_path.parent, lineage.best["member"])
    assert json.loads((best / "summary.json").read_text())["steps"] == 120
    plain = OmegaConf.load(lineage_path.parent / BEST_SCHEDULE)
    assert set(plain) == {"format", "correct"} and plain.format.schedule.kind == "step"
    report = (lineage_path.parent / "report.md").read_text()
    assert "## Lineage tree" in report and "Exploits against the look's noise" in report
    if explore == "perturb":
        assert "Per configuration over seeds" in report.split("## Does the schedule beat a fixed mix?")[1]
        assert set(lineage.head_to_head["verdicts"]) == {"schedule", "fixed"}
    else:
        moves = [r["take_over"] for r in rows if r["event"] == "decide" and r["take_over"]]
        assert all(h.startswith("pb2 (") for t in moves for h in t["how"].values())


@pytest.mark.slow
def test_asynchronous_pbt_on_the_pool_survives_a_killed_driver(tmp_path):
    """hydra.sweeper.synchronous=false on the pool, the driver and its workers killed with SIGKILL once five
    rounds are reported: the same command finishes it, each member's every round reported, no round whose result
    was on disk trained again (only a recipient goes back to a round it had trained), every take-over carried out
    once, the best member tested once, and report.md tells the timeline."""
    args = [
        "-m",
        "hparams_search=pbt",
        "hydra/launcher=pool",
        "hydra.sweeper.population=4",
        "hydra.sweeper.rounds=3",
        "hydra.sweeper.synchronous=false",
        "hydra.sweeper.head_to_head_seeds=0",
        "trainer.disable_tqdm=true",
        f"output_root={tmp_path}",
    ]
    lineage_path = tmp_path / "grpo" / "pbt" / "pbt" / LINEAGE
    kill_pbt_driver_when(args, tmp_path, lambda lineage: len(lineage.reports) >= 5)
    before = Lineage.read(lineage_path).reports
    out = subprocess.run(
        [sys.executable, str(ROOT / "launch.py"), *args], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lineage = Lineage.read(lineage_path)
    assert lineage.reports[: len(before)] == before
    assert all(due is Due.FINISHED for due in lineage.due.values()), lineage.due
    assert {(row["member"], row["round"]) for row in lineage.reports} == {(m, r) for m in range(4) for r in range(3)}
    takes = [row for row in lineage.timeline if row["event"] == "decide" and row["take_over"]]
    carried = [row for row in lineage.timeline if row["event"] == "carried_out"]
    assert len(carried) == len(takes)
    trained = [(row["member"], row["round"]) for row in lineage.reports if row["trained"] is not False]
    went_back = {(row["member"], row["take_over"]["donor_round"] + 1) for row in takes}
    assert {k for k in trained if trained.count(k) > 1} <= went_back
    assert [json.loads(line)["event"] for line in lineage_path.read_text().splitlines()].count("test") == 1
    best = member_dir(lineage_path.parent, lineage.best["member"])
    assert json.loads((best / "summary.json").read_text())["steps"] == 120
    report = (lineage_path.parent / "report.md").read_text()
    assert "Asynchronous (`hydra.sweeper.synchronous=false`)" in report and "## Lineage tree" in report
