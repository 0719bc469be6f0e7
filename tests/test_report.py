"""The sweep report over hand-made run directories: grids with seeds, Optuna trials, failures, running runs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from grpo_sweep.reading import tables
from grpo_sweep.reading.results import SweepResults
from grpo_sweep.sweeps.report import build_report, main


def sweep_table(sweep_dir: Path, verdicts: str | None = None, **options) -> str:
    """The end-of-sweep table of a directory, read as the end of a sweep reads it (``verdicts``: the mode)."""
    return tables.sweep_table(SweepResults.read(sweep_dir, verdicts=verdicts), **options)


def make_run(sweep: Path, name: str, overrides: list[str], summary: dict | None, rewards=("format",), steps=5):
    run = sweep / name
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra/config.yaml").write_text("task_name: grpo\n")
    (run / ".hydra/overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    final = (summary or {}).get("val_accuracy") or 0.5
    rows = []
    for s in range(0, steps + 1):
        if s % 2 == 0 or s == steps:  # periodic validation, from step 0 (before training) to the last step
            rows.append({"step": s, "val/accuracy": final * (0.5 + 0.5 * s / steps), "val/runtime": 0.1})
        if s:
            rows.append({"step": s, "reward": 0.1 * s, **{f"rewards/{r}/mean": 0.05 * s for r in rewards}})
    rows.append({"step": steps, "train_runtime": 1.0})
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if summary is not None:
        base = {
            "status": "completed",
            "optimized_metric": "val_accuracy",
            "overrides": overrides,
            "steps": steps,
            "runtime_s": 3.25,
            "reward": 0.5,
            "reward_first": 0.1,
            "train_rewards": {r: 0.25 for r in rewards},
        }
        (run / "summary.json").write_text(json.dumps({**base, **summary}))
    return run


def table_rows(report: str, section: str) -> list[list[str]]:
    body = report.split(section)[1].split("\n## ")[0]
    return [
        [c.strip() for c in line.split("|")[1:-1]]
        for line in body.splitlines()
        if line.startswith("| ") and not line.startswith("| #") and not line.startswith("| configuration")
    ]


def test_grid_with_seeds_ranks_runs_and_averages_seeds(tmp_path):
    values = {("a", 1): 0.2, ("a", 2): 0.4, ("b", 1): 0.9, ("b", 2): 0.7}
    for i, ((mix, seed), acc) in enumerate(values.items()):
        make_run(
            tmp_path,
            str(i),
            ["lora.r=8", f"reward_mix={mix}", f"trainer.seed={seed}"],
            {"objective": acc, "val_accuracy": acc, "test_accuracy": acc - 0.05},
        )
    make_run(
        tmp_path, "4", ["lora.r=8", "reward_mix=c", "trainer.seed=1"], {"status": "failed", "error": "ValueError: boom"}
    )
    make_run(tmp_path, "5", ["lora.r=8", "reward_mix=c", "trainer.seed=2"], None)  # still running
    report = build_report(tmp_path, verdicts="strict").read_text()
    rows = table_rows(report, "## Runs, best first")
    assert [r[1] for r in rows][:4] == ["2", "3", "1", "0"]  # by objective, best first
    assert {r[1]: r[3] for r in rows}["4"] == "failed" and {r[1]: r[3] for r in rows}["5"] == "running"
    assert rows[0][2] == "reward_mix=b trainer.seed=1"  # only what varies (lora.r=8 is common)
    seeds = table_rows(report, "## Mean ± std over seeds")
    assert seeds[0][:3] == ["reward_mix=b", "1,2", "0.800 ± 0.141"]
    assert seeds[1][:3] == ["reward_mix=a", "1,2", "0.300 ± 0.141"]
    # two configurations: Welch's t on one degree of freedom. Each configuration's runs vary by 0.02 (variance),
    # so var(a - b) = (0.02 + 0.02) / 2 and the half-width is t_{0.975,1} * 0.1414 = 12.706 * 0.1414 = 1.797
    assert seeds[0][4:7] == ["0 (reference)", "-", "reference"]
    assert seeds[1][4:7] == ["-0.500", "[-2.297, +1.297]", "indistinguishable"]
    assert seeds[2][:7] == ["reward_mix=c", "1,2", "-", "-", "-", "-", "-"]  # one failed, one running: no objective
    assert "ValueError: boom" in report and "4 completed" in report and "1 failed" in report
    assert {p.name for p in (tmp_path / "plots").glob("*.png")} == {
        "forest.png",
        "val_accuracy.png",
        "reward_terms.png",
        "accuracy_vs_reward_mix.png",
    }


def test_optuna_trials_show_params_and_states_and_follow_the_direction(tmp_path):
    trials = [
        (0, "COMPLETE", 0.5, 1e-3),
        (1, "PRUNED", None, 1e-1),
        (2, "COMPLETE", 0.2, 1e-4),
        (3, "FAIL", None, 1e-2),
    ]
    for number, state, value, lr in trials:
        trial = {"number": number, "state": state, "params": {"optimizer.learning_rate": lr}, "direction": "minimize"}
        if value is not None:
            trial["value"] = value
        make_run(
            tmp_path,
            str(number),
            [f"optimizer.learning_rate={lr}"],
            {
                "objective": value,
                "val_accuracy": value,
                "trial": trial,
                "status": "failed" if state == "FAIL" else "completed",
            },
        )
    report = build_report(tmp_path).read_text()
    rows = table_rows(report, "## Runs, best first")
    assert [r[1] for r in rows][:2] == ["2", "0"]  # minimize: lowest first; no value last
    assert [r[3] for r in rows] == ["COMPLETE", "COMPLETE", "PRUNED", "FAIL"]
    assert rows[0][2] == "trial 2: optimizer.learning_rate=0.0001"
    assert "2 COMPLETE, 1 FAIL, 1 PRUNED" in report and "(minimize)" in report
    assert (tmp_path / "plots/accuracy_vs_optimizer.learning_rate.png").stat().st_size > 5000
    assert "Mean ± std" not in report  # no seeds swept


def test_cli_reports_and_rejects_a_missing_dir(tmp_path, capsys):
    make_run(tmp_path, "0", [], {"objective": 0.1, "val_accuracy": 0.1})
    assert main([str(tmp_path), "--no-plots"]) == 0
    assert "report:" in capsys.readouterr().out and not (tmp_path / "plots").exists()
    assert main([str(tmp_path / "nope")]) == 2
    assert "sweep_dir=" in capsys.readouterr().err
    with pytest.raises(FileNotFoundError):
        build_report(tmp_path / "0" / ".hydra")


THREE_SEEDS = {  # (reward_mix, seed) -> objective; made up so the paired CIs are known
    ("b", 1): 0.9,
    ("b", 2): 0.7,
    ("b", 3): 0.8,
    ("a", 1): 0.2,
    ("a", 2): 0.4,
    ("a", 3): 0.3,  # a - b: -0.7, -0.3, -0.5
    ("c", 1): 0.85,
    ("c", 2): 0.75,
    ("c", 3): 0.79,  # c - b: -0.05, +0.05, -0.01
}


def make_seed_sweep(sweep: Path, values=THREE_SEEDS, cost=True):
    for i, ((mix, seed), acc) in enumerate(values.items()):
        summary = {"objective": acc, "val_accuracy": acc, "test_accuracy": acc}
        if cost:
            summary.update(device_seconds=10.0 + i, generated_tokens=1000 * (i + 1), tokens_per_s=100.0)
        make_run(sweep, str(i), [f"reward_mix={mix}", f"trainer.seed={seed}"], summary)


def test_paired_difference_from_the_best_and_cost(tmp_path):
    make_seed_sweep(tmp_path)
    report = build_report(tmp_path, plots=False, verdicts="strict").read_text()
    rows = table_rows(report, "## Mean ± std over seeds")
    assert [r[0] for r in rows] == ["reward_mix=b", "reward_mix=c", "reward_mix=a"]
    # ranked on validation, compared on test (no per-question files: one value per run, no question count)
    assert rows[0][1:7] == ["1,2,3", "0.800 ± 0.100", "0.800 ± 0.100", "0 (reference)", "-", "reference"]
    # each configuration's own variance over its 3 seeds: b 0.01, a 0.01, c 0.0025333; var(c - b) = (0.0025333 +
    # 0.01) / 3, se 0.064636; var(a - b) = 0.02 / 3, se 0.081650; Tukey q_{0.95}(3, 2) / sqrt(2) = 8.3308 / 1.41421
    # = 5.8908: half-widths 0.38076 around c - b = -0.00333 and 0.48099 around a - b = -0.5
    assert rows[1][4:7] == ["-0.00333", "[-0.384, +0.377]", "indistinguishable"]
    assert rows[2][4:7] == ["-0.500", "[-0.981, -0.019]", "worse"]
    detectable = float(rows[1][7])  # (5.8908 + 3.2598, the 80 % power margin at 2 df: stats._power_margin) * 0.064636
    assert detectable == pytest.approx(0.591, abs=1e-3) and float(rows[2][7]) == pytest.approx(0.747, abs=1e-3)
    assert "(higher is better)" in report and "is the reference" in report
    assert "Intervals: Δ = test difference from the reference; 95% family-wise intervals" in report
    assert "noise from each configuration's own variance of per-run values over 3 seeds (2 df)" in report
    # 9 runs: 10 + 11 + ... + 18 = 126 device-seconds, 1000 * (1 + ... + 9) = 45,000 tokens
    assert (
        "Cost: 126.0 device-seconds (0.04 device-hours), 45,000 completion tokens generated in training, "
        "357 tokens per device-second" in report
    )
    runs = table_rows(report, "## Runs, best first")
    assert runs[0][1] == "0" and runs[0][-3:] == ["10.0", "1000", "100.0"]


def test_minimize_flips_best_and_verdicts(tmp_path):
    make_seed_sweep(tmp_path, cost=False)
    report = build_report(tmp_path, direction="minimize", plots=False, verdicts="strict").read_text()
    rows = table_rows(report, "## Mean ± std over seeds")
    assert [r[0] for r in rows] == ["reward_mix=a", "reward_mix=c", "reward_mix=b"]
    assert rows[0][6] == "reference"
    assert rows[2][4:7] == ["+0.500", "[+0.019, +0.981]", "worse"]  # higher is worse here
    assert rows[1][6] == "worse"  # c - a: mean 0.497, se sqrt((0.0025333 + 0.01) / 3), half-width 0.381
    assert "(lower is better)" in report and "Cost:" not in report


def test_configurations_on_different_seeds_are_incomplete_with_the_seeds_named(tmp_path):
    make_seed_sweep(tmp_path, {("b", 1): 0.9, ("b", 2): 0.7, ("a", 2): 0.2, ("a", 3): 0.4}, cost=False)
    rows = table_rows(build_report(tmp_path, plots=False).read_text(), "## Mean ± std over seeds")
    assert rows[0][:7] == [
        "reward_mix=b",
        "1,2",
        "0.800 ± 0.141",
        "0.800 ± 0.141",
        "-",
        "-",
        "incomplete (missing trainer.seed=3)",
    ]
    assert rows[1][6] == "incomplete (missing trainer.seed=1)"


def test_sweep_table_prints_one_verdict_per_configuration_and_the_cost(tmp_path):
    make_seed_sweep(tmp_path)
    table = sweep_table(tmp_path, "strict")
    block = table.split("Per configuration over seeds")[1].splitlines()
    assert block[0].startswith(" (maximize; ranked by validation")
    lines = [line.split() for line in block[1:4]]
    assert lines[0][0] == "reward_mix=b" and block[1].endswith("reference (best on validation)")
    assert lines[1][0] == "reward_mix=c" and "indistinguishable (no difference larger than 0.591" in block[2]
    assert "a fourth seed would bring the detectable difference to" in block[2]
    assert lines[2][0] == "reward_mix=a" and lines[2][-1] == "worse" and "[-0.981, -0.019]" in block[3]
    assert "val 0.800" in block[1] and "3 seeds" in block[1] and "intervals over 3 configurations" in block[4]
    assert table.splitlines()[-1].startswith("Cost: 126.0 device-seconds")
    assert "Per configuration" not in sweep_table(tmp_path / "0", "strict")  # one run: nothing to compare


def test_runs_csv_has_one_row_per_run_with_overrides_as_columns(tmp_path):
    import csv

    make_seed_sweep(tmp_path)
    make_run(tmp_path, "9", ["reward_mix=c", "trainer.seed=4"], {"status": "failed", "error": "ValueError: boom"})
    build_report(tmp_path, plots=False)
    with (tmp_path / "runs.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 10 and [r["rank"] for r in rows] == [str(i) for i in range(1, 11)]
    assert rows[0]["run"] == "0" and rows[0]["reward_mix"] == "b" and rows[0]["trainer.seed"] == "1"
    assert rows[0]["objective"] == "0.9" and rows[0]["state"] == "completed"
    assert rows[0]["train_rewards.format"] == "0.25" and rows[0]["device_seconds"] == "10.0"
    assert rows[-1]["state"] == "failed" and rows[-1]["error"] == "ValueError: boom" and rows[-1]["objective"] == ""
    assert "overrides" not in rows[0]  # they are the parameter columns


def test_large_sweep_lists_the_top_runs_and_bounds_the_legend(tmp_path, monkeypatch):
    import matplotlib.axes

    from grpo_sweep.reading import plots as plots_module
    from grpo_sweep.reading import report as report_module

    # 12 configurations x 2 seeds = 24 runs: more runs than report.md lists, more configurations than get colours
    monkeypatch.setattr(report_module, "TOP_RUNS", 5)
    for i in range(24):
        mix, seed = f"m{i // 2:02d}", i % 2 + 1
        make_run(
            tmp_path,
            str(i),
            [f"reward_mix={mix}", f"trainer.seed={seed}"],
            {"objective": i / 100, "val_accuracy": i / 100},
        )
    legends = []
    real_legend = matplotlib.axes.Axes.legend

    def spy(ax, *args, **kwargs):
        made = real_legend(ax, *args, **kwargs)
        legends.append((ax.get_title(), [t.get_text() for t in made.get_texts()]))
        return made

    monkeypatch.setattr(matplotlib.axes.Axes, "legend", spy)
    report = build_report(tmp_path).read_text()
    assert len(table_rows(report, "## Runs, best first")) == 5 and "The 5 best of 24 runs" in report
    assert report.index("## Mean ± std over seeds") < report.index("## Runs, best first")
    curves = next(texts for title, texts in legends if title == "Validation accuracy during training")
    assert len(curves) == plots_module.TOP_CONFIGS + 1 and curves[-1] == "the other 6 configurations"
    assert curves[0] == "#1 reward_mix=m11 (2 seeds)" and curves[1].startswith("#2 reward_mix=m10")  # best first
    terms = matplotlib.image.imread(tmp_path / "plots/reward_terms.png")
    assert terms.shape[0] < 800  # one panel per reward term, not one per configuration or run


def test_a_half_written_summary_is_reported_and_the_rest_still_are(tmp_path, capsys):
    make_seed_sweep(tmp_path, cost=False)
    bad = make_run(tmp_path, "9", ["reward_mix=c", "trainer.seed=4"], {"objective": 0.5})
    text = (bad / "summary.json").read_text()
    (bad / "summary.json").write_text(text[: len(text) // 2])
    assert main([str(tmp_path), "--no-plots"]) == 0
    report = (tmp_path / "report.md").read_text()
    section = report.split("## Unreadable runs")[1]
    assert "- `9` (reward_mix=c trainer.seed=4): summary.json is not valid JSON (half-written?)" in section
    assert len(table_rows(report, "## Runs, best first")) == 10 and "1 unreadable" in report
    assert "run 9 unreadable: summary.json is not valid JSON" in sweep_table(tmp_path)


def test_sweep_table_shows_the_top_runs_and_where_the_rest_are(tmp_path):
    make_seed_sweep(tmp_path)
    small = sweep_table(tmp_path)  # every run, best validation first
    assert [line.split("|")[1].strip() for line in small.splitlines()[2:11]] == [
        "0",
        "6",
        "2",
        "8",
        "7",
        "1",
        "4",
        "5",
        "3",
    ]
    table = sweep_table(tmp_path, top=3).splitlines()
    assert [line.split("|")[1].strip() for line in table[2:5]] == ["0", "6", "2"]  # 0.9, 0.85, 0.8
    assert table[5].startswith("(the 3 best of 9 runs by objective, maximize; every run, its overrides as columns: ")
    assert str(tmp_path / "runs.csv") in table[5]


def test_tables_show_validation_and_test_ranked_by_validation(tmp_path):
    import csv

    # test disagrees with validation on the order: the tables still rank by validation (the objective)
    for i, (val, test, step) in enumerate([(0.5, 0.7, 4), (0.8, 0.6, 2), (0.6, 0.65, 5)]):
        make_run(
            tmp_path,
            str(i),
            [f"reward_mix=m{i}"],
            {
                "objective": val,
                "val_accuracy": val,
                "val_accuracy_before": 0.25,
                "test_accuracy": test,
                "test_accuracy_before": 0.3,
                "best_step": step,
                "best_objective": val,
            },
        )
    report = build_report(tmp_path, plots=False).read_text()
    header = report.split("## Runs, best first")[1].split("\n")[2]
    cols = [c.strip() for c in header.split("|")[1:-1]]
    assert cols[4:9] == ["val_accuracy (objective)", "val before", "best (step)", "test_accuracy", "test before"]
    rows = table_rows(report, "## Runs, best first")
    assert [r[1] for r in rows] == ["1", "2", "0"]
    assert rows[0][4:9] == ["0.800", "0.250", "0.800 (2)", "0.600", "0.300"]
    table = sweep_table(tmp_path).splitlines()
    assert [c.strip() for c in table[0].split("|")[1:-1]][3:7] == [
        "val_accuracy (objective)",
        "best (step)",
        "test_accuracy",
        "test before",
    ]
    assert [line.split("|")[1].strip() for line in table[2:5]] == ["1", "2", "0"]
    assert [c.strip() for c in table[2].split("|")[1:-1]][3:7] == ["0.800", "0.800 (2)", "0.600", "0.300"]
    with (tmp_path / "runs.csv").open() as f:
        reader = csv.reader(f)
        head = next(reader)
        first = next(reader)
    assert head[5:11] == [
        "objective",
        "val_accuracy",
        "val_accuracy_before",
        "best_step",
        "best_objective",
        "test_accuracy",
    ]
    assert first[1] == "1" and first[head.index("test_accuracy")] == "0.6"


def test_an_objective_other_than_validation_accuracy_gets_its_own_column(tmp_path):
    for i, (reward, val) in enumerate([(0.9, 0.5), (0.95, 0.4)]):
        make_run(
            tmp_path,
            str(i),
            [f"reward_mix=m{i}"],
            {"optimized_metric": "val_rewards.correct", "objective": reward, "val_accuracy": val},
        )
    rows = table_rows(build_report(tmp_path, plots=False).read_text(), "## Runs, best first")
    assert [r[1] for r in rows] == ["1", "0"] and rows[0][4:6] == ["0.950", "0.400"]
    table = sweep_table(tmp_path).splitlines()
    assert [c.strip() for c in table[0].split("|")[1:-1]][3:5] == ["objective", "val_accuracy"]


def make_outcome_sweep(sweep: Path, val, test):
    """A sweep of the current schema from simulated outcomes (configurations x seeds x questions): summary.json with
    val_accuracy as objective and test_accuracy, and every run's outcomes/test.jsonl keyed by question."""
    from grpo_sweep.run.results import question_key, write_outcomes

    keys = [question_key([{"role": "user", "content": f"question {q}"}]) for q in range(test.shape[-1])]
    k, seeds = test.shape[:2]
    for c in range(k):
        for s in range(seeds):
            summary = {
                "optimized_metric": "val_accuracy",
                "objective": val[c, s].mean(),
                "val_accuracy": val[c, s].mean(),
                "val_samples": val.shape[-1],
                "test_accuracy": test[c, s].mean(),
                "test_samples": test.shape[-1],
            }
            run = make_run(sweep, str(c * seeds + s), [f"reward_mix=m{c}", f"trainer.seed={s + 1}"], summary)
            write_outcomes(run, "test", [{"key": key, "accuracy": y} for key, y in zip(keys, test[c, s])])


def verdicts_of(table: str) -> dict[str, str]:
    block = table.split("Per configuration over seeds")[1].splitlines()[1:]
    return {line.split()[0]: line for line in block if line.startswith("  reward_mix=")}


def test_ten_by_three_sweep_from_files_null_and_a_quarter_lower(tmp_path):
    from grpo_sweep.search.simulate import simulate

    rng = np.random.default_rng(21)
    val, test = simulate(rng, 1, 10, 3)
    make_outcome_sweep(tmp_path / "null", val[0], test[0])
    lines = verdicts_of(sweep_table(tmp_path / "null", "strict"))
    assert len(lines) == 10 and not any(" better" in v or " worse" in v for v in lines.values()), lines
    assert (
        "over its 3 seeds (2 df) plus the pair's configuration x question part over 64 paired questions"
        in sweep_table(tmp_path / "null", "strict")
    )
    val, test = simulate(rng, 1, 10, 3, shifts={0: -0.25})  # m0 truly 0.25 lower on validation and test
    make_outcome_sweep(tmp_path / "lower", val[0], test[0])
    lines = verdicts_of(sweep_table(tmp_path / "lower", "strict"))
    assert lines["reward_mix=m0"].endswith("worse"), lines
    assert sum(v.endswith("worse") or v.endswith("better") for v in lines.values()) == 1
    report = build_report(tmp_path / "lower", plots=False, verdicts="strict").read_text()
    rows = {r[0]: r for r in table_rows(report, "## Mean ± std over seeds")}
    assert rows["reward_mix=m0"][6] == "worse" and float(rows["reward_mix=m0"][4]) < -0.15


def test_status_names_replicated_trials_by_path_and_counts_pruned_ones(tmp_path):
    from grpo_sweep.sweeps.status import run_states

    make_run(tmp_path / "trials" / "0", "seed42", ["lr=1", "trainer.seed=42"], {"objective": 0.5})
    make_run(tmp_path / "trials" / "1", "seed42", ["lr=2", "trainer.seed=42"], {"status": "pruned", "objective": 0.1})
    states = {s["num"]: s for s in run_states(tmp_path)}
    assert set(states) == {"trials/0/seed42", "trials/1/seed42"}
    assert (states["trials/0/seed42"]["state"], states["trials/1/seed42"]["state"]) == ("done", "pruned")
    assert states["trials/1/seed42"]["overrides"] == ["lr=2", "trainer.seed=42"]


def counting_reads(monkeypatch, root: Path):
    """({run file: times opened}, [one entry per stats.compare call]) from now until monkeypatch.undo(): the run
    files under ``root`` that the end of a sweep reads (summary.json, metrics.jsonl, outcomes)."""
    import builtins
    import io
    from collections import Counter

    from grpo_sweep.reading import stats

    opened: Counter = Counter()
    real_open = io.open

    def counting_open(file, *args, **kwargs):
        path = Path(file) if isinstance(file, (str, Path)) else Path()
        if path.name in ("summary.json", "metrics.jsonl", "test.jsonl"):
            opened[path.relative_to(root).as_posix()] += 1
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(io, "open", counting_open)  # pathlib opens through io.open
    monkeypatch.setattr(builtins, "open", counting_open)
    compared = []
    real_compare = stats.compare
    monkeypatch.setattr(stats, "compare", lambda *a, **k: compared.append(1) or real_compare(*a, **k))
    return opened, compared


def multirun_end(sweep_dir: Path, logger: dict | None = None, strategy: str = "grid") -> int:
    """Hydra's multirun-end callback (conf/hydra/default.yaml) of a sweep of ``strategy``; the exit status it gives
    the launch."""
    from omegaconf import OmegaConf

    from grpo_sweep.sweeps.sweep_end import SweepTable

    from .conftest import SWEEPERS

    config = OmegaConf.create(
        {
            "hydra": {
                "sweep": {"dir": str(sweep_dir)},
                "launcher": {"detach": False},
                "sweeper": {"_target_": SWEEPERS[strategy]},
            },
            "task_name": "grpo",
            "logger": {"name": "wandb", "mode": "disabled", **(logger or {})},
        }
    )
    try:
        SweepTable().on_multirun_end(config)
    except SystemExit as exc:
        return 1 if exc.code else 0
    return 0


def test_the_end_of_a_sweep_reads_each_run_once_and_compares_once(tmp_path, monkeypatch, capsys):
    """What the multirun-end callbacks do (the table, verdicts.json, report.md with its plots, W&B's verdicts): every
    run's summary.json, metrics.jsonl and outcomes opened once at most, the comparisons computed once."""
    from grpo_sweep.search.simulate import simulate

    val, test = simulate(np.random.default_rng(0), 1, 3, 3, shifts={0: -0.2})
    make_outcome_sweep(tmp_path, val[0], test[0])
    make_run(tmp_path, "9", ["reward_mix=m3", "trainer.seed=1"], {"status": "failed", "error": "boom"})
    make_run(tmp_path, "10", ["reward_mix=m3", "trainer.seed=2"], None)  # still running: no steps in a summary
    opened, compared = counting_reads(monkeypatch, tmp_path)
    assert multirun_end(tmp_path) == 1  # run 9 failed: the launch says so
    monkeypatch.undo()
    assert "report with plots" in capsys.readouterr().out and (tmp_path / "plots" / "forest.png").exists()
    runs = [str(i) for i in range(11)]
    assert {f"{r}/metrics.jsonl" for r in runs} <= set(opened)  # each read (for the plots and the last step) ...
    assert {f"{r}/outcomes/test.jsonl" for r in runs[:9]} <= set(opened)
    assert {f"{r}/summary.json" for r in runs[:10]} <= set(opened)
    assert max(opened.values()) == 1, opened  # ... once
    assert len(compared) == 1


def test_the_end_of_a_study_reads_each_run_once_and_compares_once(tmp_path, monkeypatch, capsys):
    """The study's end (its report, then the table, verdicts.json, report.md, W&B): every trial's run files opened
    once at most, the comparisons computed once, as at a grid's end."""
    from .test_search import fake_study

    a, b = 1e-3, 1e-2
    study, objective = fake_study(
        tmp_path,
        {"optimizer.learning_rate": {"type": "categorical", "choices": [a, b]}},
        lambda lr, seed: (0.6 if lr == a else 0.4) + (seed - 42) / 100,
    )
    for lr in (a, b):
        study.enqueue_trial({"optimizer.learning_rate": lr})
    study.optimize(objective, n_trials=2, catch=())
    capsys.readouterr()
    opened, compared = counting_reads(monkeypatch, tmp_path)
    assert multirun_end(tmp_path, strategy="optuna") == 0
    monkeypatch.undo()
    out = capsys.readouterr().out
    assert "Configurations compared on the seeds they share" in out and "report with plots" in out
    runs = [f"trials/{t}/seed{s}" for t in (0, 1) for s in (42, 43)]
    assert {f"{r}/summary.json" for r in runs} | {f"{r}/outcomes/test.jsonl" for r in runs} <= set(opened)
    assert max(opened.values()) == 1, opened
    assert len(compared) == 1


def test_configurations_tied_on_validation_say_the_reference_is_only_the_first_listed(tmp_path):
    """Validation cannot pick among tied configurations: the reference is the first listed, and the tables say so."""
    tied = {("a", 1): 0.5, ("a", 2): 0.5, ("b", 1): 0.4, ("b", 2): 0.6, ("c", 1): 0.5, ("c", 2): 0.5}
    make_seed_sweep(tmp_path, tied, cost=False)
    rows = table_rows(build_report(tmp_path, plots=False).read_text(), "## Mean ± std over seeds")
    assert [r[0] for r in rows] == ["reward_mix=a", "reward_mix=b", "reward_mix=c"]  # in the sweep's order
    assert rows[0][6] == (
        "reference (all 3 configurations tie on validation (0.5): the first listed is the reference, an arbitrary pick)"
    )
    assert rows[1][6].startswith("indistinguishable")
    make_seed_sweep(tmp_path / "top", {**tied, ("b", 1): 0.3}, cost=False)  # b below: a and c tie at the top
    block = sweep_table(tmp_path / "top").split("Per configuration over seeds")[1].splitlines()
    assert block[1].split()[0] == "reward_mix=a" and block[1].endswith(
        "reference (tied best on validation with reward_mix=c: the first listed is the reference, an arbitrary pick)"
    )
    make_seed_sweep(tmp_path / "one", THREE_SEEDS, cost=False)  # no tie: as before
    assert (
        sweep_table(tmp_path / "one")
        .split("Per configuration over seeds")[1]
        .splitlines()[1]
        .endswith("reference (best on validation)")
    )
