"""Hostile input, end to end: each input ends in one line naming it before anything is queued or written, or in a
run that is honest about what it did. docs/validation.md's "Hostile inputs" tables are these lists.

A case is ``(id, setup, expected)``. ``setup(inputs)`` writes whatever files the input needs under ``inputs`` and
returns the launch's arguments (``str.format``-ed with ``inputs=``). ``expected`` is one of:

- ``Refused(text)``: `python launch.py ARGS` exits non-zero, prints exactly one line, ``grpo-sweep: ...`` with
  ``text`` in it, no traceback, and leaves nothing under the output root (a refused sweep leaves no directory);
- ``Failed(text)``: the run started and ended ``failed`` (summary.json says so), the exit status is non-zero, the
  last line printed is one ``grpo-sweep: ...`` line with ``text`` in it, and nothing printed is a traceback;
- ``Trains()``: the run completes and trains (exit status 0, at least one optimizer step).

The launches run in this process (``conftest.launch_here``): a refusal costs the compose and the gate, not an
interpreter's start-up.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from .conftest import FAST, ROOT, launch_here


@dataclass(frozen=True)
class Refused:
    text: str


@dataclass(frozen=True)
class Failed:
    text: str


@dataclass(frozen=True)
class Trains:
    pass


Case = tuple[str, Callable[[Path], list[str]], "Refused | Failed | Trains"]


def args(*overrides: str) -> Callable[[Path], list[str]]:
    return lambda inputs: [o.format(inputs=inputs) for o in overrides]


def with_file(name: str, text: str, *overrides: str) -> Callable[[Path], list[str]]:
    """Writes ``text`` to ``inputs/name``, then the overrides (``{inputs}`` is the folder)."""
    def setup(inputs: Path) -> list[str]:
        path = inputs / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return args(*overrides)(inputs)

    return setup


def jsonl_text(rows: list) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


# --- Values: trainer, optimizer, processes, factory arguments; runs that would train nothing --------------------
VALUES: list[Case] = [
]

# --- Files the gate reads: data files, reward-model directories -------------------------------------------------
FILES: list[Case] = [
]

# --- The Optuna search: its space, its storage, a study whose every trial fails --------------------------------
def space(param: str, *overrides: str) -> Callable[[Path], list[str]]:
    """A study (hparams_search=bad, from {inputs}) whose space is the one parameter ``param`` (a YAML line)."""
    text = ("# @package _global_\ndefaults:\n  - /hparams_search/common/study_dir\n  - override /hydra/sweeper: grpo_optuna\n"
            f"hydra:\n  sweeper:\n    study_name: bad\n    n_trials: 2\n    params:\n      {param}\n")
    return with_file("hparams_search/bad.yaml", text, "-m", "--config-dir", "{inputs}", "hparams_search=bad", *overrides)


def study(*overrides: str) -> Callable[[Path], list[str]]:
    return args("-m", "hparams_search=lr", *overrides)


LR = "hydra.sweeper.params.optimizer.learning_rate"
SEARCH: list[Case] = [
    ("an int log range from 0", space("trainer.max_steps: {type: int, low: 0, high: 8, log: true}"),
     Refused("hydra.sweeper.params.trainer.max_steps={'type': 'int', 'low': 0, 'high': 8, 'log': True}: low >= 1 "
             "must hold for log=True")),
    ("a range to .inf", space("optimizer.learning_rate: {type: float, low: 1e-4, high: .inf}"),
     Refused(f"{LR}.high=inf: a float range needs a finite number here")),
    ("a learning-rate range [-1, -0.5]", space("optimizer.learning_rate: {type: float, low: -1, high: -0.5}"),
     Refused("hydra.sweeper.params: optimizer.learning_rate=-1 is refused: optimizer.learning_rate=-1: must be > 0")),
    ("a range from low: abc", space("optimizer.learning_rate: {type: float, low: abc, high: 1e-2}"),
     Refused(f"{LR}.low='abc': a float range needs a finite number here")),
    ("low above high", space("optimizer.learning_rate: {type: float, low: 1e-2, high: 1e-4}"),
     Refused(f"{LR}: float needs low < high, got low=0.01, high=0.0001")),
    ("step 0", space("trainer.max_steps: {type: int, low: 2, high: 8, step: 0}"),
     Refused("hydra.sweeper.params.trainer.max_steps={'type': 'int', 'low': 2, 'high': 8, 'step': 0}: step > 0 must hold")),
    ("a categorical with no choices", space("lora.r: {type: categorical, choices: []}"),
     Refused("hydra.sweeper.params.lora.r.choices=[]: categorical needs a non-empty list of choices")),
    ("a choice its key cannot take", space("lora.r: {type: categorical, choices: [8, -4]}"),
     Refused("hydra.sweeper.params: lora.r=-4 is refused: lora.r=-4: LoRA rank must be > 0")),
    ("a misspelt setting of a range", space("lora.r: {type: int, lo: 2, high: 8}"),
     Refused("hydra.sweeper.params.lora.r.lo: not a setting of a parameter of type int")),
    ("a study whose every trial fails in training",
     # (hydra.mode=MULTIRUN: the case's arguments follow FAST's overrides, where -m cannot stand)
     args("hydra.mode=MULTIRUN", "hparams_search=lr", "hydra.sweeper.n_trials=1", "+reward_mix.flaky.fn=tests.failing_rewards.flaky", "+reward_mix.flaky.weight=0.5",
           "+reward_mix.flaky.params.fail=true"),
     Failed("the only trial failed (Optuna study 'lr'); last error: RewardFailure: reward 'flaky' raised")),
    ("a PostgreSQL URL with a password, server down", study("hydra.sweeper.storage=postgresql://u:secretpw@127.0.0.1:1/optuna"),
     Refused("hydra.sweeper.storage='postgresql://u:***@127.0.0.1:1/optuna': a password in the URL would be saved")),
    ("a MySQL URL with a password, server down", study("hydra.sweeper.storage=mysql://u:pw@127.0.0.1:1/x"),
     Refused("hydra.sweeper.storage='mysql://u:***@127.0.0.1:1/x': a password in the URL would be saved")),
    ("a PostgreSQL URL, server down", study("hydra.sweeper.storage=postgresql://u@127.0.0.1:1/optuna"),
     Refused("hydra.sweeper.storage='postgresql://u@127.0.0.1:1/optuna' cannot be opened")),
    ("a storage that is no URL", study("hydra.sweeper.storage=notaurl"),
     Refused("hydra.sweeper.storage='notaurl' cannot be opened: ArgumentError")),
    ("an SQLite file where none can be made", study("hydra.sweeper.storage=sqlite:////proc/nope/x.db"),
     Refused("hydra.sweeper.storage='sqlite:////proc/nope/x.db' cannot be opened")),
]

# --- Credentials: never on disk, never echoed ---------------------------------------------------------------------
CREDENTIALS: list[Case] = [
]

# --- The judge under faults ----------------------------------------------------------------------------------------
JUDGE: list[Case] = [
]

# --- What Hydra and the process itself print: type errors, a killed rank, an interrupted factory -----------------
TOP: list[Case] = [
]

TABLES = {"Values": VALUES, "Files": FILES, "Search": SEARCH, "Credentials": CREDENTIALS, "Judge": JUDGE, "Top": TOP}
ALL = [case for cases in TABLES.values() for case in cases]


def output_lines(out) -> list[str]:
    return [line for line in (out.stdout + out.stderr).splitlines() if line.strip()]


def check(out, expected, out_dir: Path) -> None:
    lines = output_lines(out)
    text = "\n".join(lines)
    assert "Traceback" not in text, text
    if isinstance(expected, Refused):
        assert out.returncode not in (0, None), text
        assert len(lines) == 1 and lines[0].startswith("grpo-sweep: "), text
        assert expected.text in lines[0], text
        left = sorted(str(p.relative_to(out_dir)) for p in out_dir.rglob("*"))
        assert left == [], f"a refused launch left {left}"
    elif isinstance(expected, Failed):
        assert out.returncode not in (0, None), text
        assert lines and lines[-1].startswith("grpo-sweep: ") and expected.text in lines[-1], text
        statuses = [json.loads(p.read_text())["status"] for p in out_dir.rglob("summary.json")]
        assert statuses and set(statuses) == {"failed"}, statuses
    else:
        assert out.returncode in (0, None), text
        summaries = [json.loads(p.read_text()) for p in out_dir.rglob("summary.json")]
        assert summaries and all(s["status"] == "completed" and s["steps"] > 0 for s in summaries), summaries


@pytest.mark.parametrize("name, setup, expected", ALL, ids=[c[0] for c in ALL])
def test_hostile_input(name, setup, expected, tmp_path):
    inputs, out_dir = tmp_path / "inputs", tmp_path / "out"
    inputs.mkdir()
    out_dir.mkdir()
    launch_args = setup(inputs)
    if not isinstance(expected, Refused):
        launch_args = [*FAST, *launch_args]
    check(launch_here(launch_args, out_dir), expected, out_dir)


def describe(expected) -> str:
    if isinstance(expected, Refused):
        return f"refused: `{expected.text}`"
    if isinstance(expected, Failed):
        return f"failed: `{expected.text}`"
    return "trains"


def test_the_docs_tables_are_these_cases():
    """docs/validation.md's "Hostile inputs" section has one table per list above, its rows exactly the list's cases
    in order: `| <table letter><n> | id | outcome |`."""
    page = (ROOT / "docs" / "validation.md").read_text()
    section = page.split("## Hostile inputs", 1)[1].split("\n## ", 1)[0]
    for title, cases in TABLES.items():
        letter = title[0]
        block = section.split(f"### {title}", 1)[1].split("\n### ", 1)[0]
        rows = [line for line in block.splitlines() if line.startswith(f"| {letter}")]
        expected = [f"| {letter}{i} | {case_id} | {describe(outcome)} |" for i, (case_id, _, outcome) in enumerate(cases, 1)]
        assert rows == expected, title
