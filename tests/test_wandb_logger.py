"""logger=wandb: offline runs of a real tiny sweep read back from their .wandb files, resume, no secrets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from grpo_sweep.run.context import RunContext
from grpo_sweep.run.record import RunSummary
from grpo_sweep.run.redact import redact
from grpo_sweep.tracking.wandb_logger import choose_mode, run_name, run_tags, swept_keys

from .conftest import FAST, ROOT, run_launch

pytest.importorskip("wandb")
from .wandb_offline import offline_run_dirs, read_offline_run  # noqa: E402

# Looks like a real key (W&B checks the length) so the online path is really tried, against a closed port.
FAKE_KEY = "local-" + "fe11" * 10
FAKE_HF_TOKEN = "hf_" + "0ddba11" * 5
UNREACHABLE = {"WANDB_API_KEY": FAKE_KEY, "WANDB_BASE_URL": "http://127.0.0.1:9", "WANDB_MODE": "auto"}


@pytest.fixture(scope="module")
def wandb_sweep(tmp_path_factory):
    """A real 4-run grid (2 reward mixes x 2 seeds) logged to W&B offline; also the report's input."""
    out_root = tmp_path_factory.mktemp("wandb_sweep")
    # no credentials at all (an unknown WANDB_MODE is dropped with a warning rather than crashing wandb)
    env = {"WANDB_API_KEY": "", "WANDB_MODE": "", "NETRC": str(out_root / "no-netrc"), "HF_TOKEN": FAKE_HF_TOKEN}
    out = run_launch(
        ["-m", "logger=wandb", "logger.log_completions_steps=3", "reward_mix=format,smoke", "trainer.seed=1,2", *FAST],
        out_root,
        env=env,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    [sweep_dir] = list(out_root.glob("grpo/multiruns/*"))
    return sweep_dir, out


@pytest.mark.slow
def test_sweep_runs_are_separate_offline_runs_sharing_one_group(wandb_sweep):
    sweep_dir, out = wandb_sweep
    run_dirs = sorted(p for p in sweep_dir.iterdir() if (p / "summary.json").exists())
    assert len(run_dirs) == 4
    everything = [read_offline_run(d) for d in offline_run_dirs(sweep_dir)]
    runs = [r for r in everything if r.job_type != "verdicts"]
    assert len(runs) == 4 and len({r.run_id for r in runs}) == 4  # one W&B run per training run, never merged
    assert {r.run_id for r in runs} == {(d / "wandb_run_id").read_text().strip() for d in run_dirs}
    assert len({r.group for r in runs}) == 1 and sweep_dir.name in runs[0].group
    assert {r.job_type for r in runs} == {"train"}
    assert {r.exit_code for r in runs} == {0}
    # names carry the swept keys only; tags carry every training override
    assert {r.name for r in runs} == {f"reward_mix={m},trainer.seed={s}" for m in ("format", "smoke") for s in (1, 2)}
    for run in runs:
        run_dir = run.path.parent.parent
        summary = json.loads((run_dir / "summary.json").read_text())
        assert "trainer.max_steps=6" in run.tags and run.name.split(",")[0] in run.tags
        # the fully resolved Hydra config, filterable by any key, beside the GRPOConfig and model config that
        # transformers' W&B callback adds (flat, under their own names)
        hydra_config = OmegaConf.to_container(OmegaConf.load(run_dir / ".hydra/config.yaml"), resolve=True)
        assert {k: run.config[k] for k in hydra_config} == hydra_config and run.config["trainer"]["max_steps"] == 6
        assert run.config["num_generations"] == hydra_config["trainer"]["num_generations"]
        assert run.config["learning_rate"] == hydra_config["optimizer"]["learning_rate"]
        assert (
            run.config["max_steps"] == 6 and run.config["hidden_size"] == hydra_config["model"]["tiny"]["hidden_size"]
        )
        assert f"trainer.seed={run.config['trainer']['seed']}" in run.name
        assert set(run.config["reward_mix"]) == ({"format"} if "format" in run.name else {"xmlcount", "correct"})
        # per-step TRL metrics, one row per step, logged by transformers' W&B callback under its train/ prefix
        names = set(run.config["reward_mix"])
        train_rows = [h for h in run.history if "train/reward" in h]
        assert [h["train/global_step"] for h in train_rows] == list(range(1, 7))
        for name in names:
            assert all(f"train/rewards/{name}/mean" in h and f"train/rewards/{name}/std" in h for h in train_rows)
        assert all("train/completions/mean_length" in h and "train/learning_rate" in h for h in train_rows)
        assert "train_runtime" in run.summary  # the callback's end-of-training scalars go to the summary
        tables = [h for h in run.history if "completions._type" in h]
        assert [h["train/global_step"] for h in tables] == [3, 6]  # every logger.log_completions_steps
        assert tables[0]["completions.ncols"] == 4 + len(names)  # step, prompt, completion, rewards, advantage
        # summary: objective, validation and test accuracy, the step the objective was measured at
        assert run.summary["objective"] == summary["objective"]
        assert run.summary["val_accuracy"] == summary["val_accuracy"]
        assert run.summary["test_accuracy"] == summary["test_accuracy"]
        assert run.summary["objective_step"] == summary["best_step"] and run.summary["status"] == "completed"
        # the validation evaluations: before training (step 0) and after, in history; the reported one in the summary
        evals = [h for h in run.history if "val/accuracy" in h]
        assert [h["train/global_step"] for h in evals] == summary["eval_steps"] == [0, 6]
        assert all(f"val/{name}" in h and "val/accuracy_lenient" in h for h in evals for name in names)
        for key in (
            "val_accuracy_before",
            "val_accuracy_lenient",
            "test_accuracy_before",
            "test_accuracy_lenient",
            "test_pass_at_k",
            "test_maj_at_k",
            "best_objective",
            "best_step",
        ):
            assert run.summary[key] == summary[key], key
        # flat keys a dashboard groups by: each group's option and the overrides the sweep varies, nothing common
        mix = run.name.split(",")[0].split("=")[1]
        assert run.config["choices.reward_mix"] == run.config["override.reward_mix"] == mix
        assert run.config["choices.lora"] == "wide" and run.config["choices.model"] == "tiny"
        assert run.config["override.trainer.seed"] == run.config["trainer"]["seed"]
        assert sorted(k for k in run.config if k.startswith("override.")) == [
            "override.reward_mix",
            "override.trainer.seed",
        ]
    assert out.stdout.count("upload it with: wandb sync") == 5  # the four runs, then the sweep's verdicts run


@pytest.mark.slow
def test_resumed_run_continues_the_same_wandb_run_and_no_secret_is_written(tmp_path):
    """Credentials exist but the server cannot be reached: offline fallback, never a crash; the second start in
    the same run dir continues the same W&B run; the key appears in no file the runs wrote."""
    run_dir = tmp_path / "run"
    args = ["logger=wandb", "logger.init_timeout=2", f"hydra.run.dir={run_dir}", *FAST]
    first = run_launch(args, tmp_path, env=UNREACHABLE)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "logging offline instead" in first.stdout + first.stderr
    run_id = (run_dir / "wandb_run_id").read_text().strip()
    # as if the job was killed after its last checkpoint, before its summary: started again, it resumes
    (run_dir / "summary.json").unlink()
    second = run_launch(args, tmp_path, env=UNREACHABLE)
    assert second.returncode == 0, second.stderr[-3000:]
    assert (run_dir / "wandb_run_id").read_text().strip() == run_id
    assert (
        f"W&B run {run_id} (offline, group " in second.stdout + second.stderr
        and ", resumed)" in second.stdout + second.stderr
    )
    parts = offline_run_dirs(run_dir)
    assert len(parts) == 2 and {read_offline_run(p).run_id for p in parts} == {run_id}
    assert f"wandb sync {run_dir}/wandb/offline-run-*-{run_id}" in second.stdout
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(written) > 20
    leaks = [p for p in written if FAKE_KEY.encode() in p.read_bytes()]
    assert not leaks, leaks
    assert FAKE_KEY not in first.stdout + first.stderr + second.stdout + second.stderr


# a training run in an interpreter of its own, ~10 s: with the slow tests
@pytest.mark.slow
def test_logger_none_runs_without_wandb_installed(tmp_path):
    """A site-packages view without wandb (as on a machine where it was never installed)."""
    site = Path(next(p for p in sys.path if p.endswith("site-packages")))
    view = tmp_path / "site"
    view.mkdir()
    for entry in site.iterdir():
        if not entry.name.lower().startswith("wandb"):
            (view / entry.name).symlink_to(entry)
    boot = (
        "import site, sys, runpy; site.addsitedir(sys.argv[1]); sys.path.insert(0, sys.argv[2]);"
        "import importlib.util; assert importlib.util.find_spec('wandb') is None;"
        "sys.argv = [sys.argv[3]] + sys.argv[4:]; runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    out = subprocess.run(
        [
            sys.executable,
            "-S",
            "-c",
            boot,
            str(view),
            str(ROOT),
            str(ROOT / "launch.py"),
            *FAST,
            f"output_root={tmp_path}",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": ""},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "objective val_accuracy" in out.stdout
    [summary] = list(tmp_path.glob("grpo/runs/*/summary.json"))
    assert json.loads(summary.read_text())["status"] == "completed"
    assert not list(tmp_path.glob("grpo/runs/*/wandb*"))


def test_names_tags_and_redaction():
    overrides = ["logger=wandb", "reward_mix=format", "lora.r=16", "output_root=/x", "hydra.run.dir=/y"]
    assert run_name(overrides) == "reward_mix=format,lora.r=16"
    assert run_name(overrides, {"lora.r"}) == "lora.r=16"
    assert run_name(["logger=wandb"]) == "defaults"
    assert run_tags(overrides, ["mine", "lora.r=16"]) == ["mine", "lora.r=16", "reward_mix=format"]
    cfg = {
        "trainer": {"args": {"hub_token": "abc", "push": True}, "max_new_tokens": 16},
        "note": "k=sekrit-value-123",
        "n": 1,
    }
    assert redact(cfg, ["sekrit-value-123"]) == {
        "trainer": {"args": {"hub_token": "***", "push": True}, "max_new_tokens": 16},
        "note": "k=***",
        "n": 1,
    }


def test_mode_choice(monkeypatch, tmp_path):
    for var in ("WANDB_API_KEY", "WANDB_IDENTITY_TOKEN_FILE", "WANDB_MODE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "netrc"))
    assert choose_mode("auto") == "offline"
    (tmp_path / "netrc").write_text("machine api.wandb.ai\n  login user\n  password " + "x" * 40 + "\n")
    (tmp_path / "netrc").chmod(0o600)
    assert choose_mode("auto") == "online"
    monkeypatch.setenv("WANDB_MODE", "offline")
    assert choose_mode("auto") == "offline"
    assert choose_mode("online") == "online"


def test_swept_keys_come_from_multirun_yaml(tmp_path):
    (tmp_path / "multirun.yaml").write_text(
        "hydra:\n  overrides:\n    task: [logger=wandb, 'reward_mix=format,smoke', lora.r=16, "
        "'trainer.seed=range(1,3)']\n"
    )
    assert swept_keys(tmp_path) == {"reward_mix", "trainer.seed"}
    assert swept_keys(None) == set()


@pytest.mark.slow
def test_the_sweep_verdicts_are_one_more_run_of_its_group(wandb_sweep):
    """The sweep table's verdicts (verdicts.json, the same comparisons) reach W&B as a `verdicts` run in the group."""
    sweep_dir, out = wandb_sweep
    everything = [read_offline_run(d) for d in offline_run_dirs(sweep_dir)]
    [verdicts] = [r for r in everything if r.job_type == "verdicts"]
    assert {r.group for r in everything} == {verdicts.group}
    record = json.loads((sweep_dir / "verdicts.json").read_text())
    configs = {row["config"]: row for row in record["comparisons"]}
    assert set(configs) == {"reward_mix=format", "reward_mix=smoke"}
    for config, row in configs.items():
        assert verdicts.summary[f"verdict/{config}"] == row["verdict"]
        assert verdicts.summary[f"val/{config}"] == pytest.approx(row["rank_mean"])
    assert "family-wise" in verdicts.summary["method"]
    assert "W&B: verdicts of 2 configurations logged to group" in out.stdout


@pytest.mark.slow
def test_sweep_ends_with_a_report_with_plots(wandb_sweep):
    """The same real sweep: report.md and PNGs written at the end of the sweep, from the run dirs alone."""
    sweep_dir, out = wandb_sweep
    assert f"report with plots: {sweep_dir / 'report.md'}" in out.stdout
    report = (sweep_dir / "report.md").read_text()
    runs_section = report.split("## Runs, best first")[1].split("##")[0]
    rows = [line for line in runs_section.splitlines() if line.startswith("| ") and not line.startswith("| #")]
    assert len(rows) == 4
    objectives = [float(row.split("|")[5]) for row in rows]
    assert objectives == sorted(objectives, reverse=True)
    seeds = report.split("## Mean ± std over seeds, per configuration")[1].split("##")[0]
    seed_rows = [line for line in seeds.splitlines() if line.startswith("| reward_mix=")]
    assert sorted(r.split("|")[1].strip() for r in seed_rows) == ["reward_mix=format", "reward_mix=smoke"]
    assert all(r.split("|")[2].strip() == "1,2" and "±" in r for r in seed_rows)
    assert "wandb sync" in report
    _check_pngs(sweep_dir, report, {"forest.png", "val_accuracy.png", "reward_terms.png", "accuracy_vs_reward_mix.png"})


def _check_pngs(sweep_dir: Path, report: str, expected: set[str]) -> None:
    import matplotlib.image

    pngs = sorted((sweep_dir / "plots").glob("*.png"))
    assert {p.name for p in pngs} == expected
    for png in pngs:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
        image = matplotlib.image.imread(png)
        assert image.shape[0] > 100 and image.shape[1] > 100 and image.std() > 0  # decodes, not blank
        assert f"(plots/{png.name})" in report


def test_a_failed_run_is_closed_as_failed_and_the_next_run_gets_its_own(tmp_path, monkeypatch):
    """In one process (local -m): a run that raises ends its W&B run with exit code 1; the next is a new run."""
    from grpo_sweep.run import train as train_module
    from grpo_sweep.tracking import open_logger

    from .conftest import compose

    def boom(*args, **kwargs):
        raise ValueError("boom")

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setattr(train_module, "load_splits", boom)  # raises once the run's tracker is open
    cfg = compose(["logger=wandb", "logger.group=g1", "logger.job_type=trial"])
    with pytest.raises(ValueError, match="boom"):
        train_module.train(cfg, RunContext(tmp_path / "0", ["reward_mix=format"]), open_tracker=open_logger)
    second = open_logger(cfg, RunContext(tmp_path / "1", ["reward_mix=smoke"]))
    second.finish(RunSummary("completed", objective=0.5, val_accuracy=0.5, steps=3))
    [failed] = [read_offline_run(p) for p in offline_run_dirs(tmp_path / "0")]
    [done] = [read_offline_run(p) for p in offline_run_dirs(tmp_path / "1")]
    assert failed.run_id != done.run_id == second.run_id
    assert (failed.exit_code, failed.summary["status"], failed.summary["error"]) == (1, "failed", "ValueError: boom")
    assert (done.exit_code, done.summary["objective"], done.summary["objective_step"]) == (0, 0.5, 3)
    assert {failed.group, done.group} == {"g1"} and {failed.job_type, done.job_type} == {"trial"}


@pytest.mark.slow
def test_no_token_in_any_file_of_the_sweep(wandb_sweep):
    """Every file the sweep wrote (run dirs, W&B files, tables, report) is free of the secret in the environment."""
    sweep_dir, out = wandb_sweep
    written = [p for p in sweep_dir.rglob("*") if p.is_file()]
    assert any(p.name == "report.md" for p in written) and any(p.suffix == ".wandb" for p in written)
    assert not [p for p in written if FAKE_HF_TOKEN.encode() in p.read_bytes()]
    assert FAKE_HF_TOKEN not in out.stdout + out.stderr


def test_history_goes_through_transformers_only_into_a_run_that_started(tmp_path, monkeypatch):
    """report_to=["wandb"] only when grpo-sweep's own W&B run started: transformers' callback would otherwise start
    one of its own (project "huggingface", online)."""
    import wandb

    from grpo_sweep.run.tracker import RunLogger
    from grpo_sweep.tracking import open_logger

    from .conftest import compose

    monkeypatch.setenv("WANDB_MODE", "offline")
    cfg = compose(["logger=wandb"])
    started = open_logger(cfg, RunContext(tmp_path / "0", ["reward_mix=format"]))
    assert started.report_to() == ["wandb"]
    started.finish(RunSummary("completed"))

    def refuse(**kwargs):
        raise RuntimeError("no W&B here")

    monkeypatch.setattr(wandb, "init", refuse)
    broken = open_logger(cfg, RunContext(tmp_path / "1", ["reward_mix=format"]))
    assert broken.run is None and broken.report_to() == []
    broken.finish(RunSummary("completed"))
    assert RunLogger().report_to() == []


@pytest.mark.slow
def test_trls_own_completions_table_replaces_ours_when_asked(tmp_path):
    """trainer.args.log_completions=true (TRL's name, passed through): TRL logs its table into the same W&B run at
    every logging step (and a parquet file per step), and grpo-sweep's every-N table steps aside."""
    run_dir = tmp_path / "run"
    out = run_launch(
        [
            "logger=wandb",
            "logger.mode=offline",
            "logger.log_completions_steps=2",
            "++trainer.args.log_completions=true",
            "++trainer.args.num_completions_to_print=1",
            f"hydra.run.dir={run_dir}",
            *FAST,
        ],
        tmp_path,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    [part] = offline_run_dirs(run_dir)
    tables = [h for h in read_offline_run(part).history if "completions._type" in h]
    # TRL's: at every logging step, and once more with the end-of-training row; ours (every 2): none
    assert [h["train/global_step"] for h in tables] == [1, 2, 3, 4, 5, 6, 6]
    assert len(list((run_dir / "checkpoints" / "completions").glob("completions_*.parquet"))) == 6


@pytest.mark.slow
def test_a_scheduled_weight_is_in_the_wandb_history_step_by_step(tmp_path):
    """reward_mix.<term>.schedule: each step's weight reaches W&B as reward_weights/<term>, at that step."""
    run_dir = tmp_path / "run"
    out = run_launch(
        [
            "logger=wandb",
            "logger.mode=offline",
            "++reward_mix.xmlcount.schedule.kind=linear",
            "++reward_mix.xmlcount.schedule.end=1",
            f"hydra.run.dir={run_dir}",
            *FAST,
        ],
        tmp_path,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    [part] = offline_run_dirs(run_dir)
    rows = [h for h in read_offline_run(part).history if "reward_weights/xmlcount" in h]
    assert [round(h["reward_weights/xmlcount"], 6) for h in rows] == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert [h["reward_weights/correct"] for h in rows] == [1.0] * 6
    assert [h["train/global_step"] for h in rows] == [1, 2, 3, 4, 5, 6]


def test_config_has_flat_group_choices_and_swept_overrides_and_the_summary_val_and_test(tmp_path, monkeypatch):
    """A dashboard groups by ``choices.reward_mix`` (not the expanded reward dict) and averages over
    ``override.trainer.seed``; the summary holds validation and test side by side."""
    from grpo_sweep.tracking import open_logger

    from .conftest import compose

    monkeypatch.setenv("WANDB_MODE", "offline")
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "multirun.yaml").write_text(
        "hydra:\n  overrides:\n    task: [logger=wandb, 'reward_mix=format,smoke', lora.r=16, 'trainer.seed=1,2',"
        " 'optimizer.learning_rate=1e-4,3e-4']\n"
    )
    overrides = ["logger=wandb", "reward_mix=format", "lora.r=16", "trainer.seed=2", "optimizer.learning_rate=1e-4"]
    choices = {"reward_mix": "format", "lora": "wide", "model": "tiny"}
    cfg = compose(["logger=wandb", "reward_mix=format"])
    logger = open_logger(cfg, RunContext(sweep / "3", overrides, sweep, choices=choices))
    summary = {
        "status": "completed",
        "optimized_metric": "val_accuracy",
        "objective": 0.6,
        "val_accuracy": 0.6,
        "val_accuracy_before": 0.3,
        "test_accuracy": 0.55,
        "test_accuracy_before": 0.31,
        "best_step": 4,
        "steps": 6,
        "val_rewards": {"format": 0.9},
        "test_rewards": {"format": 0.8},
    }
    logger.finish(RunSummary.from_dict(summary))
    [run] = [read_offline_run(p) for p in offline_run_dirs(sweep / "3")]
    flat = {k: v for k, v in run.config.items() if k.startswith(("choices.", "override."))}
    assert flat == {
        "choices.reward_mix": "format",
        "choices.lora": "wide",
        "choices.model": "tiny",
        "override.reward_mix": "format",
        "override.trainer.seed": 2,
        "override.optimizer.learning_rate": 1e-4,
    }  # lora.r=16 is common to the sweep: not a varying key
    assert set(run.config["reward_mix"]) == {"format"}  # the expanded config is still there
    assert {
        k: run.summary[k]
        for k in (
            "val_accuracy",
            "val_accuracy_before",
            "test_accuracy",
            "test_accuracy_before",
            "objective_step",
            "val_rewards/format",
            "test_rewards/format",
        )
    } == {
        "val_accuracy": 0.6,
        "val_accuracy_before": 0.3,
        "test_accuracy": 0.55,
        "test_accuracy_before": 0.31,
        "objective_step": 4,
        "val_rewards/format": 0.9,
        "test_rewards/format": 0.8,
    }
    assert not [k for k in run.summary if k.startswith("eval")]


def test_group_choices_come_from_hydra_and_a_trial_overrides_its_own(tmp_path):
    from grpo_sweep.run.context import group_choices

    hydra_choices = {
        "reward_mix": "smoke",
        "lora": "wide",
        "debug": None,
        "hydra": "default",
        "hydra/launcher": "pool",
        "hydra/sweeper": "basic",
    }
    assert group_choices(hydra_choices) == {"reward_mix": "smoke", "lora": "wide"}
    worker = RunContext(
        tmp_path,
        ["hparams_search=reward_design"],
        tmp_path,
        optuna_worker=True,
        choices={"reward_mix": "smoke", "lora": "wide"},
    )
    trial = worker.for_trial(tmp_path / "trials/0", ["reward_mix=format", "optimizer.learning_rate=1e-4"])
    assert trial.choices == {"reward_mix": "format", "lora": "wide"} and worker.choices["reward_mix"] == "smoke"


def test_what_a_reward_prints_is_not_in_the_wandb_run_whose_logs_are_the_masked_run_log(tmp_path, monkeypatch):
    """A reward that prints, warns and logs a key: W&B's console capture would keep it unmasked in output.log and
    the .wandb file; the run's log (masked) is the W&B run's output.log instead. Every file under wandb/ is read."""
    import logging
    import warnings

    from grpo_sweep.run.redact import install_log_redaction
    from grpo_sweep.tracking import open_logger

    from .conftest import compose

    key = "not-shaped-like-any-token-" + "5ec7e7" * 4  # masked as MY_API_KEY's value, not by its shape
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("MY_API_KEY", key)
    run_dir = tmp_path / "0"
    run_dir.mkdir()
    handler = logging.FileHandler(run_dir / "launch.log")  # as Hydra's job logging has it
    root = logging.getLogger()
    root.addHandler(handler)
    install_log_redaction()
    try:
        tracker = open_logger(compose(["logger=wandb"]), RunContext(run_dir, ["reward_mix=format"]))
        print("reward sees", os.environ["MY_API_KEY"])
        print("reward sees", os.environ["MY_API_KEY"], file=sys.stderr)
        warnings.warn(f"reward sees {os.environ['MY_API_KEY']}", stacklevel=1)
        logging.getLogger("a_reward").warning("reward sees %s", os.environ["MY_API_KEY"])
        tracker.finish(RunSummary("completed", objective=0.5))
    finally:
        root.removeHandler(handler)
        handler.close()
    written = [p for p in (run_dir / "wandb").rglob("*") if p.is_file()]
    assert any(p.suffix == ".wandb" for p in written), written
    assert not [p for p in written if key.encode() in p.read_bytes()]
    [offline] = offline_run_dirs(run_dir)
    assert "reward sees ***" in (offline / "files" / "output.log").read_text()


def test_the_reports_command_uploads_every_offline_run_of_the_sweep_the_verdicts_run_included(
    tmp_path, monkeypatch, capsys
):
    """The end of a sweep writes report.md, then logs the `verdicts` run (into <sweep>/wandb): the report's command,
    run after the sweep, still takes it, beside the runs' own (one of them nested, as an Optuna trial's seeds are)."""
    from .test_report import make_run, make_seed_sweep, multirun_end

    make_seed_sweep(tmp_path, {("a", 1): 0.2, ("a", 2): 0.4, ("b", 1): 0.9, ("b", 2): 0.7}, cost=False)
    make_run(tmp_path, "trials/0/seed1", ["reward_mix=c", "trainer.seed=1"], {"objective": 0.1})
    runs = [tmp_path / str(i) for i in range(4)] + [tmp_path / "trials/0/seed1"]
    for i, run_dir in enumerate(runs):  # as a training run leaves it offline: wandb sync reads the .wandb file
        offline = run_dir / f"wandb/offline-run-20260101_000000-run{i}"
        offline.mkdir(parents=True)
        (offline / f"run-run{i}.wandb").write_bytes(b"")
    monkeypatch.setenv("WANDB_MODE", "offline")
    multirun_end(tmp_path, {"mode": "offline", "project": "p", "entity": None, "group": None})
    out = capsys.readouterr().out
    [verdicts] = list((tmp_path / "wandb").glob("offline-run-*"))
    assert f"upload it with: wandb sync {verdicts}" in out  # the verdicts run prints its own, as each run does
    [command] = [line.strip() for line in (tmp_path / "report.md").read_text().splitlines() if "wandb sync" in line]
    dry_run = command.replace("wandb sync", "wandb sync --dry-run")
    listed = subprocess.run(
        ["bash", "-c", dry_run],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"},
    )
    assert "Would sync 6 run(s)" in listed.stdout + listed.stderr, listed.stdout + listed.stderr
    assert verdicts.name in listed.stdout + listed.stderr
