"""Real tiny GRPO runs on CPU: what a run directory holds, that learning shows, and generate."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from grpo_sweep.run.files import read_jsonl
from grpo_sweep.run.record import RunSummary

from .conftest import FAST, ROOT, compose


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    from grpo_sweep.run.train import train

    run_dir = tmp_path_factory.mktemp("run")
    cfg = compose(FAST + ["reward_mix=unsloth_gsm8k"])
    summary = train(cfg, run_dir, overrides=["reward_mix=unsloth_gsm8k"])
    return run_dir, summary


def test_summary_holds_what_sweeps_compare(finished_run):
    run_dir, summary = finished_run
    on_disk = json.loads((run_dir / "summary.json").read_text())
    assert on_disk == json.loads(json.dumps(summary.to_dict()))  # the record train returns is the file's
    assert RunSummary.from_dict(on_disk) == summary
    assert summary.status == "completed"
    assert summary.steps == 6
    assert (
        summary["objective"] == summary["val_accuracy"] == summary["test_accuracy"] == 0.0
    )  # a random model cannot do arithmetic
    mix = ["xmlcount", "soft_format", "strict_format", "int", "correct"]
    assert list(summary["test_rewards"]) == list(summary["val_rewards"]) == mix
    assert list(summary["train_rewards"]) == mix
    assert all(0.0 <= v <= 1.0 for v in summary["test_rewards"].values())
    assert isinstance(summary["reward"], float)
    assert summary["runtime_s"] > 0
    assert summary["versions"]["trl"] == "1.14.2"
    assert summary["reward_weights"]["correct"] == 2.0


def test_metrics_jsonl_has_one_row_per_step_with_trl_keys(finished_run):
    run_dir, _ = finished_run
    rows = [r for r in read_jsonl(run_dir / "metrics.jsonl") if "reward" in r]
    assert [r["step"] for r in rows] == list(range(1, 7))
    for key in (
        "reward",
        "reward_std",
        "rewards/xmlcount/mean",
        "rewards/correct/std",
        "loss",
        "learning_rate",
        "entropy",
    ):
        assert key in rows[0], key
    # TRL's `reward` is the weighted sum of the unweighted per-reward means.
    weights = {"xmlcount": 0.5, "soft_format": 0.5, "strict_format": 0.5, "int": 0.5, "correct": 2.0}
    for row in rows:
        weighted = sum(w * row[f"rewards/{n}/mean"] for n, w in weights.items())
        assert row["reward"] == pytest.approx(weighted, abs=1e-5)


def test_adapter_and_samples_are_saved(finished_run):
    run_dir, _ = finished_run
    assert (run_dir / "lora" / "adapter_config.json").is_file()
    assert (run_dir / "lora" / "adapter_model.safetensors").is_file()
    assert (run_dir / "lora" / "tokenizer.json").is_file()
    samples = read_jsonl(run_dir / "samples.jsonl")
    assert len(samples) == 8
    assert samples[0]["prompt"][0]["role"] == "system"
    assert set(samples[0]["scores"]) == {"xmlcount", "soft_format", "strict_format", "int", "correct"}


def test_full_fine_tuning_saves_the_model(tmp_path):
    from grpo_sweep.run.train import train

    summary = train(compose(FAST + ["lora=none", "trainer.max_steps=2"]), tmp_path)
    assert summary["steps"] == 2
    assert (tmp_path / "model" / "config.json").is_file()
    assert not (tmp_path / "lora").exists()


@pytest.mark.slow
def test_learning_shows_with_the_smoke_settings(tmp_path):
    """The main job's settings, warm start included: the training reward (`correct`) rises clearly in 60 steps."""
    from grpo_sweep.run.train import train

    summary = train(compose(["trainer.max_steps=60", "data.max_val_samples=8", "data.max_test_samples=8"]), tmp_path)
    assert summary["reward"] > summary["reward_first"] + 0.1, summary


def test_generate_prints_text(finished_run, capsys):
    from omegaconf import OmegaConf

    from grpo_sweep.run.generate import main

    run_dir, _ = finished_run
    # generate reads the run's saved config, as a user's run dir would have it
    hydra_dir = run_dir / ".hydra"
    hydra_dir.mkdir(exist_ok=True)
    OmegaConf.save(compose(FAST + ["reward_mix=unsloth_gsm8k"]), hydra_dir / "config.yaml")
    # in this process: the command line's own entry (`python -m grpo_sweep.run.generate`) is the test below
    assert main([str(run_dir), "Calculate pi.", "--seed", "0", "--max-new-tokens", "12"]) == 0
    assert capsys.readouterr().out.strip()


def test_generate_refuses_a_non_run_dir(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "grpo_sweep.run.generate", str(tmp_path), "hi"], cwd=ROOT, capture_output=True, text=True
    )
    assert out.returncode == 2
    assert "not a run directory" in out.stderr


def test_same_seed_same_run(tmp_path):
    from grpo_sweep.run.train import train

    cfg = compose(FAST + ["trainer.max_steps=3"])
    first = train(cfg, tmp_path / "a")
    second = train(cfg, tmp_path / "b")

    def strip(rows):
        return [
            {k: v for k, v in r.items() if "time" not in k and "runtime" not in k and "per_second" not in k}
            for r in rows
        ]

    assert strip(read_jsonl(tmp_path / "a" / "metrics.jsonl")) == strip(read_jsonl(tmp_path / "b" / "metrics.jsonl"))
    assert first["test_rewards"] == second["test_rewards"]


def test_the_effective_grpo_config_is_saved_with_the_values_asked_for(finished_run):
    run_dir, _ = finished_run
    cfg = compose(FAST + ["reward_mix=unsloth_gsm8k"])
    saved = json.loads((run_dir / "grpo_config.json").read_text())
    for name in (
        "loss_type",
        "beta",
        "num_generations",
        "max_completion_length",
        "max_steps",
        "mask_truncated_completions",
        "temperature",
        "seed",
    ):
        assert saved[name] == cfg.trainer[name], name
    assert saved["learning_rate"] == cfg.optimizer.learning_rate
    # TRL's objective, passed explicitly (Unsloth would make them 0.28 and False)
    assert saved["epsilon"] == saved["epsilon_high"] == 0.2
    assert saved["vllm_importance_sampling_correction"] is True


def test_grpo_config_pins_trls_defaults_that_unsloth_changes_and_trainer_args_still_win(tmp_path):
    import dataclasses

    from trl.trainer.grpo_config import GRPOConfig

    from grpo_sweep.run.train import TRL_GRPO_DEFAULTS, grpo_config

    fields = {f.name: f.default for f in dataclasses.fields(GRPOConfig)}
    assert {name: fields[name] for name in TRL_GRPO_DEFAULTS} == TRL_GRPO_DEFAULTS
    assert fields["epsilon_high"] is None  # TRL: the same as epsilon

    args = grpo_config(compose(FAST + ["+trainer.args.epsilon=0.1"]), tmp_path, [1.0])
    assert (args.epsilon, args.epsilon_high, args.vllm_importance_sampling_correction) == (0.1, 0.1, True)
    args = grpo_config(
        compose(FAST + ["+trainer.args.epsilon_high=0.28", "+trainer.args.vllm_importance_sampling_correction=false"]),
        tmp_path,
        [1.0],
    )
    assert (args.epsilon, args.epsilon_high, args.vllm_importance_sampling_correction) == (0.2, 0.28, False)


def test_the_saved_grpo_config_masks_secrets(monkeypatch, tmp_path):
    from types import SimpleNamespace

    from grpo_sweep.run.train import write_grpo_config

    monkeypatch.setenv("WANDB_API_KEY", "k" * 40)
    args = SimpleNamespace(to_dict=lambda: {"run_name": "run-" + "k" * 40, "hub_token": "hf_abcdefghijk", "beta": 0.0})
    saved = json.loads(write_grpo_config(tmp_path, args).read_text())
    assert saved == {"run_name": "run-***", "hub_token": "***", "beta": 0.0}


def test_every_way_a_run_ends_writes_the_same_summary_fields(finished_run, tmp_path, monkeypatch):
    """Completed, pruned and failed in evaluation: one function ends a run, so each summary has every field a run
    that trained has (adapter, costs, timings, reward failures, the base model), read through the schema."""
    from grpo_sweep.run import train as train_module
    from grpo_sweep.run.context import RunContext
    from grpo_sweep.run.record import RunSummary
    from grpo_sweep.run.results import EvaluationFailed
    from grpo_sweep.search.optuna.pruning import TrialMonitor

    class PruneAtOnce:
        def report(self, value, step):
            pass

        def should_prune(self):
            return True

    trained = {
        "adapter",
        "base_model_sha256",
        "resumed_from_steps",
        "reward_failures",
        "reward_cost",
        "timings_s",
        "device",
        "device_seconds",
        "generated_tokens",
        "tokens_per_s",
        "steps",
        "reward",
        "train_rewards",
        "runtime_s",
        "versions",
        "val_accuracy_before",
        "eval_steps",
    }
    cfg = compose(FAST)
    monitor = TrialMonitor(PruneAtOnce(), "val_accuracy", every=2, eval_samples=4)
    pruned = train_module.train(cfg, RunContext(run_dir=tmp_path / "pruned", overrides=["pruned"]), monitor=monitor)

    def broken(*args, **kwargs):
        raise RuntimeError("the evaluator broke")

    monkeypatch.setattr(train_module, "final_evaluations", broken)
    with pytest.raises(EvaluationFailed):
        train_module.train(cfg, RunContext(run_dir=tmp_path / "failed", overrides=["failed"]))
    runs = {"completed": finished_run[0], "pruned": tmp_path / "pruned", "failed": tmp_path / "failed"}
    for status, run_dir in runs.items():
        on_disk = json.loads((run_dir / "summary.json").read_text())
        assert RunSummary.from_dict(on_disk).status == status
        written = {key for key, value in on_disk.items() if value is not None}
        assert trained <= written, (status, sorted(trained - written))
    assert pruned["pruned_at_step"] == 2 and pruned["steps"] == 2
    failed = json.loads((tmp_path / "failed" / "summary.json").read_text())
    assert failed["failed_in"] == "evaluation" and "the evaluator broke" in failed["error"]
    assert (tmp_path / "failed" / failed["adapter"]).is_dir()
