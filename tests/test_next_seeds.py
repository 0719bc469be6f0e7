"""`python -m grpo_sweep.sweeps.next_seeds`: the runs a sweep's comparisons still need, as command lines, over
hand-made sweeps (a grid with seeds, a seeds sweep); running exactly its lines until it has nothing left ends
where hydra/sweeper=seeds' design ends on the same outcomes; its errors; status's line for a round that is due."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from grpo_sweep.reading.results import SweepResults
from grpo_sweep.run.results import question_key, write_outcomes
from grpo_sweep.search import of_sweep
from grpo_sweep.search.seeds import STRATEGY as SEEDS
from grpo_sweep.search.seeds import next_seeds, sequential
from grpo_sweep.search.seeds.design import SEEDS_FILE, seeds_run_dir
from grpo_sweep.search.simulate import Noise, simulate

from .conftest import declare_sweeper
from .test_report import make_run

K, MAX_SEEDS = 3, 8
# the simulated truth: m0 clearly worse (0.5 below), m1 and m2 alike; outcomes (configuration, seed - 1, question)
VAL, TEST = (a[0] for a in simulate(np.random.default_rng(0), 1, K, MAX_SEEDS, Noise(seed_sd=0.0), shifts={0: -0.5}))
QUESTIONS = [question_key(f"question {q}") for q in range(VAL.shape[-1])]
DESIGN = {
    "settings": {"min_seeds": 2, "max_seeds": MAX_SEEDS, "max_runs": None, "alpha": 0.05, "verdicts": "moderated"},
    "configs": [[f"reward_mix=m{c}"] for c in range(K)],
    "seed_key": "trainer.seed",
    "first_seed": 1,
}


def write_run(sweep: Path, name: str, overrides: list[str], status: str = "completed") -> Path:
    """A finished run of the truth: configuration m<c> and seed from its overrides, its validation and test
    outcomes per question (what the verdicts pair on); ``status`` failed: no results; running: no summary."""
    c = int(next(o for o in overrides if o.startswith("reward_mix=")).partition("=m")[2])
    i = int(next(o for o in overrides if o.startswith("trainer.seed=")).partition("=")[2]) - 1
    if status != "completed":
        return make_run(sweep, name, overrides, None if status == "running" else {"status": status, "error": "boom"})
    run = make_run(
        sweep,
        name,
        overrides,
        {
            "objective": VAL[c, i].mean(),
            "val_accuracy": VAL[c, i].mean(),
            "val_samples": len(QUESTIONS),
            "test_accuracy": TEST[c, i].mean(),
            "test_samples": len(QUESTIONS),
        },
    )
    for split, y in (("val", VAL[c, i]), ("test", TEST[c, i])):
        write_outcomes(run, split, [{"key": key, "accuracy": v} for key, v in zip(QUESTIONS, y)])
    return run


def grid(sweep: Path, seeds=(1, 2), common=()) -> Path:
    """`python launch.py -m reward_mix=m0,m1,m2 trainer.seed=<seeds>` as it lands: runs 0, 1, ..."""
    for n, (c, seed) in enumerate((c, seed) for c in range(K) for seed in seeds):
        write_run(sweep, str(n), [*common, f"reward_mix=m{c}", f"trainer.seed={seed}"])
    return sweep


def seeds_sweep(sweep: Path, seeds: dict[int, int] | None = None) -> Path:
    """A hydra/sweeper=seeds directory: its seeds.json and configuration c's seeds 1..seeds[c]."""
    declare_sweeper(sweep, "seeds")
    (sweep / SEEDS_FILE).write_text(json.dumps(DESIGN))
    for c, n in (seeds or {}).items():
        for seed in range(1, n + 1):
            write_run(
                sweep,
                seeds_run_dir(sweep, c, seed).relative_to(sweep).as_posix(),
                [f"reward_mix=m{c}", f"trainer.seed={seed}"],
            )
    return sweep


def ask(sweep: Path, capsys, *options: str) -> dict:
    assert next_seeds.main([str(sweep), "--json", *options]) == 0
    return json.loads(capsys.readouterr().out)


def run_line(line: str) -> list[tuple[str, list[str]]]:
    """What `python launch.py -m ...` of a line does, without training: each of its runs (one per seed) written
    where Hydra would put it, from the truth. Returns (run dir under the sweep, its task overrides)."""
    words = shlex.split(line)
    assert words[:3] == ["python", "launch.py", "-m"], line
    hydra = dict(w.split("=", 1) for w in words[3:] if w.startswith("hydra."))
    task = [w for w in words[3:] if not w.startswith("hydra.")]
    [seeds] = [w.partition("=")[2] for w in task if w.startswith("trainer.seed=")]
    ran = []
    for seed in seeds.split(","):
        overrides = [f"trainer.seed={seed}" if w.startswith("trainer.seed=") else w for w in task]
        subdir = hydra["hydra.sweep.subdir"].replace("${trainer.seed}", seed)
        write_run(Path(hydra["hydra.sweep.dir"]), subdir, overrides)
        ran.append((subdir, overrides))
    return ran


def sweeper_jobs(sweep: Path, todo: list[tuple[int, int]]) -> list[tuple[str, list[str]]]:
    """The jobs hydra/sweeper=seeds itself launches for these (configuration, seed index) runs, as run_line's."""
    from grpo_sweep.search.seeds.sweeper import SeedsSweeperImpl

    driver = SimpleNamespace(config=SimpleNamespace(hydra=SimpleNamespace(sweep=SimpleNamespace(dir=str(sweep)))))
    jobs = SeedsSweeperImpl._jobs(driver, DESIGN, todo)
    return [(job[-1].partition("=")[2], job[:-1]) for job in jobs]


def test_a_grid_with_seeds_gets_a_line_for_each_open_configuration_only(tmp_path, capsys):
    sweep = grid(tmp_path / "grid", seeds=(1, 2, 3, 4), common=["lora.r=8"])
    assert next_seeds.main([str(sweep)]) == 0
    printed = capsys.readouterr().out.splitlines()
    out = ask(sweep, capsys)
    by = {c["config"]: c for c in out["configurations"]}
    assert out["kind"] == "grid" and out["reason"] == next_seeds.TO_RUN and not out["done"]
    assert by["reward_mix=m0"]["stop"] == sequential.DECIDED and by["reward_mix=m0"]["line"] is None
    # the two close ones: the grid's seeds so far, and the next one past the grid's largest, in the grid's directory
    for c in (1, 2):
        row = by[f"reward_mix=m{c}"]
        assert row["seeds"] == [1, 2, 3, 4] and row["to_run"] == [5] and row["stop"] is None
        assert row["line"] == (
            f"python launch.py -m lora.r=8 reward_mix=m{c} trainer.seed=5 hydra.sweep.dir={sweep} "
            f"hydra.sweep.subdir=more_seeds/{c}/seed5"
        )
        assert row["line"] in printed
    assert [(t["config"], t["seed"], t["state"]) for t in out["todo"]] == [
        ("reward_mix=m1", 5, "to run"),
        ("reward_mix=m2", 5, "to run"),
    ]
    assert printed[0].startswith(f"Grid {sweep}: 3 configurations, 2 to 8 seeds each (trainer.seed), alpha 0.05")
    # the design's seeds of the worse one: those up to the look that decided it (the grid's others are unread)
    plan = sequential.plan(K, sequential.Settings(), lambda c, i: VAL[c, i] if i < 4 else None)
    assert sorted(plan.todo) == [(1, 4), (2, 4)] and plan.states[0].stop == sequential.DECIDED
    worse = ",".join(str(s) for s in range(1, plan.states[0].seeds + 1))
    assert any(line.split()[:3] == ["reward_mix=m0", "seeds", worse] and "decided after" in line for line in printed)


def test_a_seeds_sweep_gets_the_sweepers_own_runs_and_its_recorded_settings(tmp_path, capsys):
    sweep = seeds_sweep(tmp_path / "sweep")  # the first round: nothing ran yet
    out = ask(sweep, capsys)
    assert out["kind"] == "seeds sweep" and out["settings"] == DESIGN["settings"] and out["runs"] == 6
    # per configuration its first round in one line: Hydra fills the seed into the run's directory
    assert [c["line"] for c in out["configurations"]] == [
        f"python launch.py -m reward_mix=m{c} trainer.seed=1,2 hydra.sweep.dir={sweep} "
        f"'hydra.sweep.subdir={c}/seed${{trainer.seed}}'"
        for c in range(K)
    ]
    todo = [(t["index"], t["seed_index"]) for t in out["todo"]]
    assert [
        (t["overrides"][-1].partition("=")[2], [o for o in t["overrides"][:-1] if "hydra.sweep.dir" not in o])
        for t in out["todo"]
    ] == sweeper_jobs(sweep, todo)
    # other settings: the what-if, in place of the recorded ones
    assert ask(sweep, capsys, "--min-seeds", "3", "--max-runs", "none")["settings"]["min_seeds"] == 3
    # part of the round running, part failed: a line for what has not started; the running run is listed
    write_run(sweep, "0/seed1", ["reward_mix=m0", "trainer.seed=1"])
    write_run(sweep, "0/seed2", ["reward_mix=m0", "trainer.seed=2"], status="running")
    write_run(sweep, "1/seed1", ["reward_mix=m1", "trainer.seed=1"], status="failed")
    out = ask(sweep, capsys)
    rows = out["configurations"]
    assert (rows[0]["seeds"], rows[0]["running"], rows[0]["line"]) == ([1], [2], None)
    # a failed run stops its configuration at the look, once the rest of its round has run
    assert (rows[1]["failed"], rows[1]["to_run"], rows[1]["stop"]) == ([1], [2], None)
    assert rows[1]["line"].endswith(f"reward_mix=m1 trainer.seed=2 hydra.sweep.dir={sweep} hydra.sweep.subdir=1/seed2")
    assert rows[2]["to_run"] == [1, 2] and out["reason"] == next_seeds.TO_RUN
    assert f"1 run(s) of the round still running ({sweep / '0' / 'seed2'})" in out["message"]
    [running] = [t for t in out["todo"] if t["state"] == "running"]
    assert running["overrides"][-1] == "hydra.sweep.subdir=0/seed2"  # its own directory: a killed one resumes
    run_line(rows[2]["line"])
    write_run(sweep, "1/seed2", ["reward_mix=m1", "trainer.seed=2"])
    out = ask(sweep, capsys)
    assert out["reason"] == next_seeds.RUNNING and not out["done"]
    assert next_seeds.main([str(sweep)]) == 0
    assert "Nothing to start until they end" in capsys.readouterr().out
    shutil.rmtree(sweep / "0" / "seed2")
    write_run(sweep, "0/seed2", ["reward_mix=m0", "trainer.seed=2"])  # it ended: the look, without m1
    out = ask(sweep, capsys)
    assert out["configurations"][1]["stop"] == sequential.FAILED and out["configurations"][1]["line"] is None
    assert "a run failed" in out["configurations"][1]["stopped"]


def drive(sweep: Path, capsys, check_jobs: bool) -> tuple[dict, int]:
    """Ask next_seeds, run exactly its lines, again, until it has nothing to run: its last answer and the rounds."""
    for rounds in range(2 * MAX_SEEDS):
        out = ask(sweep, capsys)
        if out["done"]:
            return out, rounds
        assert out["reason"] == next_seeds.TO_RUN and not any(t["state"] == "running" for t in out["todo"])
        ran = [run for c in out["configurations"] if c["line"] for run in run_line(c["line"])]
        if check_jobs:  # the very runs hydra/sweeper=seeds launches for this round
            todo = [(t["index"], t["seed_index"]) for t in out["todo"]]
            assert sorted(ran) == sorted(sweeper_jobs(sweep, todo))
    raise AssertionError("next_seeds asked for more rounds than max_seeds allows")


def full_data(sweep: Path) -> SweepResults:
    """The seeds sweep's design over every seed of the truth on disk: what it ends with is sequential.plan over
    the full simulated data (the runs past a configuration's stop are there, unread)."""
    seeds_sweep(sweep, {c: MAX_SEEDS for c in range(K)})
    return SEEDS.read(sweep)


@pytest.mark.parametrize("kind", ["seeds sweep", "grid"])
def test_running_its_lines_until_decided_ends_where_the_seeds_sweeper_ends(tmp_path, capsys, kind):
    sweep = seeds_sweep(tmp_path / "driven") if kind == "seeds sweep" else grid(tmp_path / "driven")
    out, rounds = drive(sweep, capsys, check_jobs=kind == "seeds sweep")
    full = full_data(tmp_path / "full")
    plan = SEEDS.design(full).plan
    assert plan.done and rounds >= 2 and out["reason"] in (next_seeds.DECIDED, next_seeds.ENDED)
    assert "Nothing to run" in out["message"] and f"sweeps.report {sweep}" in out["message"]
    # the same runs per configuration, the same reasons to stop
    assert [(c["seeds"], c["stop"]) for c in out["configurations"]] == [
        (list(range(1, s.seeds + 1)), s.stop) for s in plan.states
    ]
    assert out["runs"] == plan.runs
    on_disk = sorted(run.summary.overrides for run in SweepResults.read(sweep).runs)
    assert on_disk == sorted(
        [f"reward_mix=m{c}", f"trainer.seed={seed}"]
        for c, s in enumerate(plan.states)
        for seed in range(1, s.seeds + 1)
    )
    # and the same verdicts: those next_seeds prints, and for a seeds sweep every row its report has
    rows = {row.config: row for row in full.comparisons}
    assert {c["config"]: (c["verdict"], c["delta"], c["low"]) for c in out["configurations"]} == {
        config: (row.verdict, row.delta, row.low) for config, row in rows.items()
    }
    assert {c["verdict"] for c in out["configurations"]} >= {"reference", "worse"}
    # the report of either (the grid's too, once its added seeds ran) says the same: the design's verdicts
    records = {r["config"]: r for r in full.verdict_records()}
    report = {r["config"]: r for r in of_sweep(sweep).read(sweep).verdict_records()}
    assert {c: (r["verdict"], r["delta"], r["low"]) for c, r in report.items()} == {
        c: (r["verdict"], r["delta"], r["low"]) for c, r in records.items()
    }
    if kind == "seeds sweep":
        assert SEEDS.read(sweep).verdict_records() == full.verdict_records()


def test_the_defaults_are_the_seeds_sweepers():
    from grpo_sweep.search.seeds.config import GRPOSeedsSweeperConf

    sweeper = GRPOSeedsSweeperConf()
    assert sequential.Settings() == sequential.Settings(
        sweeper.min_seeds, sweeper.max_seeds, sweeper.max_runs, sweeper.alpha
    )


def study(sweep: Path) -> None:
    grid(sweep)
    declare_sweeper(sweep, "optuna")


def exit_code(argv: list[str]) -> int:
    try:
        return next_seeds.main(argv)
    except SystemExit as exc:  # argparse's refusals
        return exc.code


@pytest.mark.parametrize(
    "make, options, message",
    [
        (lambda d: d, [], "holds no runs (no <run>/.hydra/config.yaml under it) and no seeds.json"),
        (lambda d: write_run(d, ".", ["reward_mix=m0", "trainer.seed=1"]), [], "is one run's directory, not a sweep's"),
        (
            lambda d: [write_run(d, str(s), ["reward_mix=m0", f"trainer.seed={s}"]) for s in (1, 2)],
            [],
            "one configuration (reward_mix=m0): next_seeds allocates seeds between configurations",
        ),
        (
            lambda d: [write_run(d, str(c), [f"reward_mix=m{c}", "trainer.seed=1"]) for c in (0, 1)],
            [],
            "no run has a seed override that varies (e.g. trainer.seed=1,2,3)",
        ),
        (study, [], "is an Optuna study: its sampler picks the configurations"),
        (grid, ["--alpha", "1.5"], "--alpha=1.5: use a family-wise error rate strictly between 0 and 1"),
        (grid, ["--alpha", "often"], "argument --alpha: 'often': use a family-wise error rate"),
        (grid, ["--min-seeds", "1"], "--min-seeds=1: use a whole number >= 2"),
        (grid, ["--max-seeds", "two"], "argument --max-seeds: 'two': use a whole number"),
        (grid, ["--max-runs", "4"], "--max-runs=4: the first round alone is 3 configurations x 2 seeds = 6 runs"),
    ],
)
def test_bad_input_is_one_line_naming_it_and_exit_2(tmp_path, capsys, make, options, message):
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    make(sweep)
    code = exit_code([str(sweep), *options])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and err.startswith("error: ") and message in err, err


def test_a_missing_directory_is_named(tmp_path, capsys):
    assert next_seeds.main([str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err.strip() == f"error: sweep_dir={tmp_path / 'nope'} is not a directory"


def test_status_says_a_round_of_a_seeds_sweep_is_due_instead_of_all_runs_ended(tmp_path):
    from grpo_sweep.sweeps.status import report

    sweep = seeds_sweep(tmp_path / "sweep", {0: 2, 1: 2, 2: 2})  # the first round ended
    text, finished = report(sweep)
    due = sequential.plan(K, sequential.Settings(), lambda c, i: VAL[c, i] if i < 2 else None).todo
    assert not finished and "All runs ended" not in text and not (sweep / "sweep_table.md").exists()
    assert (
        f"The seeds sweep is not over: a round is due, {len(due)} run(s) (a detached sweep's seeds-driver job "
        f"submits it; else their commands: python -m grpo_sweep.sweeps.next_seeds {sweep}, or the sweep's "
        f"command again with hydra.sweep.dir={sweep})."
    ) in text
    text, finished = report(seeds_sweep(tmp_path / "new"))  # nothing ran yet: the first round is due
    assert not finished and text.startswith("The seeds sweep is not over: a round is due, 6 run(s)")
    text, finished = report(full_data(tmp_path / "full").sweep_dir)  # the design ended: as any sweep's end
    assert finished and "All runs ended." in text
    text, finished = report(grid(tmp_path / "grid"))  # a grid: its runs are all it has
    assert finished and "All runs ended." in text
