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
JUDGE = "+reward_mix.judge.factory=grpo_sweep.rewards.judge.llm_judge"
JUDGE_MODEL = "+reward_mix.judge.factory_args.model=m"
CREDENTIALS: list[Case] = [
    # the refusal shows the URL with its password masked (the value named, the secret not)
    ("password in a judge's base_url",
     args(JUDGE, JUDGE_MODEL, "+reward_mix.judge.factory_args.base_url=http://judge:s3cretpw@127.0.0.1:18080/v1"),
     Refused("reward_mix.judge.factory_args.base_url=http://judge:***@127.0.0.1:18080/v1: a password in a URL is "
             "written into the run's files; put the URL in an environment variable and write ${oc.env:JUDGE_URL}")),
    ("password in a URL in a list", args("logger.tags=[run-a,http://me:hunter2pw@tracker.example/x]"),
     Refused("logger.tags.1=http://me:***@tracker.example/x: a password in a URL is written into the run's files")),
    ("token pasted as the judge's key_env",
     args(JUDGE, JUDGE_MODEL, "+reward_mix.judge.factory_args.base_url=http://127.0.0.1:1/v1",
          "+reward_mix.judge.factory_args.key_env=sk-abcdef1234567890abcdef"),
     Refused("factory_args.key_env must name the environment variable that holds the API key")),
    ("token in any config value", args("logger.notes=hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567"),
     Refused("logger.notes=***: an API token is written into the run's files; put the token in an environment "
             "variable and write ${oc.env:LOGGER_TOKEN}")),
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
