"""hydra/sweeper=seeds: seeds only where a comparison is open (search/seeds/sequential.py, search/seeds/sweeper.py),
its family-wise error under the adaptivity (a small simulation; bench/studies/seed_allocation.py is the full one), the
sweeper end to end on real runs, and a killed sweep that continues."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from grpo_sweep.search.seeds import sequential
from grpo_sweep.search.seeds.sequential import RUN_FAILED, Settings, budgets, check_settings, plan
from grpo_sweep.search.simulate import Noise, adaptive_sweeps, simulate

from .conftest import ROOT, launch_here


def test_the_looks_budgets_sum_to_alpha_with_half_kept_for_max_seeds():
    b = budgets(2, 8, 0.05)
    assert sorted(b) == list(range(2, 9)) and b[8] == pytest.approx(0.025)
    assert sum(b.values()) == pytest.approx(0.05) and len({round(v, 12) for n, v in b.items() if n < 8}) == 1
    assert budgets(3, 3, 0.05) == {3: 0.05}


@pytest.mark.parametrize(
    "settings, k, message",
    [
        (Settings(min_seeds=1), 3, "hydra.sweeper.min_seeds=1: use a whole number >= 2"),
        (Settings(min_seeds=4, max_seeds=3), 3, "hydra.sweeper.max_seeds=3 is below min_seeds=4"),
        (Settings(max_runs=5), 3, "hydra.sweeper.max_runs=5: the first round alone is 3 configurations x 2 seeds = 6"),
        (Settings(alpha=1.5), 3, "hydra.sweeper.alpha=1.5"),
        (Settings(), 1, "hydra/sweeper=seeds with 1 configuration"),
    ],
)
def test_bad_settings_are_refused_naming_the_value(settings, k, message):
    with pytest.raises(ValueError) as caught:
        check_settings(settings, k)
    assert message in str(caught.value)


def _outcomes(val, ran=None):
    """``outcome(c, i)`` over simulated (k, seeds, questions) outcomes; ``ran``: the runs that finished."""
    return lambda c, i: val[c, i] if ran is None or (c, i) in ran else None


def test_a_clearly_worse_configuration_stops_early_and_the_close_ones_go_on():
    # two seeds give each configuration's noise one degree of freedom: no look decides at 2; of the first 10 generator
    # seeds, 5 stop it at 3 seeds, 4 at 4, one at 5
    rng = np.random.default_rng(2)
    val, test = simulate(rng, 1, 3, 8, Noise(seed_sd=0.0), shifts={0: -0.3})
    settings = Settings(2, 8, 20, verdicts="strict")
    p = plan(3, settings, _outcomes(val[0]))
    assert p.done and p.states[0].stop == sequential.DECIDED and p.states[0].seeds == 3
    assert [s.seeds for s in p.states[1:]] == [8, 8] and p.runs == 19 <= 20
    assert {s.stop for s in p.states[1:]} == {sequential.MAX_SEEDS}
    verdicts = sequential.verdicts(p, 3, settings, _outcomes(val[0]), _outcomes(test[0]))
    assert verdicts[0].call == -1 and verdicts[0].validation
    # the design is replayed from the runs that exist: after the first round only, it asks for every third seed;
    # after the second, for the leader's and the open one's fourth, nothing of the decided one's
    first = {(c, i) for c in range(3) for i in range(2)}
    partial = plan(3, settings, _outcomes(val[0], first))
    assert sorted(partial.todo) == sorted(partial.round) == [(0, 2), (1, 2), (2, 2)] and partial.runs == 9
    second = first | {(c, 2) for c in range(3)}
    partial = plan(3, settings, _outcomes(val[0], second))
    assert sorted(partial.todo) == sorted(partial.round) == [(1, 3), (2, 3)] and partial.runs == 11


def test_the_budget_stops_the_sweep_and_a_failed_run_stops_its_configuration():
    rng = np.random.default_rng(4)
    val, _ = simulate(rng, 1, 3, 8, Noise(seed_sd=0.0))
    p = plan(3, Settings(2, 8, 10), _outcomes(val[0]))
    assert p.done and p.runs == 9 and {s.stop for s in p.states} == {sequential.BUDGET}  # 6, then 3: 12 > 10
    failed = plan(3, Settings(2, 3), lambda c, i: RUN_FAILED if (c, i) == (1, 0) else val[0][c, i])
    assert failed.states[1].stop == sequential.FAILED and failed.done
    assert [s.seeds for s in failed.states] == [3, 2, 3]


@pytest.mark.parametrize("k", [3, 5])
def test_null_sweeps_keep_the_family_wise_error_under_the_adaptivity(k):
    """The whole procedure on 300 null sweeps a cell with the stress noise (a run's own luck most of its variance,
    so its validation and test agree most) and half the configurations twice as noisy: the share with any false
    better/worse stays under 0.05 (Monte Carlo sd ~0.013). bench/studies/seed_allocation.py: 2,000 a cell, 3/5/10."""
    rng = np.random.default_rng(100 + k)
    a = adaptive_sweeps(rng, 300, k, Settings(2, 8), Noise(question_sd=16.0, run_sd=1.2, seed_sd=0.0), noisy=2.0)
    assert a.any_false(np.zeros(k)).mean() <= 0.05
    # and it has power where it should: one configuration 0.25 worse is called worse, after ~4 seeds
    b = adaptive_sweeps(rng, 100, 3, Settings(2, 8), Noise(seed_sd=0.0), shifts={0: -0.25})
    assert b.called(0).mean() >= 0.8 and b.seeds[:, 0].mean() < 5 and b.runs.mean() < 22


RUN = ["trainer.max_steps=10", "trainer.save_steps=10", "trainer.disable_tqdm=true"]


def _seeds_sweep(tmp_path: Path, mixes: str, max_seeds: int, extra=()) -> list[str]:
    return [
        "-m",
        "hydra/sweeper=seeds",
        f"reward_mix={mixes}",
        "hydra.sweeper.min_seeds=2",
        f"hydra.sweeper.max_seeds={max_seeds}",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        *RUN,
        *extra,
    ]


def _finished(sweep: Path) -> dict[str, float]:
    return {str(p.parent.relative_to(sweep)): p.stat().st_mtime_ns for p in sweep.glob("*/seed*/summary.json")}


@pytest.mark.slow  # a whole sweep and its continuation: the README's command keeps to 5 minutes
def test_the_seeds_sweep_decides_on_real_runs_and_continues_without_training_twice(tmp_path):
    """The warm-started tiny model, 10 steps: `format` pays nothing for answers and is decided worse than `correct`
    at 3 seeds (2 seeds leave each configuration's noise one degree of freedom: no look decides there), which ends
    the sweep. With a run removed (a driver killed mid-round), the same command trains that
    run only. (Rounds after the first: the replay tests above, and the slow test below on the pool.)"""
    args = _seeds_sweep(tmp_path, "format,correct", 3)
    out = launch_here(args, tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    sweep = tmp_path / "sweep"
    before = _finished(sweep)
    assert sorted(before) == [f"{c}/seed{s}" for c in (0, 1) for s in (1, 2, 3)]
    table = (sweep / "sweep_table.md").read_text()
    assert "decided after 3 seeds (worse than reward_mix=correct on validation)" in table
    verdicts = {r["config"]: r for r in json.loads((sweep / "verdicts.json").read_text())["comparisons"]}
    assert verdicts["reward_mix=format"]["verdict"] == "worse"
    assert verdicts["reward_mix=correct"]["verdict"] == "reference"
    assert "hydra/sweeper=seeds" in (sweep / "report.md").read_text()

    import shutil

    shutil.rmtree(sweep / "1" / "seed2")
    again = launch_here(args, tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    after = _finished(sweep)
    assert sorted(after) == sorted(before) and after["1/seed2"] != before["1/seed2"]
    assert {k: v for k, v in after.items() if k != "1/seed2"} == {k: v for k, v in before.items() if k != "1/seed2"}


@pytest.mark.parametrize(
    "extra, message",
    [
        (["hydra.sweeper.min_seeds=1"], "hydra.sweeper.min_seeds=1: use a whole number >= 2"),
        (["hydra.sweeper.max_runs=3"], "hydra.sweeper.max_runs=3: the first round alone is 2 configurations x 2"),
        (["trainer.seed=1,2"], "trainer.seed=1,2: hydra/sweeper=seeds picks the seeds"),
        (["trainer.num_generations=1"], "trainer.num_generations=1"),
    ],
)
def test_a_bad_seeds_sweep_is_refused_in_one_line_before_anything_is_written(tmp_path, extra, message):
    out = launch_here(_seeds_sweep(tmp_path, "format,correct", 3, extra), tmp_path)
    lines = [line for line in out.stderr.splitlines() if line.startswith("grpo-sweep:")]
    assert out.returncode != 0 and len(lines) == 1 and "Traceback" not in out.stderr, out.stderr[-2000:]
    assert message in lines[0]
    assert not (tmp_path / "sweep").exists()


@pytest.mark.slow
def test_a_killed_seeds_sweep_on_the_pool_continues_with_nothing_trained_twice(tmp_path):
    """The driver and its pool killed with SIGKILL once the first round is on disk; the same command reuses every
    finished run (their summary.json untouched) and finishes the design."""
    args = [*_seeds_sweep(tmp_path, "correct,format_correct", 4), "hydra/launcher=pool"]
    sweep = tmp_path / "sweep"
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "launch.py"), *args],
        cwd=tmp_path,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None and len(_finished(sweep)) < 4:
        time.sleep(0.2)
    assert proc.poll() is None, "the sweep ended before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = _finished(sweep)
    out = subprocess.run(
        [sys.executable, str(ROOT / "launch.py"), *args], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-3000:]
    after = _finished(sweep)
    assert all(after[k] == v for k, v in before.items()), "a finished run was trained again"
    assert sorted(after) == [f"{c}/seed{s}" for c in (0, 1) for s in range(1, 5)]
