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
import os
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


def more_processes_than_cores(inputs: Path) -> list[str]:
    # one more than this machine has for the test, whatever it has; a batch of 8 keeps the train split filled
    cores = len(os.sched_getaffinity(0))
    return ["distributed=ddp", f"distributed.nproc_per_node={cores + 1}", "trainer.per_device_train_batch_size=8"]


OVERLONG = "+reward_mix.o.factory=trl.rewards.get_soft_overlong_punishment"
REPETITION = "+reward_mix.r.factory=trl.rewards.get_repetition_penalty_reward"
TEN_ROWS = jsonl_text([{"prompt": f"{i} + 1?", "ground_truth": str(i + 1)} for i in range(10)])

# --- Values: trainer, optimizer, processes, factory arguments; runs that would train nothing --------------------
VALUES: list[Case] = [
    ("batch of more prompts than the train split",
     args("trainer.per_device_train_batch_size=1024", "trainer.max_steps=1"),
     Refused("trainer.per_device_train_batch_size x steps_per_generation = 1024 x 1 = 1024 completions a generation, "
             "128 prompts of trainer.num_generations=8 each, but the train split has 115 (data.arithmetic.n_train)")),
    ("processes x batch more prompts than the train split",
     args("distributed=ddp", "distributed.nproc_per_node=2", "trainer.per_device_train_batch_size=512"),
     Refused("trainer.per_device_train_batch_size x distributed.nproc_per_node x steps_per_generation = 512 x 2 x 1")),
    ("file data's train split smaller than a generation's prompts",
     with_file("d.jsonl", TEN_ROWS, "data=file", "data.path={inputs}/d.jsonl", "trainer.per_device_train_batch_size=80"),
     Refused("10 prompts of trainer.num_generations=8 each, but the train split has 8 (data.path, less the carved")),
    ("per_device_train_batch_size=0", args("trainer.per_device_train_batch_size=0"),
     Refused("trainer.per_device_train_batch_size=0: must be >= 1")),
    ("gradient_accumulation_steps=0", args("trainer.gradient_accumulation_steps=0"),
     Refused("trainer.gradient_accumulation_steps=0: must be >= 1")),
    ("learning_rate=nan", args("optimizer.learning_rate=nan"),
     Refused("optimizer.learning_rate=nan: must be a finite number")),
    ("adam_beta1=2.0", args("optimizer.adam_beta1=2.0"), Refused("optimizer.adam_beta1=2.0: must be in [0, 1)")),
    ("weight_decay<0", args("optimizer.weight_decay=-0.1"), Refused("optimizer.weight_decay=-0.1: must be >= 0")),
    ("temperature=-1.0", args("trainer.temperature=-1.0"), Refused("trainer.temperature=-1.0: must be > 0")),
    ("top_p=0.0", args("trainer.top_p=0.0"), Refused("trainer.top_p=0.0: must be in (0, 1]")),
    ("trainer.args.epsilon=-1.0", args("+trainer.args.epsilon=-1.0"),
     Refused("trainer.args.epsilon=-1.0: must be >= 0")),
    ("trainer.args.epsilon_high=inf", args("+trainer.args.epsilon_high=inf"),
     Refused("trainer.args.epsilon_high=inf: must be a finite number")),
    ("trainer.args.num_iterations=0", args("+trainer.args.num_iterations=0"),
     Refused("trainer.args.num_iterations=0: must be >= 1")),
    ("more CPU processes than cores", more_processes_than_cores, Refused("processes on a CPU machine with")),
    ("factory argument of the wrong type",
     args(OVERLONG, "+reward_mix.o.factory_args.max_completion_len=abc", "+reward_mix.o.factory_args.soft_punish_cache=4"),
     Refused("reward_mix.o.factory_args.max_completion_len='abc': trl.rewards.get_soft_overlong_punishment's "
             "max_completion_len takes int, not str")),
    ("factory argument outside its domain", args(REPETITION, "+reward_mix.r.factory_args.ngram_size=0"),
     Refused("reward_mix.r.factory_args.ngram_size=0: must be >= 1")),
    ("reward param of the wrong type",
     args("+reward_mix.x.fn=length", "+reward_mix.x.weight=0.1", "+reward_mix.x.params.max_completion_length=abc"),
     Refused("reward_mix.x.params.max_completion_length='abc': reward length's max_completion_length takes int, not str")),
    ("factory raising while it is built",
     args("+reward_mix.f.factory=tests.reward_plugins.make_failing_reward", "+reward_mix.f.factory_args.n=9"),
     Refused("calling it with {'n': 9} raised ValueError: n=9 is too big")),
    ("reward failing on every sample",
     args("reward_errors=skip", "+reward_mix.bad.fn=tests.reward_plugins.always_raises", "+reward_mix.bad.weight=0.5",
          "trainer.max_steps=2", "trainer.save_steps=2"),
     Failed("reward_mix.bad failed on every sample of training")),
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
