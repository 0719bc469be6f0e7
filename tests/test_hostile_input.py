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
SEARCH: list[Case] = [
]

# --- Credentials: never on disk, never echoed ---------------------------------------------------------------------
CREDENTIALS: list[Case] = [
]

# --- The judge under faults ----------------------------------------------------------------------------------------
JUDGE: list[Case] = [
]

# --- What Hydra and the process itself print: type errors, a killed rank, an interrupted factory -----------------
STOP = "+reward_mix.stop.weight=1"
TOP: list[Case] = [
    ("distributed.nproc_per_node=two", args("distributed.nproc_per_node=two"),
     Refused("Error merging override distributed.nproc_per_node=two: Value 'two' of type 'str' could not be converted to Integer")),
    ("distributed.nproc_per_node=1.5", args("distributed.nproc_per_node=1.5"),
     Refused("Error merging override distributed.nproc_per_node=1.5: Value '1.5' of type 'float' could not be converted to Integer")),
    ("trainer.max_steps=1e9", args("trainer.max_steps=1e9"),
     Refused("Error merging override trainer.max_steps=1e9: Value '1000000000.0' of type 'float' could not be converted to Integer")),
    ("unknown key lora.rr=3", args("lora.rr=3"),
     Refused("Could not override 'lora.rr': Key 'rr' not in 'LoraConfig'; To append to your config use +lora.rr=3")),
    ("unknown group option reward_mix=nope", args("reward_mix=nope"),
     Refused("Could not find 'reward_mix/nope'; options: correct, format, format_correct, length, none, smoke")),
    ("bad override syntax lora.r=[", args("lora.r=["), Refused("lora.r=[: no viable alternative at input '['")),
    ("-m with a wrong-typed sweep value lora.r=two,3", args("-m", "lora.r=two,3"),
     Refused("Error merging override lora.r=two: Value 'two' of type 'str' could not be converted to Integer")),
    ("-m with an unknown key lora.rr=3,4", args("-m", "lora.rr=3,4"), Refused("Could not override 'lora.rr'")),
    ("-m trainer.num_generations=1 (a refused sweep)", args("-m", "trainer.num_generations=1"),
     Refused("trainer.num_generations=1: GRPO compares completions within a group, use >= 2; no run was started")),
    ("a reward factory raising KeyboardInterrupt",
     args("+reward_mix.stop.factory=tests.reward_plugins.make_interrupting_reward", STOP),
     Refused("reward_mix.stop.factory=tests.reward_plugins.make_interrupting_reward raised KeyboardInterrupt at the gate")),
    ("-m with a reward factory raising KeyboardInterrupt",
     args("-m", "+reward_mix.stop.factory=tests.reward_plugins.make_interrupting_reward", STOP),
     Refused("reward_mix.stop.factory=tests.reward_plugins.make_interrupting_reward raised KeyboardInterrupt at the "
             "gate; no run was started")),
    ("a reward factory raising SystemExit(3)", args("+reward_mix.stop.factory=tests.reward_plugins.make_exiting_reward", STOP),
     Refused("reward_mix.stop.factory=tests.reward_plugins.make_exiting_reward raised SystemExit: 3 at the gate")),
    ("an interpolation that fails, hydra.run.dir=${oops}", args("hydra.run.dir=${{oops}}"),
     Refused("hydra.run.dir: Interpolation key 'oops' not found")),
    ("-m with an interpolation that fails, lora.r=${oops}", args("-m", "lora.r=${{oops}}"),
     Refused("lora.r: Interpolation key 'oops' not found; no run was started")),
    ("-m with a sweep type the sweeper lacks, lora.r=interval(1,3)", args("-m", "lora.r=interval(1,3)"),
     Refused("BasicSweeper does not support sweep type : INTERVAL_SWEEP")),
    ("-m hydra.sweeper.max_batch_size=0", args("-m", "lora.r=8,16", "hydra.sweeper.max_batch_size=0"),
     Refused("hydra.sweeper.max_batch_size=0: a batch holds at least one run")),
    ("-m hydra/launcher=nope", args("-m", "hydra/launcher=nope", "lora.r=8,16"),
     Refused("Could not find 'hydra/launcher/nope'; options: basic, grpo_basic")),
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
