"""Optuna search: sound spaces, a real pruning study with failures, resume, and best-trial reproduction."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from grpo_sweep.search.space import SearchSpace, SearchSpaceError, stick_breaking
from grpo_sweep.search.storage import check_storage_url

from .conftest import ROOT, compose

STUDY_ARGS = [
    "-m", "--config-dir", str(ROOT / "tests" / "conf"), "hparams_search=test_space",
    "trainer.max_steps=16", "data.max_eval_samples=8", "data.arithmetic.n_train=64",
    "data.arithmetic.n_eval=8", "trainer.eval.max_new_tokens=16",
]


def test_stick_breaking_lands_on_the_simplex():
    for u in ([0.0], [1.0], [0.3, 0.9], [0.5, 0.5, 0.5], [0.99, 0.01, 0.7]):
        w = stick_breaking(u)
        assert len(w) == len(u) + 1
        assert min(w) >= 0 and sum(w) == pytest.approx(1.0)
    # distinct points give distinct weights (no wasted, equivalent trials)
    assert stick_breaking([0.2, 0.4]) != stick_breaking([0.4, 0.2])


class FakeTrial:
    def suggest_float(self, name, low, high, log=False):
        return (low + high) / 2

    def suggest_int(self, name, low, high, log=False):
        return low

    def suggest_categorical(self, name, choices):
        return choices[-1]


def test_space_searches_weights_on_simplex_and_adjusts_batch():
    cfg = compose(["reward_mix=unsloth_gsm8k"])
    space = SearchSpace.from_config(
        {"trainer.num_generations": {"type": "categorical", "choices": [2, 4, 16], "adjust_batch": True},
         "optimizer.learning_rate": {"type": "float", "low": 1e-4, "high": 1e-2, "log": True}},
        {"rewards": None}, cfg,
    )
    values = space.suggest(FakeTrial(), cfg)
    weights = [values[f"reward_mix.{n}.weight"] for n in cfg.reward_mix]
    assert sum(weights) == pytest.approx(1.0, abs=1e-5)
    # 16 generations with the smoke preset's 2 prompts per step -> batch 32
    assert values["trainer.num_generations"] == 16
    assert values["trainer.per_device_train_batch_size"] == 32


def test_space_keeps_only_compatible_generation_counts_without_adjusting():
    cfg = compose()  # batch 16
    space = SearchSpace.from_config(
        {"trainer.num_generations": {"type": "categorical", "choices": [3, 4, 6, 8], "adjust_batch": False}}, None, cfg
    )
    assert space.params["trainer.num_generations"]["choices"] == [4, 8]


@pytest.mark.parametrize(
    "params, weights, message",
    [
        ({"optimizer.learning_rate": {"type": "float", "low": 0.0, "high": 1.0, "log": True}}, None, "log-scaled range needs low > 0"),
        ({"optimizer.lr": {"type": "float", "low": 1e-4, "high": 1e-2}}, None, "'optimizer.lr' is not a config key"),
        ({"lora.r": {"type": "choice", "choices": [8]}}, None, "type='choice'"),
        ({}, {"rewards": ["xmlcount", "nope"]}, "\\['nope'\\] not in reward_mix"),
        ({"trainer.num_generations": {"type": "categorical", "choices": [3, 5], "adjust_batch": False}}, None, "no choice in \\[3, 5\\] divides"),
    ],
)
def test_bad_search_spaces_fail_clearly(params, weights, message):
    with pytest.raises(SearchSpaceError, match=message):
        SearchSpace.from_config(params, weights, compose())


def test_unopenable_storage_is_named(tmp_path):
    with pytest.raises(ValueError, match="hydra.sweeper.storage='postgresql://nobody@127.0.0.1:1/x' cannot be opened"):
        check_storage_url("postgresql://nobody@127.0.0.1:1/x")


def run_study(out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "launch.py"), *STUDY_ARGS, *extra, f"output_root={out}"],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )


def study_trials(study_dir: Path):
    import optuna

    from grpo_sweep.search.config import read_study_file
    from grpo_sweep.search.storage import open_storage

    info = read_study_file(study_dir)
    return optuna.load_study(study_name=info["study_name"], storage=open_storage(info["storage"])).trials


def test_study_prunes_survives_failures_resumes_and_reproduces(tmp_path):
    first = run_study(tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    study_dir = tmp_path / "grpo" / "studies" / "test_space"
    trials = study_trials(study_dir)
    states = [t.state.name for t in trials]
    assert len(trials) == 6
    assert "PRUNED" in states, states  # the median pruner stopped a trial...
    assert "FAIL" in states, states  # ...a failing trial is recorded, not fatal...
    assert "COMPLETE" in states, states  # ...and the study completed
    failed = next(t for t in trials if t.state.name == "FAIL")
    assert "exceeds model.max_seq_length" in failed.user_attrs["error"]

    pruned = next(t for t in trials if t.state.name == "PRUNED")
    summary = json.loads((study_dir / "trials" / str(pruned.number) / "summary.json").read_text())
    assert summary["status"] == "pruned" and summary["trial"]["state"] == "PRUNED"
    assert summary["steps"] == summary["pruned_at_step"] < 16  # stopped early, partial results kept
    assert summary["intermediate"]

    # Report: table of all trials, best.yaml with a command, plots
    assert "Optuna study 'test_space': 6 trials" in first.stdout
    best = OmegaConf.load(study_dir / "best.yaml")
    assert best.command.startswith("python launch.py ")
    assert (study_dir / "optimization_history.png").stat().st_size > 1000

    # The best command reproduces the best trial's configuration exactly.
    overrides = best.command.split()[2:]
    reproduced = OmegaConf.to_container(compose(overrides), resolve=True)
    trial_cfg = OmegaConf.to_container(OmegaConf.load(study_dir / "trials" / str(best.trial) / ".hydra" / "config.yaml"), resolve=True)
    assert reproduced == trial_cfg

    # Resume: same command with a larger budget continues the same study.
    second = run_study(tmp_path, "hydra.sweeper.n_trials=8")
    assert second.returncode == 0, second.stderr[-3000:]
    assert len(study_trials(study_dir)) == 8
    assert [t.number for t in study_trials(study_dir)] == list(range(8))


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["submitit_local", "pool"])
def test_two_workers_in_parallel_with_journal_storage(tmp_path, launcher):
    out = run_study(tmp_path, f"hydra/launcher={launcher}", "hydra.sweeper.n_workers=2", "hydra.sweeper.storage=journal")
    assert out.returncode == 0, out.stderr[-3000:]
    study_dir = tmp_path / "grpo" / "studies" / "test_space"
    assert (study_dir / "optuna.journal").exists()
    trials = study_trials(study_dir)
    assert len(trials) == 6
    workers = {json.loads(p.read_text())["trial"]["worker"] for p in study_dir.glob("trials/*/summary.json")}
    assert workers == {0, 1}
