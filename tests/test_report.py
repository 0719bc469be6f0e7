"""The sweep report over hand-made run directories: grids with seeds, Optuna trials, failures, running runs."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from grpo_sweep.report import build_report, main


def make_run(sweep: Path, name: str, overrides: list[str], summary: dict | None, rewards=("format",), steps=5):
    run = sweep / name
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra/config.yaml").write_text("task_name: grpo\n")
    (run / ".hydra/overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    rows = [{"step": s, "reward": 0.1 * s, **{f"rewards/{r}/mean": 0.05 * s for r in rewards}} for s in range(1, steps + 1)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if summary is not None:
        base = {"status": "completed", "optimized_metric": "eval_accuracy", "overrides": overrides, "steps": steps,
                "runtime_s": 3.25, "reward": 0.5, "reward_first": 0.1, "train_rewards": {r: 0.25 for r in rewards}}
        (run / "summary.json").write_text(json.dumps({**base, **summary}))
    return run


def table_rows(report: str, section: str) -> list[list[str]]:
    body = report.split(section)[1].split("\n## ")[0]
    return [[c.strip() for c in line.split("|")[1:-1]] for line in body.splitlines()
            if line.startswith("| ") and not line.startswith("| #") and not line.startswith("| configuration")]


def test_grid_with_seeds_ranks_runs_and_averages_seeds(tmp_path):
    values = {("a", 1): 0.2, ("a", 2): 0.4, ("b", 1): 0.9, ("b", 2): 0.7}
    for i, ((mix, seed), acc) in enumerate(values.items()):
        make_run(tmp_path, str(i), ["lora.r=8", f"reward_mix={mix}", f"trainer.seed={seed}"],
                 {"objective": acc, "eval_accuracy": acc})
    make_run(tmp_path, "4", ["lora.r=8", "reward_mix=c", "trainer.seed=1"],
             {"status": "failed", "error": "ValueError: boom"})
    make_run(tmp_path, "5", ["lora.r=8", "reward_mix=c", "trainer.seed=2"], None)  # still running
    report = build_report(tmp_path).read_text()
    rows = table_rows(report, "## Runs, best first")
    assert [r[1] for r in rows][:4] == ["2", "3", "1", "0"]  # by objective, best first
    assert {r[1]: r[3] for r in rows}["4"] == "failed" and {r[1]: r[3] for r in rows}["5"] == "running"
    assert rows[0][2] == "reward_mix=b trainer.seed=1"  # only what varies (lora.r=8 is common)
    seeds = table_rows(report, "## Mean ± std over seeds")
    assert seeds[0][:3] == ["reward_mix=b", "1,2", "0.800 ± 0.141"]
    assert seeds[1][:3] == ["reward_mix=a", "1,2", "0.300 ± 0.141"]
    assert "ValueError: boom" in report and "4 completed" in report and "1 failed" in report
    assert {p.name for p in (tmp_path / "plots").glob("*.png")} == {
        "reward_curves.png", "reward_components.png", "accuracy_vs_reward_mix.png"}


def test_optuna_trials_show_params_and_states_and_follow_the_direction(tmp_path):
    trials = [(0, "COMPLETE", 0.5, 1e-3), (1, "PRUNED", None, 1e-1), (2, "COMPLETE", 0.2, 1e-4), (3, "FAIL", None, 1e-2)]
    for number, state, value, lr in trials:
        trial = {"number": number, "state": state, "params": {"optimizer.learning_rate": lr}, "direction": "minimize"}
        if value is not None:
            trial["value"] = value
        make_run(tmp_path, str(number), [f"optimizer.learning_rate={lr}"],
                 {"objective": value, "eval_accuracy": value, "trial": trial,
                  "status": "failed" if state == "FAIL" else "completed"})
    report = build_report(tmp_path).read_text()
    rows = table_rows(report, "## Runs, best first")
    assert [r[1] for r in rows][:2] == ["2", "0"]  # minimize: lowest first; no value last
    assert [r[3] for r in rows] == ["COMPLETE", "COMPLETE", "PRUNED", "FAIL"]
    assert rows[0][2] == "trial 2: optimizer.learning_rate=0.0001"
    assert "2 COMPLETE, 1 FAIL, 1 PRUNED" in report and "(minimize)" in report
    assert (tmp_path / "plots/accuracy_vs_optimizer.learning_rate.png").stat().st_size > 5000
    assert "Mean ± std" not in report  # no seeds swept


def test_cli_reports_and_rejects_a_missing_dir(tmp_path, capsys):
    make_run(tmp_path, "0", [], {"objective": 0.1, "eval_accuracy": 0.1})
    assert main([str(tmp_path), "--no-plots"]) == 0
    assert "report:" in capsys.readouterr().out and not (tmp_path / "plots").exists()
    assert main([str(tmp_path / "nope")]) == 2
    assert "sweep_dir=" in capsys.readouterr().err
    with pytest.raises(FileNotFoundError):
        build_report(tmp_path / "0" / ".hydra")
