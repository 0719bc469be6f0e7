"""Hostile input, third round: the readers of a sweep directory and the launchers (issue 52).

Readers: every command that reads a sweep (report, status, next_seeds, the end-of-sweep table) names each damaged
or missing run file it meets and says what it did instead; none is dropped without a word, none ends in a
traceback; a read-only sweep directory is still read and printed. Launchers: ``hydra.sweep.subdir=j${hydra.job.id}``
gives j0, j1 on every grpo-sweep launcher; submitit_local stays grpo-sweep's after Hydra restores its global state.
Hydra's own launcher suite and the refusal of another app: tests/test_hydra_launcher_suite.py.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from grpo_sweep.reading import report as reading_report
from grpo_sweep.reading.results import SweepResults
from grpo_sweep.reading.tables import sweep_table
from grpo_sweep.search.seeds import next_seeds
from grpo_sweep.sweeps import report, status

from .conftest import FAST, launch_here
from .hostile import Trains, args, slow
from .test_launchers import fake_sbatch  # noqa: F401 (a fixture)
from .test_next_seeds import write_run

# --- launches ----------------------------------------------------------------------------------------------------
SHORT = ("trainer.max_steps=2", "trainer.save_steps=2")
JOB_ID = "hydra.sweep.subdir=j${{hydra.job.id}}"  # run_case str.format()s the arguments


def runs_named_j0_j1(out_dir: Path) -> None:
    assert sorted(p.parent.name for p in out_dir.rglob("summary.json")) == ["j0", "j1"]


# tests/test_hostile_input.py runs this table ("Launchers") with the others; they train (two short runs each, ~8-25 s):
# the slow stage's, and the gate's numbering of the run directories is checked fast by the dry runs below
CASES = [
    slow(
        (
            "-m hydra.sweep.subdir=j${hydra.job.id} on the local launcher",
            args("-m", JOB_ID, "lora.r=8,16", *SHORT),
            Trains(also=runs_named_j0_j1),
        )
    ),
    slow(
        (
            "-m hydra.sweep.subdir=j${hydra.job.id} with hydra/sweeper=basic hydra/launcher=local",
            args("-m", "hydra/sweeper=basic", "hydra/launcher=local", JOB_ID, "lora.r=8,16", *SHORT),
            Trains(also=runs_named_j0_j1),
        )
    ),
]


@pytest.mark.parametrize("launcher", ["submitit_local", "slurm"])
def test_the_job_id_names_the_planned_run_dirs_of_the_submitit_launchers(launcher, tmp_path, request):
    """The dry run prints the directories the gate planned: each job's number as its id, as the job then uses. The
    SLURM launcher's, on a machine without SLURM, with a stand-in sbatch on PATH (its gate asks for one)."""
    env = request.getfixturevalue("fake_sbatch")[0] if launcher == "slurm" else None
    out = launch_here(
        ["-m", f"hydra/launcher={launcher}", "hydra.launcher.dry_run=true", "hydra.sweep.subdir=j${hydra.job.id}"]
        + ["lora.r=8,16"],
        tmp_path,
        env=env,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    dirs = [line.rsplit("run dir ", 1)[1] for line in out.stdout.splitlines() if "run dir " in line]
    assert [Path(d).name for d in dirs] == ["j0", "j1"], out.stdout


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["pool", "submitit_local"])
def test_the_job_id_is_the_jobs_number_where_it_trains(launcher, tmp_path):
    out = launch_here(
        ["-m", f"hydra/launcher={launcher}", "hydra.sweep.subdir=j${hydra.job.id}", "lora.r=8,16", *FAST, *SHORT],
        tmp_path,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert sorted(p.parent.name for p in tmp_path.rglob("summary.json")) == ["j0", "j1"]


def test_submitit_local_stays_grpo_sweeps_after_hydra_restores_its_state():
    """Hydra's test fixtures and job processes restore its global state, which re-runs its plugin scan: the stock
    submitit launcher's module stores its entry again; grpo-sweep's comes back over it."""
    from hydra import compose, initialize_config_dir
    from hydra.core.singleton import Singleton

    from grpo_sweep.configstore import register_configs

    from .conftest import CONF

    register_configs()
    saved = Singleton.get_state()
    try:
        Singleton.set_state(Singleton.get_state())
        with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
            cfg = compose(config_name="config", overrides=["hydra/launcher=submitit_local"], return_hydra_config=True)
        assert cfg.hydra.launcher._target_ == "hydra_plugins.grpo_sweep_launcher.launcher.GrpoLocalLauncher"
    finally:
        Singleton.set_state(saved)


# --- readers -----------------------------------------------------------------------------------------------------


def two_configs(sweep: Path, seeds=(1, 2, 3)) -> Path:
    """reward_mix=m0,m1 x trainer.seed=<seeds> as a grid lands: runs 0, 1, ... (m0 clearly worse)."""
    n = 0
    for c in range(2):
        for seed in seeds:
            write_run(sweep, str(n), [f"reward_mix=m{c}", f"trainer.seed={seed}"])
            n += 1
    return sweep


def read_out(capsys, command, *argv) -> str:
    code = command.main([*map(str, argv)])
    out = capsys.readouterr()
    text = out.out + out.err
    assert "Traceback" not in text, text
    assert code == 0, text
    return text


def every_reader(sweep: Path, capsys) -> dict[str, str]:
    """What each command that reads the sweep shows: report.md, status (with the table once all runs ended)."""
    read_out(capsys, report, sweep, "--no-plots")
    return {
        "report.md": (sweep / "report.md").read_text(),
        "status": read_out(capsys, status, sweep),
        "table": sweep_table(SweepResults.read(sweep)),
    }


def damage(path: str, how: str):
    """A setup: damages run 3's (or the sweep's) ``path``: empty, cut (half its text), YAML cut short, a list, one
    bad line, a directory in its place, a plain file where a run's directory was, or gone."""

    def setup(sweep: Path) -> Path:
        target = sweep / path
        if how == "empty":
            target.write_text("")
        elif how == "cut":
            text = target.read_text()
            target.write_text(text[: len(text) // 2])
        elif how == "junk":
            target.write_text("hydra: {sweeper: [\n")
        elif how == "list":
            target.write_text(json.dumps([1, 2]))
        elif how == "bad line":
            lines = target.read_text().splitlines()
            lines[2] = "{not json"
            target.write_text("\n".join(lines) + "\n")
        elif how == "directory":
            target.unlink()
            target.mkdir()
        elif how == "file":
            shutil.rmtree(target)
            target.write_text("not a run")
        elif how == "gone":
            target.unlink()
        return sweep

    return setup


READER_CASES = [
    # reported: an empty outcomes file flipped a verdict with no word
    ("outcomes/test.jsonl empty", damage("3/outcomes/test.jsonl", "empty"), "3: outcomes/test.jsonl is empty"),
    # the second batch: the other ways a run file is damaged or missing
    (
        "outcomes/test.jsonl cut short",
        damage("3/outcomes/test.jsonl", "cut"),
        "3: outcomes/test.jsonl holds 32 of the run's 64 questions",  # its rows are of one length: cut between two
    ),
    (
        "outcomes/test.jsonl with one bad line",
        damage("3/outcomes/test.jsonl", "bad line"),
        "3: outcomes/test.jsonl line 3 is not a question's row",
    ),
    (
        "outcomes/test.jsonl a directory",
        damage("3/outcomes/test.jsonl", "directory"),
        "3: outcomes/test.jsonl cannot be read (IsADirectoryError",
    ),
    (
        "outcomes/test.jsonl missing where the others have theirs",
        damage("3/outcomes/test.jsonl", "gone"),
        "3: outcomes/test.jsonl is missing",
    ),
    ("summary.json holding a list", damage("3/summary.json", "list"), "summary.json holds a JSON list, not an object"),
    ("summary.json cut short", damage("3/summary.json", "cut"), "summary.json is not valid JSON (half-written?)"),
    ("summary.json a directory", damage("3/summary.json", "directory"), "summary.json cannot be read"),
    ("a run's directory replaced by a file", damage("3", "file"), "3: a run's directory is a file; not read"),
    ("multirun.yaml half-written", damage("multirun.yaml", "junk"), "multirun.yaml cannot be read"),
]


@pytest.mark.parametrize("name, setup, named", READER_CASES, ids=[c[0] for c in READER_CASES])
def test_every_reader_names_a_damaged_run_file(name, setup, named, tmp_path, capsys):
    sweep = two_configs(tmp_path / "sweep")
    (sweep / "multirun.yaml").write_text(
        "hydra:\n  sweeper:\n    _target_: hydra_plugins.grpo_sweep_grid.sweeper.GrpoBasicSweeper\n    verdicts: "
        "moderated\n"
    )
    setup(sweep)
    for where, shown in every_reader(sweep, capsys).items():
        assert named in shown, f"{where} does not name it:\n{shown}"


def test_a_damaged_outcomes_file_says_what_the_verdicts_used_instead(tmp_path, capsys):
    sweep = damage("3/outcomes/test.jsonl", "empty")(two_configs(tmp_path / "sweep"))
    shown = every_reader(sweep, capsys)
    for where in ("report.md", "table"):
        assert "not its per-question outcomes" in shown[where], shown[where]
    assert "## Damaged or missing files" in shown["report.md"]


def test_verdicts_json_names_the_damaged_files_it_was_read_past(tmp_path):
    from grpo_sweep.sweeps.sweep_end import write_verdicts

    for damaged in (False, True):
        sweep = two_configs(tmp_path / f"sweep{int(damaged)}")
        if damaged:
            damage("3/outcomes/test.jsonl", "empty")(sweep)
        write_verdicts(SweepResults.read(sweep))
        record = json.loads((sweep / "verdicts.json").read_text())
        named = [text for text in record["damaged_files"] if "outcomes/test.jsonl is empty" in text]
        assert len(named) == damaged and len(record["damaged_files"]) == damaged, record["damaged_files"]


def test_a_sweep_of_sound_files_has_no_notes(tmp_path, capsys):
    sweep = two_configs(tmp_path / "sweep")
    shown = every_reader(sweep, capsys)
    assert not [where for where, text in shown.items() if "Damaged or missing" in text]


def test_status_names_a_damaged_metrics_file_and_overrides_of_a_running_run(tmp_path, capsys):
    sweep = two_configs(tmp_path / "sweep")
    write_run(sweep, "6", ["reward_mix=m1", "trainer.seed=4"], status="running")
    (sweep / "6/metrics.jsonl").unlink()
    (sweep / "6/metrics.jsonl").mkdir()
    (sweep / "6/.hydra/overrides.yaml").write_text("- reward_mix=m1\n- [trainer.se")
    shown = read_out(capsys, status, sweep)
    assert "6: metrics.jsonl cannot be read (IsADirectoryError" in shown, shown
    assert "6: .hydra/overrides.yaml cannot be read" in shown, shown


def test_status_names_a_damaged_jobs_file(tmp_path, capsys):
    sweep = two_configs(tmp_path / "sweep")
    (sweep / "jobs.json").write_text('{"jobs": [{"num": 0, "job_id": "1", "run')
    shown = read_out(capsys, status, sweep)
    assert "jobs.json cannot be read" in shown and "6 runs" in shown, shown


def test_next_seeds_names_the_configuration_and_file_of_an_unreadable_summary(tmp_path, capsys):
    """Run 5 is reward_mix=m1's: the line of m0 says it stopped with its look at that run, not that a run of its
    own failed; m1's names its own run and the file."""
    sweep = two_configs(tmp_path / "sweep", seeds=(1, 2))
    (sweep / "3/summary.json").write_text('{"status": "compl')
    shown = read_out(capsys, next_seeds, sweep)
    m0, m1 = (next(line for line in shown.splitlines() if line.strip().startswith(f"reward_mix=m{c}")) for c in (0, 1))
    assert "stopped with its look at run 3 (reward_mix=m1) unreadable: summary.json is not valid JSON" in m0, shown
    assert "run 3 (reward_mix=m1) unreadable: summary.json is not valid JSON" in m1, shown
    assert "a run failed" not in m0, shown


def test_next_seeds_names_a_damaged_val_outcomes_file(tmp_path, capsys):
    sweep = damage("3/outcomes/val.jsonl", "empty")(two_configs(tmp_path / "sweep", seeds=(1, 2)))
    shown = read_out(capsys, next_seeds, sweep)
    assert "3: outcomes/val.jsonl is empty" in shown, shown


# --- a read-only sweep directory ---------------------------------------------------------------------------------


def read_only_by_chmod(sweep: Path, monkeypatch) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes whatever the mode says: the monkeypatched case stands in for it")
    for path in [sweep, *sweep.rglob("*")]:
        path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def read_only_by_patch(sweep: Path, monkeypatch) -> None:
    def refused(*args, **kwargs):
        raise OSError(30, "Read-only file system")

    for module in (reading_report, status):
        monkeypatch.setattr(module, "write_text_atomic", refused)
    monkeypatch.setattr(reading_report.figures, "write_plots", refused)


@pytest.mark.parametrize("read_only", [read_only_by_chmod, read_only_by_patch], ids=["chmod", "patched"])
def test_commands_that_only_read_print_on_a_read_only_sweep(read_only, tmp_path, capsys, monkeypatch):
    sweep = two_configs(tmp_path / "sweep")
    read_only(sweep, monkeypatch)
    try:
        shown = read_out(capsys, report, sweep)
        assert "# Sweep report: sweep" in shown, shown
        assert "Read-only file system" in shown or "Permission denied" in shown, shown
        assert [line for line in shown.splitlines() if line.startswith("note: could not write into")], shown
        shown = read_out(capsys, status, sweep)
        assert "All runs ended." in shown and "sweep_table.md not saved" in shown, shown
    finally:
        for path in [sweep, *sweep.rglob("*")]:
            path.chmod(path.stat().st_mode | stat.S_IWUSR)
