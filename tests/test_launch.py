"""`python launch.py` as a user runs it: the main job, and a -m grid ending in a table."""
from __future__ import annotations

import json

from .conftest import FAST, run_launch


def test_main_job_raises_held_out_accuracy_and_reports(tmp_path):
    """The README's main job, warm start built on first use: GRPO lifts held-out accuracy by at least 0.15."""
    out = run_launch([], tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    [summary_file] = list(tmp_path.glob("grpo/runs/*/summary.json"))
    summary = json.loads(summary_file.read_text())
    assert summary["steps"] == 120
    before, after = summary["eval_accuracy_before"], summary["eval_accuracy"]
    assert 0.0 < before < 0.6 and after >= before + 0.15, (before, after)
    for line in ("reward (weighted)", "rewards/correct", "held-out (64 prompts): accuracy", "objective eval_accuracy", "saved to"):
        assert line in out.stdout, line
    run_dir = summary_file.parent
    for name in (".hydra/config.yaml", "metrics.jsonl", "samples.jsonl", "lora/adapter_config.json"):
        assert (run_dir / name).exists(), name


def test_grid_runs_every_combination_and_prints_a_table(tmp_path):
    out = run_launch(["-m", "reward_mix=format,correct", "lora.r=16,32", *FAST], tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    [sweep_dir] = list(tmp_path.glob("grpo/multiruns/*"))
    summaries = sorted(sweep_dir.glob("*/summary.json"))
    assert len(summaries) == 4
    combos = {tuple(json.loads(s.read_text())["overrides"][:2]) for s in summaries}
    assert combos == {(f"reward_mix={m}", f"lora.r={r}") for m in ("format", "correct") for r in (16, 32)}
    table = (sweep_dir / "sweep_table.md").read_text()
    assert table in out.stdout
    rows = [line for line in table.splitlines() if line.startswith("| ") and "overrides" not in line]
    assert len(rows) == 4
    assert "reward_mix=correct lora.r=32" in table
    assert "rewards/format" in table and "rewards/correct" in table
