"""`python launch.py` as a user runs it: the main job, and a -m grid ending in a table."""

from __future__ import annotations

import json

import pytest

from .conftest import ROOT, run_launch

# The README's main job starts from the shipped weights, so its before-training figures are the same on every
# machine; what GRPO then does depends on float rounding (another CPU takes another path), so the test asks for
# the behaviour, with margins under the smallest rise measured over GRPO seeds (BENCHMARKS.md, issue 21).
README_TEST_BEFORE = 0.359375  # 23 of the 64 test questions
README_VAL_BEFORE = 0.328125  # 21 of the 64 validation questions


@pytest.mark.slow
def test_main_job_starts_from_the_shipped_model_and_learns(tmp_path):
    """The README's main job: the shipped base model (its sha256), the README's before-training accuracies exactly,
    then GRPO lifts validation and test accuracy, and the lines the README shows are printed."""
    import re

    from grpo_sweep.models import PREBUILT, PREBUILT_RECORD

    cache = tmp_path / "cache"
    out = run_launch([], tmp_path, env={"GRPO_SWEEP_CACHE": str(cache)})
    assert out.returncode == 0, out.stderr[-3000:]
    assert not cache.exists() or not any(cache.iterdir())  # nothing to build: the model ships with the package
    [summary_file] = list(tmp_path.glob("grpo/runs/*/summary.json"))
    summary = json.loads(summary_file.read_text())
    assert summary["base_model_sha256"] == json.loads((PREBUILT / PREBUILT_RECORD).read_text())["sha256"]
    assert summary["steps"] == 120
    assert (summary["val_accuracy_before"], summary["test_accuracy_before"]) == (README_VAL_BEFORE, README_TEST_BEFORE)
    assert summary["val_accuracy"] >= summary["val_accuracy_before"] + 0.15, summary["val_accuracy"]
    assert summary["test_accuracy"] >= summary["test_accuracy_before"] + 0.1, summary["test_accuracy"]
    before = re.search(r"test \(64 prompts, after training only\): accuracy (\S+) ->", out.stdout)
    assert before and float(before.group(1)) == round(README_TEST_BEFORE, 3)
    readme = (ROOT / "README.md").read_text()  # the README promises these exact figures
    assert f"accuracy {README_VAL_BEFORE:.3f} ->" in readme and f"accuracy {README_TEST_BEFORE:.3f} ->" in readme
    for line in (
        "reward (weighted)",
        "rewards/correct",
        "validation (64 prompts): accuracy",
        "objective val_accuracy",
        "base model sha256",
        "saved to",
    ):
        assert line in out.stdout, line
    run_dir = summary_file.parent
    for name in (
        ".hydra/config.yaml",
        "metrics.jsonl",
        "samples.jsonl",
        "lora/adapter_config.json",
        "outcomes/test.jsonl",
        "outcomes/val.jsonl",
    ):
        assert (run_dir / name).exists(), name


def test_grid_runs_every_combination_and_prints_a_table(grid_sweep):
    out, sweep_dir = grid_sweep  # two of its four runs fail: the table still has every one
    summaries = sorted(sweep_dir.glob("*/summary.json"))
    assert len(summaries) == 4
    overrides = [json.loads(s.read_text())["overrides"] for s in summaries]
    combos = {tuple(o for o in run if "params.fail" in o or o.startswith("reward_mix=")) for run in overrides}
    assert combos == {
        (f"+reward_mix.flaky.params.fail={f}", f"reward_mix={m}")
        for f in ("True", "False")
        for m in ("format", "correct")
    }
    table = (sweep_dir / "sweep_table.md").read_text()
    assert table in out.stdout
    rows = [line for line in table.splitlines() if line.startswith("| ") and "overrides" not in line]
    assert len(rows) == 4
    assert "+reward_mix.flaky.params.fail=False reward_mix=correct" in table
    assert "rewards/format" in table and "rewards/correct" in table


def test_ctrl_c_at_the_gate_stops_the_launch_in_one_line(tmp_path):
    """The user's Ctrl-C (a real SIGINT, while a reward factory runs at the gate) is no refusal of the factory: the
    launch stops with one line and the exit status of an interrupt, and nothing is written."""
    from .conftest import launch_here

    out = launch_here(
        ["-m", "+reward_mix.stop.factory=tests.reward_plugins.make_ctrl_c_reward", "+reward_mix.stop.weight=1"],
        tmp_path,
    )
    lines = [line for line in (out.stdout + out.stderr).splitlines() if line.strip()]
    assert (out.returncode, lines) == (130, ["grpo-sweep: interrupted"]), out.stderr[-3000:]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow  # a run that starts training (~20 s with torch's import)
def test_ctrl_c_while_training_stops_the_sweep_and_keeps_the_run(tmp_path):
    """Ctrl-C while a run of a sweep trains: the sweep stops (the next run does not start), with one line saying how to
    go on; the run is not recorded as failed (the same sweep in its directory continues it)."""
    from .conftest import FAST, launch_here

    out = launch_here(
        [
            "-m",
            *FAST,
            "+reward_mix.stop.fn=tests.reward_plugins.ctrl_c_in_training",
            "+reward_mix.stop.weight=1",
            "lora.r=8,16",
        ],
        tmp_path,
    )
    [sweep_dir] = tmp_path.glob("grpo/multiruns/*")
    lines = [line for line in (out.stdout + out.stderr).splitlines() if line.strip()]
    assert out.returncode == 130, out.stderr[-3000:]
    assert lines[-1] == (
        f"grpo-sweep: interrupted in run {sweep_dir / '0'}; the same sweep with "
        f"hydra.sweep.dir={sweep_dir} continues it from its last checkpoint"
    ), lines[-3:]
    assert "Traceback" not in out.stdout + out.stderr
    assert not (sweep_dir / "0" / "summary.json").exists() and not (sweep_dir / "1").exists()
