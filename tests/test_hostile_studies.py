"""Hostile input to an Optuna study: its settings refused in one line before a study directory is made (the table, as
tests/test_hostile_input.py runs its cases), and ``python -m grpo_sweep.search.study DIR`` on moved, copied, damaged
and read-only study directories: a study's directory is the study, it never reads or overwrites another's."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Callable

import pytest

from .conftest import SWEEPERS, compose, launch_here
from .hostile import Refused, args, slow, with_file


def study(*overrides: str) -> Callable[[Path], list[str]]:
    return args("-m", "hparams_search=lr", *overrides)


def space(*params: str, overrides: tuple[str, ...] = ()) -> Callable[[Path], list[str]]:
    """A study (hparams_search=bad, from {inputs}) whose space is ``params`` (a YAML line each)."""
    text = (
        "# @package _global_\ndefaults:\n  - /hparams_search/common/study_dir\n"
        "  - override /hydra/sweeper: grpo_optuna\n"
        "hydra:\n  sweeper:\n    study_name: bad\n    n_trials: 2\n    params:\n"
        + "".join(f"      {p}\n" for p in params)
    )
    return with_file(
        "hparams_search/bad.yaml", text, "-m", "--config-dir", "{inputs}", "hparams_search=bad", *overrides
    )


LONG = "s" * 10_000
PROMPT, COMPLETION = "trainer.max_prompt_length", "trainer.max_completion_length"
# tests/test_hostile_input.py runs this table ("Optuna studies") with the others; a study refusal costs ~1.5 s (Hydra
# composes the sweep three times), so beyond one case of each kind they are the slow stage's
CASES = [
    # the budget and the workers: a study of none did nothing and said it had, or ran with "0 worker(s)"
    ("n_trials=0", study("hydra.sweeper.n_trials=0"), Refused("hydra.sweeper.n_trials=0; use a whole number >= 1")),
    slow(
        (
            "n_trials=-1",
            study("hydra.sweeper.n_trials=-1"),
            Refused("hydra.sweeper.n_trials=-1; use a whole number >= 1"),
        )
    ),
    slow(
        (
            "n_workers=0",
            study("hydra.sweeper.n_workers=0"),
            Refused("hydra.sweeper.n_workers=0; use a whole number >= 1"),
        )
    ),
    slow(("n_trials=1.5", study("hydra.sweeper.n_trials=1.5"), Refused("hydra.sweeper.n_trials=1.5"))),
    slow(
        (
            "max_failures=-1",
            study("hydra.sweeper.max_failures=-1"),
            Refused("hydra.sweeper.max_failures=-1; use a whole number >= 0"),
        )
    ),
    slow(
        (
            "prune_every=0",
            study("hydra.sweeper.prune_every=0"),
            Refused("hydra.sweeper.prune_every=0; use a whole number"),
        )
    ),
    # a study's name is its directory's: it stays one directory under output_root
    (
        "study_name=../x",
        study("hydra.sweeper.study_name=../x"),
        Refused("hydra.sweeper.study_name='../x': it names a directory"),
    ),
    slow(
        (
            "study_name absolute",
            study("hydra.sweeper.study_name={inputs}/elsewhere"),
            Refused("hydra.sweeper.study_name='/"),
        )
    ),
    slow(
        ("study_name=..", study("hydra.sweeper.study_name=.."), Refused("hydra.sweeper.study_name='..': it names no"))
    ),
    slow(
        (
            "study_name empty",
            study("hydra.sweeper.study_name=''"),
            Refused("hydra.sweeper.study_name='': a name is needed"),
        )
    ),
    slow(
        (
            "study_name of 10,000 characters",
            study(f"hydra.sweeper.study_name={LONG}"),
            Refused("(10000 characters)': longer than a file name may be (255 bytes)"),
        )
    ),
    # an objective no run reports: every trial trained, then failed by heartbeat
    (
        "optimized_metric=val_nonexistent",
        study("optimized_metric=val_nonexistent"),
        Refused("optimized_metric='val_nonexistent' is no figure a run reports; use one of val_accuracy"),
    ),
    slow(
        (
            "objectives naming a term the mix lacks",
            study(
                "hydra.sweeper.objectives=[val_accuracy,val_rewards.nope]",
                "hydra.sweeper.direction=[maximize,maximize]",
            ),
            Refused("hydra.sweeper.objectives='val_rewards.nope' is no figure a run reports"),
        )
    ),
    slow(
        (
            "optimized_metric=val_rewards.<a term the mix lacks>",
            study("optimized_metric=val_rewards.nope"),
            Refused("optimized_metric='val_rewards.nope' is no figure a run reports"),
        )
    ),
    # two values that fail only together: refused whichever order the choices are in
    (
        "a combination that fails, its choices low first",
        space(
            f"{PROMPT}: {{type: categorical, choices: [64, 400]}}",
            f"{COMPLETION}: {{type: categorical, choices: [64, 400]}}",
        ),
        Refused(f"hydra.sweeper.params: {PROMPT}=400 {COMPLETION}=400 is refused"),
    ),
    slow(
        (
            "a combination that fails, ranges",
            space(f"{PROMPT}: {{type: int, low: 64, high: 400}}", f"{COMPLETION}: {{type: int, low: 16, high: 300}}"),
            Refused(f"hydra.sweeper.params: {PROMPT}=400 {COMPLETION}=300 is refused"),
        )
    ),
    # the dotted spelling on the command line: Hydra nests it; a wrong spec under it is named by its dotted key
    (
        "+hydra.sweeper.params.<dotted key> misspelt",
        study("+hydra.sweeper.params.optimizer.weight_decay={{typ:float,low:0,high:0.1}}"),
        Refused("hydra.sweeper.params.optimizer.weight_decay.type=None; use one of"),
    ),
    slow(
        (
            "+hydra.sweeper.params.<dotted key>=5",
            study("+hydra.sweeper.params.optimizer.weight_decay=5"),
            Refused("hydra.sweeper.params.optimizer.weight_decay=5: give {type: ..., ...}"),
        )
    ),
]


def test_the_dotted_spelling_on_the_command_line_searches_the_key(tmp_path):
    """`+hydra.sweeper.params.optimizer.weight_decay={...}` (Hydra nests it): a parameter, as in a YAML file (it was
    refused as `hydra.sweeper.params.optimizer.type=None`)."""
    from grpo_sweep.search.optuna.space import SearchSpace

    spec = {"type": "float", "low": 0.0, "high": 0.1}
    space = SearchSpace.from_config({"optimizer": {"weight_decay": spec}}, None, compose())
    assert space.params == {"optimizer.weight_decay": spec}
    out = launch_here(
        [
            "-m",
            "hparams_search=lr",
            "+hydra.sweeper.params.optimizer.weight_decay={type:float,low:0,high:0.1}",
            "hydra/launcher=submitit_local",
            "hydra.launcher.dry_run=true",
        ],
        tmp_path,
    )
    assert out.returncode in (0, None), out.stderr[-2000:]
    assert "dry run" in out.stdout + out.stderr


# --- python -m grpo_sweep.search.study DIR on directories that were moved, copied, damaged ------------------------
def made_study(sweep_dir: Path, name: str, values: list[float], legacy: bool = False) -> Path:
    """A study's directory as its sweeper leaves it (multirun.yaml, optuna.db, study.json), one complete trial per
    value. ``legacy``: study.json as written before, the database's absolute path."""
    import optuna
    from optuna.distributions import FloatDistribution

    from grpo_sweep.search.optuna.config import write_study_file

    sweep_dir.mkdir(parents=True)
    (sweep_dir / "multirun.yaml").write_text(
        f"hydra:\n  sweeper:\n    _target_: {SWEEPERS['optuna']}\n    storage: null\n"
    )
    url = f"sqlite:///{(sweep_dir / 'optuna.db').resolve()}"
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        made = optuna.create_study(study_name=name, storage=url, direction="maximize")
    finally:
        optuna.logging.set_verbosity(verbosity)
    lr = FloatDistribution(1e-5, 1e-2, log=True)
    for i, value in enumerate(values):
        made.add_trial(
            optuna.trial.create_trial(
                params={"optimizer.learning_rate": 1e-4 * (i + 1)},
                distributions={"optimizer.learning_rate": lr},
                value=value,
                user_attrs={
                    "overrides": [f"optimizer.learning_rate={1e-4 * (i + 1)}"],
                    "seeds": [42],
                    "seed_values": {"42": [value]},
                },
            )
        )
    write_study_file(
        sweep_dir,
        {
            "study_name": name,
            "storage": url if legacy else None,
            "objectives": ["val_accuracy"],
            "directions": ["maximize"],
            "n_trials": 4,
            "max_failures": 3,
            "seeds_per_trial": 1,
            "seed_key": "trainer.seed",
            "reproduce_overrides": ["model.tiny.warm_start.steps=0"],
            "scales": {"optimizer.learning_rate": "log"},
        },
    )
    return sweep_dir


def study_command(sweep_dir: Path, capsys) -> tuple[int, list[str]]:
    from grpo_sweep.search.optuna.study import main

    code = main([str(sweep_dir), "--no-plots"])
    out = capsys.readouterr()
    return code, [line for line in (out.out + out.err).splitlines() if line.strip()]


def refused_in_one_line(code: int, lines: list[str], text: str) -> None:
    assert code != 0 and len(lines) == 1 and lines[0].startswith("grpo-sweep: "), lines
    assert text in lines[0] and "Traceback" not in lines[0], lines


def files_of(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("legacy", [False, True], ids=["study.json of now", "study.json with an absolute path"])
def test_a_moved_study_reports_itself_and_never_overwrites_the_new_one(tmp_path, capsys, legacy):
    """mv studies/rs studies/rs_archived; the same study command makes a new studies/rs; `study rs_archived` reports
    rs_archived's own trials and writes its own best.yaml (it read, and overwrote, the new study's)."""
    studies = tmp_path / "studies"
    made_study(studies / "rs", "rs", [0.3, 0.5], legacy=legacy)
    (studies / "rs").rename(studies / "rs_archived")
    made_study(studies / "rs", "rs", [0.9])
    assert study_command(studies / "rs", capsys)[0] == 0
    new = files_of(studies / "rs")
    code, lines = study_command(studies / "rs_archived", capsys)
    assert code == 0, lines
    text = "\n".join(lines)
    assert "2 trials (2 complete)" in text and "val_accuracy 0.500" in text, text
    assert str(studies / "rs_archived" / "optuna.db") in text and str(studies / "rs" / "optuna.db") not in text
    assert files_of(studies / "rs") == new
    assert "0.5" in (studies / "rs_archived" / "best.yaml").read_text()


@pytest.mark.parametrize(
    "damage, text",
    [
        (lambda db: db.unlink(), "optuna.db is missing: the study's trials are kept there; nothing was written"),
        (lambda db: db.write_bytes(b"not a database " * 100), "cannot be read as study 's''s Optuna database"),
        (lambda db: db.write_bytes(b""), "cannot be read as study 's''s Optuna database"),
        (lambda db: db.write_bytes(db.read_bytes()[:2048]), "cannot be read as study 's''s Optuna database"),
        (lambda db: (db.unlink(), db.mkdir()), "optuna.db is not a file"),
    ],
    ids=["deleted", "garbage", "emptied", "cut short", "a directory"],
)
@pytest.mark.parametrize("legacy", [False, True], ids=["now", "absolute path"])
def test_a_copied_study_with_a_damaged_database_is_named_and_nothing_is_written(tmp_path, capsys, damage, text, legacy):
    """A copy whose optuna.db is gone or damaged: one line naming it (it silently reported the original's database),
    nothing written in the copy or the original."""
    original = made_study(tmp_path / "s", "s", [0.3, 0.5], legacy=legacy)
    copy = tmp_path / "copy"
    shutil.copytree(original, copy)
    damage(copy / "optuna.db")
    before, before_original = files_of(copy), files_of(original)
    code, lines = study_command(copy, capsys)
    refused_in_one_line(code, lines, text)
    assert str(copy / "optuna.db") in lines[0]
    assert files_of(copy) == before and files_of(original) == before_original


@pytest.mark.parametrize(
    "content, text",
    [
        ('{"study_name": "s", "storage": null, "objec', "study.json cannot be read as a study's: JSONDecodeError"),
        ("", "study.json cannot be read as a study's: JSONDecodeError"),
        ("[1, 2]", "study.json holds a JSON list, not a study's object"),
        ('{"storage": null}', "study.json has no study_name, objectives, directions"),
        (
            '{"study_name": "s", "objectives": ["val_accuracy"], "directions": "maximize"}',
            "study.json: directions='maximize' is not what a study writes there",
        ),
        (
            '{"study_name": 5, "objectives": ["val_accuracy"], "directions": ["maximize"]}',
            "study.json: study_name=5 is not what a study writes there",
        ),
        (
            '{"study_name": "s", "objectives": ["val_accuracy"], "directions": ["maximize"], "storage": 3}',
            "study.json: storage=3 is not what a study writes there",
        ),
        (
            '{"study_name": "s", "objectives": ["val_accuracy"], "directions": ["up"]}',
            "study.json: directions=['up'] do not match objectives=['val_accuracy']",
        ),
    ],
    ids=[
        "truncated",
        "empty",
        "a list",
        "no fields",
        "directions a string",
        "study_name a number",
        "storage a number",
        "direction up",
    ],
)
def test_a_damaged_study_json_is_named_in_one_line(tmp_path, capsys, content, text):
    sweep_dir = made_study(tmp_path / "s", "s", [0.3])
    (sweep_dir / "study.json").write_text(content)
    before = files_of(sweep_dir)
    code, lines = study_command(sweep_dir, capsys)
    refused_in_one_line(code, lines, text)
    assert str(sweep_dir / "study.json") in lines[0]
    assert files_of(sweep_dir) == before


def test_no_study_json_or_no_directory_is_one_line(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    refused_in_one_line(*study_command(tmp_path / "empty", capsys), "holds no study.json")
    refused_in_one_line(*study_command(tmp_path / "nowhere", capsys), "holds no study.json")
    (tmp_path / "a_file").write_text("x")
    refused_in_one_line(*study_command(tmp_path / "a_file", capsys), "holds no study.json")


def test_a_study_of_another_name_in_the_database_is_named(tmp_path, capsys):
    sweep_dir = made_study(tmp_path / "s", "s", [0.3])
    info = json.loads((sweep_dir / "study.json").read_text())
    (sweep_dir / "study.json").write_text(json.dumps({**info, "study_name": "other"}))
    before = files_of(sweep_dir)
    refused_in_one_line(*study_command(sweep_dir, capsys), f"{sweep_dir / 'optuna.db'} holds no study 'other'")
    assert files_of(sweep_dir) == before


def test_a_user_given_storage_stays_the_study_and_the_report_says_which(tmp_path, capsys):
    """A storage the user gave (here an SQLite file outside the study's directory) is read wherever the directory
    goes, and the report names it."""
    sweep_dir = made_study(tmp_path / "s", "s", [0.3, 0.5])
    shared = tmp_path / "shared.db"
    shutil.move(sweep_dir / "optuna.db", shared)
    info = json.loads((sweep_dir / "study.json").read_text())
    (sweep_dir / "study.json").write_text(json.dumps({**info, "storage": f"sqlite:///{shared}"}))
    code, lines = study_command(sweep_dir, capsys)
    assert code == 0, lines
    assert f"(its trials are read from sqlite:///{shared}, hydra.sweeper.storage, not from {sweep_dir})" in lines


def test_a_read_only_study_directory_is_reported_and_nothing_written(tmp_path, capsys, monkeypatch):
    """A study directory nobody may write (OSError: [Errno 30] on a read-only mount): the report prints, and its last
    line says what was not written. Root writes whatever the mode says (the tests run as root here, and a process run
    as another user cannot reach a virtual environment under /root): there, the command's own question, whether the
    directory can be written, is answered as a read-only mount answers it."""
    import errno

    from grpo_sweep.search.optuna import report

    root = tmp_path
    try:
        sweep_dir = made_study(root / "s", "s", [0.3, 0.5])
        for path in [sweep_dir, *sweep_dir.iterdir()]:
            os.chmod(path, 0o555 if path.is_dir() else 0o444)
        if os.geteuid() == 0:
            monkeypatch.setattr(report, "cannot_write", lambda directory: os.strerror(errno.EROFS))
        before = files_of(sweep_dir)
        code, lines = study_command(sweep_dir, capsys)
        text = "\n".join(lines)
        assert code == 0 and "Traceback" not in text, text
        assert "2 trials (2 complete)" in text
        assert lines[-1].startswith(f"{sweep_dir} cannot be written ("), lines[-1]
        assert lines[-1].endswith("study.md, best.yaml and the plots were not written"), lines[-1]
        assert "saved with its params" not in text
        assert files_of(sweep_dir) == before
    finally:  # pytest removes tmp_path
        for path in root.rglob("*"):
            os.chmod(path, 0o755)


def test_the_space_check_is_independent_of_the_choices_order():
    """Each order of two parameters' choices gives the same points to check (the first choice was taken as the other
    parameters' base: [64, 400] let 400 + 400 through, [400, 64] refused it)."""
    from grpo_sweep.search.optuna.space import SearchSpace

    cfg = compose()

    def picked(order):
        params = {key: {"type": "categorical", "choices": order} for key in (PROMPT, COMPLETION)}
        every, points = SearchSpace.from_config(params, None, cfg).edge_points(cfg)
        assert every
        return sorted(tuple(sorted(p.items())) for p, _ in points)

    assert picked([64, 400]) == picked([400, 64])
    assert ((COMPLETION, 400), (PROMPT, 400)) in picked([64, 400])
