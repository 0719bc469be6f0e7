"""What the tiny model can learn, said before anything runs: ``model=tiny`` on data other than the built-in
arithmetic task prints one warning line per launch, whatever the launch runs (grpo_sweep/models:
``warn_tiny_on_other_data``, called by the gate), and such a run starts from the shipped warm start, building
nothing (``shipped_warm_start``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from grpo_sweep.models import TINY_ON_OTHER_DATA, WARNED_ENV

from .conftest import FAST, ROOT, compose, launch_here, run_launch

WARNING = (
    "grpo-sweep: warning: the tiny model knows only single-digit arithmetic (`6 * 3`): expect accuracy 0 on other data"
)
# a launch in this process before may have warned (the gate's refusals tested in-process): each launch here is fresh
FRESH = {WARNED_ENV: ""}
COLUMNS = ["data.prompt_column=problem", "data.ground_truth_column=answer"]
# one job the gate refuses (trainer.num_generations=3 does not divide 8), planned last: nothing trains
REFUSED_LAST = ["trainer.num_generations=4,3", *[o for o in FAST if not o.startswith("trainer.num_generations")]]


def word_problems(path: Path, rows: int = 40) -> Path:
    """A user's own jsonl: `problem` and `answer` columns, none of them an `a op b` question."""
    lines = [
        {
            "problem": f"Ann has {n} apples and buys {n + 3} more. How many apples does she have now?",
            "answer": str(2 * n + 3),
        }
        for n in range(rows)
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def warnings_in(out) -> list[str]:
    return [line for line in (out.stdout + out.stderr).splitlines() if line.startswith("grpo-sweep: warning: the tiny")]


def test_a_run_on_word_problems_warns_once_and_starts_from_the_shipped_model_on_a_fresh_cache(tmp_path):
    data, cache = word_problems(tmp_path / "word.jsonl"), tmp_path / "cache"
    out = run_launch(
        ["data=file", f"data.path={data}", *COLUMNS, "trainer.max_steps=2", "trainer.save_steps=2"],
        tmp_path,
        timeout=300,
        env={"GRPO_SWEEP_CACHE": str(cache), **FRESH},
    )
    text = out.stdout + out.stderr
    assert out.returncode == 0, text[-3000:]
    assert warnings_in(out) == [
        f"{WARNING} (here data.path={str(data)!r}); it is for trying the workflow; use a hub "
        "model to get an answer (experiment=cpu_qwen0_5b on a CPU, model=qwen2_5_0_5b_instruct "
        "on a GPU)"
    ], text[-3000:]
    assert out.stderr.startswith("grpo-sweep: warning"), out.stderr[-3000:]  # before the run prints anything there
    # nothing built, and nothing said about the warm start (before: an 8-minute build, announced as another recipe)
    assert "warm start" not in text and "differ" not in text, text[-3000:]
    assert not cache.exists() or not any(cache.iterdir())
    [summary] = [json.loads(p.read_text()) for p in tmp_path.glob("grpo/runs/*/summary.json")]
    assert summary["base_model_sha256"].startswith("ab60001b2113b882") and summary["val_accuracy"] == 0


def test_a_grid_on_other_data_warns_once_for_all_its_runs(tmp_path):
    first, second = word_problems(tmp_path / "a.jsonl"), word_problems(tmp_path / "b.jsonl", 48)
    # the first override varies slowest: jobs (4, a), (4, b), then (3, a), refused
    out = launch_here(["-m", *REFUSED_LAST, "data=file", f"data.path={first},{second}", *COLUMNS], tmp_path, env=FRESH)
    assert out.returncode == 1 and out.stderr.strip().splitlines()[-1].startswith("grpo-sweep: job 2 ("), out.stderr
    assert len(warnings_in(out)) == 1, out.stderr  # jobs 0 and 1 passed the gate: one warning for the launch


def test_a_study_on_other_data_warns_once(tmp_path):
    """The sweeper checks the base config, every config-group choice and every corner of the space: one warning."""
    data = word_problems(tmp_path / "word.jsonl")
    out = run_launch(
        [
            "-m",
            "--config-dir",
            str(ROOT / "tests" / "conf"),
            "hparams_search=test_space",
            "data=file",
            f"data.path={data}",
            *COLUMNS,
            "hydra.sweeper.storage=nosuch://nowhere",
        ],
        tmp_path,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), **FRESH},
    )
    assert out.returncode == 1 and "hydra.sweeper.storage='nosuch://nowhere' cannot be opened" in out.stderr, out.stderr
    assert len(warnings_in(out)) == 1, out.stderr


def test_gsm8k_warns_before_the_hub_is_asked(tmp_path):
    out = run_launch(
        ["data=gsm8k"], tmp_path, timeout=120, env={"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"), **FRESH}
    )  # an empty cache
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert out.returncode == 1 and len(lines) == 2, out.stderr
    assert lines[0].startswith(f"{WARNING} (here data.path='openai/gsm8k')")
    assert lines[1].startswith("grpo-sweep: data.path='openai/gsm8k' (subset 'main') is not in the datasets cache")


def test_the_arithmetic_task_and_hub_models_get_no_warning(tmp_path):
    out = launch_here(["-m", *REFUSED_LAST], tmp_path, env=FRESH)
    assert out.returncode == 1 and "grpo-sweep: job 1 (" in out.stderr, out.stderr
    assert warnings_in(out) == []


def test_the_options_the_warning_names_exist():
    """The warning sends the user to a preset and a model option: both compose (a name that never landed would send
    them to a compose error)."""
    named = re.findall(r"(\w+)=(\w+)", TINY_ON_OTHER_DATA.format(path="x"))
    assert ("experiment", "cpu_qwen0_5b") in named and ("model", "qwen2_5_0_5b_instruct") in named
    for group, option in named:
        assert (ROOT / "conf" / group / f"{option}.yaml").is_file(), (group, option)
        compose([f"{group}={option}"])
