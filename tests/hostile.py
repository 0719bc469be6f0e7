"""The machinery of the hostile-input tables (tests/test_hostile_input.py's docstring says what a case is and what
each outcome asserts): the outcomes, the helpers that write a case's inputs, and ``run_case``, which launches one
case as a user would. The tables themselves live in tests/test_hostile_input.py and, for issue 52's surfaces, beside
the tests of what a launch cannot show (tests/test_hostile_{secrets,studies,runs,readers}.py)."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

from grpo_sweep.launching.gate import check_run, stop
from grpo_sweep.run.validate import ConfigError

from .conftest import FAST, compose, launch_here


@dataclass(frozen=True)
class Refused:
    text: str
    # what else the refusal must have left as it was: also(inputs) asserts it (a study's storage not made there)
    also: Callable | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Failed:
    text: str
    # what else the case's run must show: also(out, run_dir, summary) asserts it
    also: Callable | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Trains:
    # what else the sweep must show: also(out_dir) asserts it
    also: Callable | None = field(default=None, compare=False)


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


# the slow stage's (beside the end-to-end tests of whole sweeps): the cases that train, and the study refusals
# (~1.5 s a launch: Hydra composes the sweep three times) beyond one of each kind that the default run keeps
SLOW_CASES: set[str] = set()


def slow(case: Case) -> Case:
    SLOW_CASES.add(case[0])
    return case


def jsonl_text(rows: list) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


def judge(*factory_args: str) -> Callable[[Path], list[str]]:
    """An LLM-judge term given ``factory_args`` (``key=value`` each)."""
    return args(
        "+reward_mix.judge.factory=grpo_sweep.rewards.judge.llm_judge",
        "+reward_mix.judge.factory_args.model=m",
        *(f"+reward_mix.judge.factory_args.{a}" for a in factory_args),
    )


# The refusals of these tables are the gate's checks of one run's values and files: they are checked as the
# single-run gate (the Preflight callback) runs them, on the config launch.py composes, without the launch around
# them (a launch composes twice, ~0.4 s). That a launch prints the gate's line alone and writes nothing, whatever
# the launcher, is the Top table's and tests/test_gate.py's.
AT_THE_GATE = ("Values", "Files")


# The credentials the cases type: none may be printed, whatever the outcome.
TYPED_SECRETS = (
    "s3cretpw",
    "hunter2pw",
    "secretpw",
    "sk-abcdef1234567890abcdef",
    "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567",
)


def output_lines(out) -> list[str]:
    return [line for line in (out.stdout + out.stderr).splitlines() if line.strip()]


def check(out, expected, out_dir: Path) -> None:
    lines = output_lines(out)
    text = "\n".join(lines)
    assert "Traceback" not in text, text
    assert not [secret for secret in TYPED_SECRETS if secret in text], text
    if isinstance(expected, Refused):
        assert out.returncode not in (0, None), text
        assert len(lines) == 1 and lines[0].startswith("grpo-sweep: "), text
        assert expected.text in lines[0], text
        left = sorted(str(p.relative_to(out_dir)) for p in out_dir.rglob("*"))
        assert left == [], f"a refused launch left {left}"
    elif isinstance(expected, Failed):
        assert out.returncode not in (0, None), text
        assert lines and lines[-1].startswith("grpo-sweep: ") and expected.text in lines[-1], text
        summaries = {p.parent: json.loads(p.read_text()) for p in out_dir.rglob("summary.json")}
        assert summaries and {s["status"] for s in summaries.values()} == {"failed"}, summaries
        if expected.also:
            for run_dir, summary in summaries.items():
                expected.also(out, run_dir, summary)
    else:
        assert out.returncode in (0, None), text
        summaries = [json.loads(p.read_text()) for p in out_dir.rglob("summary.json")]
        assert summaries and all(s["status"] == "completed" and s["steps"] > 0 for s in summaries), summaries
        if expected.also:
            expected.also(out_dir)


def gate_refusal(launch_args: list[str]) -> str | None:
    """The line the single-run gate leaves with for ``python launch.py ARGS`` (None: it lets the run start)."""
    run_dir = next((Path(a.split("=", 1)[1]) for a in launch_args if a.startswith("hydra.run.dir=")), None)
    cfg = compose([a for a in launch_args if not a.startswith("hydra.")])
    try:
        check_run(cfg, run_dir, trains_here=True)
    except ConfigError as exc:
        with pytest.raises(SystemExit) as stopped:
            stop(exc)
        return str(stopped.value.code)
    return None


def run_case(table: str, setup, expected, tmp_path: Path) -> None:
    """One case, launched as a user would (the gate's own refusals of ``AT_THE_GATE`` tables at the gate)."""
    inputs, out_dir = tmp_path / "inputs", tmp_path / "out"
    inputs.mkdir()
    out_dir.mkdir()
    launch_args = setup(inputs)
    if table in AT_THE_GATE and isinstance(expected, Refused):
        line = gate_refusal(launch_args)
        assert line is not None, f"the gate let {launch_args} start"
        check(subprocess.CompletedProcess(launch_args, 1, "", line), expected, out_dir)
        return
    if not isinstance(expected, Refused):
        flags = [a for a in launch_args if a.startswith("-")]  # -m stands before the overrides
        launch_args = [*flags, *FAST, *(a for a in launch_args if a not in flags)]
    check(launch_here(launch_args, out_dir), expected, out_dir)
    if isinstance(expected, Refused) and expected.also:
        expected.also(inputs)
