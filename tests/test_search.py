"""Optuna search: sound spaces, a real pruning study with failures, resume, and best-trial reproduction."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from grpo_sweep.search.optuna.space import SearchSpace, SearchSpaceError, stick_breaking
from grpo_sweep.search.optuna.storage import check_storage_url

from .conftest import ROOT, compose, declare_sweeper

STUDY_ARGS = [
    "-m",
    "--config-dir",
    str(ROOT / "tests" / "conf"),
    "hparams_search=test_space",
    "trainer.max_steps=16",
    "data.max_val_samples=8",
    "data.max_test_samples=8",
    "data.arithmetic.n_train=64",
    "data.arithmetic.n_val=8",
    "data.arithmetic.n_test=8",
    "trainer.eval.max_new_tokens=16",
    # the random model, learning the format its objective (xmlcount) measures
    "model.tiny.warm_start.steps=0",
    "reward_mix.xmlcount.weight=1",
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
        {
            "trainer.num_generations": {"type": "categorical", "choices": [2, 4, 16], "adjust_batch": True},
            "optimizer.learning_rate": {"type": "float", "low": 1e-4, "high": 1e-2, "log": True},
        },
        {"rewards": None},
        cfg,
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
        (
            {"optimizer.learning_rate": {"type": "float", "low": 0.0, "high": 1.0, "log": True}},
            None,
            "low > 0 must hold for log=True",
        ),
        ({"optimizer.lr": {"type": "float", "low": 1e-4, "high": 1e-2}}, None, "'optimizer.lr' is not a config key"),
        ({"lora.r": {"type": "choice", "choices": [8]}}, None, "type='choice'"),
        ({}, {"rewards": ["xmlcount", "nope"]}, "\\['nope'\\] not in reward_mix"),
        (
            {"trainer.num_generations": {"type": "categorical", "choices": [3, 5], "adjust_batch": False}},
            None,
            "no choice in \\[3, 5\\] divides",
        ),
    ],
)
def test_bad_search_spaces_fail_clearly(params, weights, message):
    with pytest.raises(SearchSpaceError, match=message):
        SearchSpace.from_config(params, weights, compose())


def test_unopenable_storage_is_named(tmp_path):
    with pytest.raises(ValueError, match="hydra.sweeper.storage='postgresql://nobody@127.0.0.1:1/x' cannot be opened"):
        check_storage_url("postgresql://nobody@127.0.0.1:1/x")


def test_the_gate_checks_each_parameter_at_the_ends_of_what_it_samples():
    cfg = compose()  # learning rate 1e-4, num_generations 8 and 2 prompts a step (batch 16), lora.r 64
    space = SearchSpace.from_config(
        {
            "optimizer.learning_rate": {"type": "float", "low": 1e-5, "high": 1e-3, "log": True},
            "lora.r": {"type": "int", "low": 4, "high": 30, "step": 8},
            "trainer.num_generations": {"type": "categorical", "choices": [2, 8], "adjust_batch": True},
        },
        None,
        cfg,
    )
    corners = [(key, value, point) for key, value, point in space.corners(cfg)]
    assert [(key, value) for key, value, _ in corners] == [
        ("optimizer.learning_rate", 1e-5),
        ("optimizer.learning_rate", 1e-3),
        ("lora.r", 4),
        ("lora.r", 28),  # the last step below high, as Optuna samples it
        ("trainer.num_generations", 2),
        ("trainer.num_generations", 8),
    ]
    # the other parameters at the config's own values, where their range has them (lora.r 64: its low end)
    assert corners[0][2] == {
        "optimizer.learning_rate": 1e-5,
        "lora.r": 4,
        "trainer.num_generations": 8,
        "trainer.per_device_train_batch_size": 16,
    }
    inside = SearchSpace.from_config(
        {"trainer.beta": {"type": "float", "low": 0.1, "high": 0.2}, "lora.r": {"type": "int", "low": 32, "high": 128}},
        None,
        cfg,
    )
    assert next(inside.corners(cfg)) == ("trainer.beta", 0.1, {"trainer.beta": 0.1, "lora.r": 64})
    # the batch follows num_generations as in a trial
    assert corners[-2][2]["trainer.per_device_train_batch_size"] == 4
    assert space.apply(cfg, corners[-2][2]).trainer.num_generations == 2 and cfg.trainer.num_generations == 8


def test_a_study_whose_every_trial_failed_ends_in_one_line(tmp_path):
    from grpo_sweep.search.optuna.worker import study_failed

    def value_of(lr, seed):
        raise RuntimeError("no GPU left\n(second line)")

    study, objective = fake_study(
        tmp_path, {"optimizer.learning_rate": {"type": "categorical", "choices": [1e-3]}}, value_of, seeds_per_trial=1
    )
    study.optimize(objective, n_trials=3, catch=(Exception,))
    assert study_failed(study, max_failures=5) == (
        "every one of the 3 trials failed (Optuna study 'fake'); last error: RuntimeError: no GPU left (each trial's "
        "summary.json has its traceback)"
    )
    # some trials failed, within max_failures: the search's normal cost, no failure of the study
    study.optimize(
        fake_study(
            tmp_path / "ok",
            {"optimizer.learning_rate": {"type": "categorical", "choices": [1e-3]}},
            lambda lr, seed: 0.5,
            seeds_per_trial=1,
        )[1],
        n_trials=1,
    )
    assert study_failed(study, max_failures=5) is None
    assert study_failed(study, max_failures=2).startswith(
        "Optuna study 'fake' stopped: 3 trials failed, more than hydra.sweeper.max_failures=2"
    )


def study_with_its_budget_spent(url: str, name: str) -> None:
    """Study ``name`` in ``url`` with one complete trial: the same command with ``hydra.sweeper.n_trials=1`` writes the
    study's files and trains nothing (a budget of 0 trials is refused)."""
    import optuna

    from grpo_sweep.search.optuna.storage import open_storage

    study = optuna.create_study(study_name=name, storage=open_storage(url), direction="maximize")
    study.add_trial(optuna.trial.create_trial(value=0.5))


def test_a_storage_url_from_the_environment_stays_there(tmp_path, monkeypatch):
    """The URL (and a password in it) is given through the environment: every file the study writes holds the
    interpolation, and a refusal masks the password."""
    from .conftest import launch_here

    url = f"sqlite:///{tmp_path / 'elsewhere' / 'study.db'}"
    (tmp_path / "out").mkdir()
    (tmp_path / "refused").mkdir()
    study_with_its_budget_spent(url, "lr")
    out = launch_here(
        ["-m", "hparams_search=lr", "hydra.sweeper.n_trials=1", "hydra.sweeper.storage=${oc.env:OPTUNA_STORAGE}"],
        tmp_path / "out",
        env={"OPTUNA_STORAGE": url},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    study_dir = tmp_path / "out" / "grpo" / "studies" / "lr"
    assert json.loads((study_dir / "study.json").read_text())["storage"] == "${oc.env:OPTUNA_STORAGE}"
    assert "storage: ${oc.env:OPTUNA_STORAGE}" in (study_dir / "multirun.yaml").read_text()
    assert not [
        p for p in study_dir.rglob("*") if p.is_file() and str(tmp_path / "elsewhere") in p.read_text(errors="replace")
    ]
    assert 'optuna-dashboard "$OPTUNA_STORAGE"' in out.stdout
    monkeypatch.setenv("OPTUNA_STORAGE", url)
    assert len(study_trials(study_dir)) == 1  # study.json's storage opens, resolved from the environment

    secret = "postgresql://u:secretpw@127.0.0.1:1/optuna"
    out = launch_here(
        ["-m", "hparams_search=lr", "hydra.sweeper.storage=${oc.env:OPTUNA_STORAGE}"],
        tmp_path / "refused",
        env={"OPTUNA_STORAGE": secret},
    )
    lines = [line for line in (out.stdout + out.stderr).splitlines() if line.strip()]
    assert out.returncode == 1 and len(lines) == 1, lines
    assert lines[0].startswith(
        "grpo-sweep: hydra.sweeper.storage='postgresql://u:***@127.0.0.1:1/optuna' cannot be opened"
    )
    assert "secretpw" not in lines[0] and not list((tmp_path / "refused").iterdir())


def run_study(out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "launch.py"), *STUDY_ARGS, *extra, f"output_root={out}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )


def study_trials(study_dir: Path):
    import optuna

    from grpo_sweep.search.optuna.config import read_study_file
    from grpo_sweep.search.optuna.storage import open_storage, study_url

    info = read_study_file(study_dir)
    url = study_url(info["storage"], study_dir)[0]
    return optuna.load_study(study_name=info["study_name"], storage=open_storage(url)).trials


@pytest.mark.slow
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
    assert "flaky reward exploded" in failed.user_attrs["error"]

    pruned = next(t for t in trials if t.state.name == "PRUNED")
    summary = json.loads((study_dir / "trials" / str(pruned.number) / "seed42" / "summary.json").read_text())
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
    trial_cfg = OmegaConf.to_container(
        OmegaConf.load(study_dir / "trials" / str(best.trial) / f"seed{best.seeds[0]}" / ".hydra" / "config.yaml"),
        resolve=True,
    )
    assert reproduced == trial_cfg

    # Resume: same command with a larger budget continues the same study.
    second = run_study(tmp_path, "hydra.sweeper.n_trials=8")
    assert second.returncode == 0, second.stderr[-3000:]
    assert len(study_trials(study_dir)) == 8
    assert [t.number for t in study_trials(study_dir)] == list(range(8))


@pytest.mark.slow
def test_a_study_of_two_process_trials_prunes_them_on_every_rank(tmp_path):
    """Each trial trained as two processes the worker starts: rank 0 reports to the trial, both ranks stop when it
    is pruned."""
    out = run_study(
        tmp_path,
        "distributed=ddp",
        "distributed.nproc_per_node=2",
        "trainer.per_device_train_batch_size=4",
        "trainer.disable_tqdm=true",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    study_dir = tmp_path / "grpo" / "studies" / "test_space"
    states = {t.number: t.state.name for t in study_trials(study_dir)}
    assert {"PRUNED", "COMPLETE"} <= set(states.values()), states
    for number, state in states.items():
        if state == "FAIL":
            continue
        run_dir = study_dir / "trials" / str(number) / "seed42"
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["distributed"]["world_size"] == 2 and summary["trial"]["state"] == state
        rank_1 = "".join(p.read_text() for p in run_dir.glob("ranks/*/attempt_*/1/stderr.log"))
        assert "rank 1 of 2" in rank_1
        if state == "PRUNED":
            # rank 1 stopped at the same step (else rank 0's run would not have ended: it waits for its peer)
            assert summary["steps"] == summary["pruned_at_step"] < 16 and summary["intermediate"]


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["submitit_local", "pool"])
def test_two_workers_in_parallel_with_journal_storage(tmp_path, launcher):
    out = run_study(
        tmp_path, f"hydra/launcher={launcher}", "hydra.sweeper.n_workers=2", "hydra.sweeper.storage=journal"
    )
    assert out.returncode == 0, out.stderr[-3000:]
    study_dir = tmp_path / "grpo" / "studies" / "test_space"
    assert (study_dir / "optuna.journal").exists()
    trials = study_trials(study_dir)
    assert len(trials) == 6
    workers = {json.loads(p.read_text())["trial"]["worker"] for p in study_dir.glob("trials/*/seed*/summary.json")}
    assert workers == {0, 1}


def real_groups() -> dict:
    """The config groups of conf/ with their options, as the sweeper and workers read them."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from grpo_sweep.configstore import register_configs
    from grpo_sweep.search.optuna.worker import config_groups

    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        choices = hydra_compose(config_name="config", return_hydra_config=True).hydra.runtime.choices
        return config_groups(GlobalHydra.instance().config_loader(), choices)


class RecordingTrial(FakeTrial):
    """Picks the first (or last) choice and remembers every parameter name it was asked for."""

    def __init__(self, pick: int):
        self.pick, self.names = pick, []

    def suggest_float(self, name, low, high, log=False):
        self.names.append(name)
        return super().suggest_float(name, low, high, log)

    def suggest_categorical(self, name, choices):
        self.names.append(name)
        return choices[self.pick]


DESIGN = {
    "reward_mix": {"type": "categorical", "choices": ["correct", "smoke", "format_correct"]},
    "trainer.args.scale_rewards": {"type": "categorical", "choices": ["group", "batch", "none"]},
    "trainer.args.multi_objective_aggregation": {
        "type": "categorical",
        "choices": ["sum_then_normalize", "normalize_then_sum"],
    },
}


def test_mix_is_a_group_override_and_its_weights_a_conditional_simplex():
    cfg = compose()
    space = SearchSpace.from_config(DESIGN, {"rewards": None}, cfg, groups=real_groups(), compose=lambda o: compose(o))
    assert space.groups == ("reward_mix",)
    assert space.simplex_by_mix == {
        "correct": [],
        "smoke": ["xmlcount", "correct"],
        "format_correct": ["format", "correct"],
    }

    trial = RecordingTrial(pick=-1)
    overrides = space.as_overrides(space.suggest(trial, cfg))
    # only the chosen mix's weights exist, under names no other mix shares
    assert [n for n in trial.names if n.startswith("simplex.")] == ["simplex.format_correct.format"]
    assert overrides[0] == "reward_mix=format_correct"
    assert "++trainer.args.scale_rewards=none" in overrides
    trial_cfg = compose(overrides)
    assert list(trial_cfg.reward_mix) == ["format", "correct"]
    assert trial_cfg.reward_mix.format.weight + trial_cfg.reward_mix.correct.weight == pytest.approx(1.0, abs=1e-5)
    assert trial_cfg.trainer.args == {"scale_rewards": "none", "multi_objective_aggregation": "normalize_then_sum"}

    # a one-reward mix: no weight parameter at all (its weight would only rescale the advantages)
    trial = RecordingTrial(pick=0)
    overrides = space.as_overrides(space.suggest(trial, cfg))
    assert not [n for n in trial.names if n.startswith("simplex.")]
    assert list(compose(overrides).reward_mix) == ["correct"]


def test_any_group_is_searched_by_override():
    cfg = compose()
    space = SearchSpace.from_config(
        {"lora": {"type": "categorical", "choices": ["default", "none"]}}, None, cfg, groups=real_groups()
    )
    overrides = space.as_overrides(space.suggest(FakeTrial(), cfg))
    assert overrides == ["lora=none"]
    assert compose(overrides).lora.enabled is False


@pytest.mark.parametrize(
    "params, message",
    [
        (
            {"reward_mix": {"type": "categorical", "choices": ["format", "fromat"]}},
            "^hydra.sweeper.params.reward_mix: 'fromat' is not an option of config group reward_mix \\(correct, "
            "format,",
        ),
        ({"lora": {"type": "float", "low": 0, "high": 1}}, "config group takes type categorical"),
        ({"trainer.args.scale_rewards.x": {"type": "categorical", "choices": [1]}}, "not a config key"),
        ({"trainer.argz": {"type": "categorical", "choices": [1]}}, "not a config key"),
    ],
)
def test_bad_group_choices_fail_in_one_line(params, message):
    with pytest.raises(SearchSpaceError, match=message) as info:
        SearchSpace.from_config(params, None, compose(), groups=real_groups(), compose=lambda o: compose(o))
    assert "\n" not in str(info.value)


DESIGN_ARGS = [
    "-m",
    "hparams_search=reward_design",
    "hydra.sweeper.n_trials=4",
    "hydra.sweeper.seeds_per_trial=2",
    "trainer.max_steps=4",
    "data.max_val_samples=8",
    "data.max_test_samples=8",
    "data.arithmetic.n_train=64",
    "data.arithmetic.n_val=8",
    "data.arithmetic.n_test=8",
    "trainer.eval.max_new_tokens=16",
    "model.tiny.warm_start.steps=0",
]


@pytest.mark.slow
def test_reward_design_study_never_fails_on_its_space_and_best_reproduces(tmp_path):
    from grpo_sweep.search.optuna.config import read_study_file
    from grpo_sweep.search.optuna.report import reproduce_command

    out = subprocess.run(
        [sys.executable, str(ROOT / "launch.py"), *DESIGN_ARGS, f"output_root={tmp_path}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    study_dir = tmp_path / "grpo" / "studies" / "reward_design"
    trials = study_trials(study_dir)
    assert len(trials) == 4
    assert {t.state.name for t in trials} <= {"COMPLETE", "PRUNED"}, [(t.state.name, t.user_attrs) for t in trials]
    assert len({t.params["reward_mix"] for t in trials}) >= 2
    # (seeded) a completed trial searched a two-reward mix's weights, so the weights' reproduction is checked
    assert any(t.state.name == "COMPLETE" and any(p.startswith("simplex.") for p in t.params) for t in trials)
    for t in trials:  # conditional: weight parameters of the chosen mix only
        mix = t.params["reward_mix"]
        assert all(p.startswith(f"simplex.{mix}.") for p in t.params if p.startswith("simplex."))

    # Every trial (best.yaml's one included) is reproduced by composing its command: the mix as a group
    # override, its weights, and TRL's aggregation knobs.
    info = read_study_file(study_dir)
    best = OmegaConf.load(study_dir / "best.yaml")
    assert best.overrides[0] == f"reward_mix={best.params.reward_mix}"
    # two seeds per trial; the best configuration's test accuracy beside its validation value, with an interval
    assert all(len(t.user_attrs["seeds"]) == 2 for t in trials if t.state.name == "COMPLETE")
    assert len(best.seeds) >= 2 and best.validation.metric == "val_accuracy"
    test = best.test.test_accuracy
    assert 0 <= test.low <= test.mean <= test.high <= 1 and "bootstrap" in test.method
    assert best.configurations_tried == len({tuple(sorted(t.params.items())) for t in trials})
    assert best.command == reproduce_command(
        info, next(t for t in trials if t.number == best.trial), [f"trainer.seed={best.seeds[0]}"]
    )
    for t in trials:
        if t.state.name != "COMPLETE":
            continue
        seed = t.user_attrs["seeds"][0]
        reproduced = OmegaConf.to_container(
            compose(reproduce_command(info, t, [f"trainer.seed={seed}"]).split()[2:]), resolve=True
        )
        saved = OmegaConf.load(study_dir / "trials" / str(t.number) / f"seed{seed}" / ".hydra" / "config.yaml")
        assert reproduced == OmegaConf.to_container(saved, resolve=True)
        assert reproduced["trainer"]["args"]["scale_rewards"] == t.params["trainer.args.scale_rewards"]
        weights = [term["weight"] for term in reproduced["reward_mix"].values()]
        if len(weights) > 1:
            assert sum(weights) == pytest.approx(1.0, abs=1e-5)

    # A mix that cannot train is refused before any trial runs, in one line.
    refused = subprocess.run(
        [
            sys.executable,
            str(ROOT / "launch.py"),
            *DESIGN_ARGS,
            "hydra.sweeper.params.reward_mix.choices=[format,none]",
            "hydra.sweeper.study_name=refused",
            f"output_root={tmp_path}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert refused.returncode != 0
    assert "hydra.sweeper.params: reward_mix=none is refused: reward_mix is empty" in refused.stderr
    assert not (tmp_path / "grpo" / "studies" / "refused" / "trials").exists()


# --- replicated trials, on fake runs: the worker's Objective with a stand-in for run.train.train ---------------------


def fake_train(value_of):
    """A stand-in for run.train.train: writes a run's summary.json and test outcomes without training. Its validation
    value is ``value_of(learning_rate, seed)`` at every step; a monitor is driven through its trainer callback."""
    from types import SimpleNamespace

    from grpo_sweep.run.record import RunSummary, Scores
    from grpo_sweep.run.results import question_key, write_outcomes, write_summary

    def train(cfg, context, monitor=None, open_tracker=None):
        seed, lr = cfg.trainer.seed, cfg.optimizer.learning_rate
        value = value_of(lr, seed)
        summary = {
            "status": "completed",
            "optimized_metric": cfg.optimized_metric,
            "steps": 8,
            "overrides": list(context.overrides),
            "run_dir": str(context.run_dir),
        }
        if monitor is not None:
            callback = monitor.callback(lambda model: Scores(value))
            for step in range(1, 9):
                control = SimpleNamespace(should_training_stop=False)
                callback.on_step_end(None, SimpleNamespace(global_step=step, max_steps=8), control)
                if control.should_training_stop:
                    summary.update(status="pruned", steps=step, **monitor.record())
                    return RunSummary.from_dict(write_summary(context.run_dir, summary))
            summary.update(monitor.record())
        # 8 test questions, the first round(8 * (value - 0.1)) right
        right = round(8 * (value - 0.1))
        write_outcomes(
            context.run_dir, "test", [{"key": question_key(f"q{i}"), "accuracy": float(i < right)} for i in range(8)]
        )
        summary.update(val_accuracy=value, objective=value, test_accuracy=right / 8, test_samples=8)
        return RunSummary.from_dict(write_summary(context.run_dir, summary))

    return train


def fake_study(tmp_path, params, value_of, seeds_per_trial=2, pruner=None, sampler=None):
    """A study in tmp_path (SQLite, study.json as the sweeper writes it) and the worker's Objective on fake runs."""
    import optuna

    from grpo_sweep.search.optuna.config import write_study_file
    from grpo_sweep.search.optuna.storage import open_storage, resolve_url
    from grpo_sweep.search.optuna.worker import Objective

    cfg = compose(["model.tiny.warm_start.steps=0"])
    space = SearchSpace.from_config(params, None, cfg)
    settings = OmegaConf.create(
        {
            "seeds_per_trial": seeds_per_trial,
            "seed_key": "trainer.seed",
            "pruner": {"name": "median" if pruner else "none"},
            "prune_every": 2,
            "prune_eval_samples": 4,
            "_worker_index": 0,
        }
    )
    url = resolve_url(None, tmp_path)
    study = optuna.create_study(
        study_name="fake",
        storage=open_storage(url),
        direction="maximize",
        sampler=sampler or optuna.samplers.RandomSampler(seed=0),
        pruner=pruner or optuna.pruners.NopPruner(),
    )
    declare_sweeper(tmp_path, "optuna")
    write_study_file(
        tmp_path,
        {
            "study_name": "fake",
            "storage": url,
            "objectives": ["val_accuracy"],
            "directions": ["maximize"],
            "n_trials": 4,
            "seeds_per_trial": seeds_per_trial,
            "seed_key": "trainer.seed",
            "reproduce_overrides": ["model.tiny.warm_start.steps=0"],
        },
    )
    objective = Objective(
        cfg,
        space,
        tmp_path,
        ["model.tiny.warm_start.steps=0"],
        ["val_accuracy"],
        settings,
        train_fn=fake_train(value_of),
    )
    return study, objective


def test_a_repeated_configuration_gets_new_seeds_and_the_mean_over_all_of_them(tmp_path):
    from grpo_sweep.reading.results import SweepResults
    from grpo_sweep.search.optuna.report import study_report

    # one point: every trial the sampler draws repeats it
    study, objective = fake_study(
        tmp_path, {"optimizer.learning_rate": {"type": "categorical", "choices": [1e-3]}}, lambda lr, seed: seed / 100
    )
    study.optimize(objective, n_trials=3, catch=())
    trials = study.trials
    assert [t.user_attrs["seeds"] for t in trials] == [[42, 43], [44, 45], [46, 47]]
    # the value Optuna was told: the mean over every seed of the configuration so far
    assert [t.value for t in trials] == pytest.approx([0.425, 0.435, 0.445])
    assert trials[2].user_attrs["repeat_of"] == 0
    for t in trials:
        for seed in t.user_attrs["seeds"]:
            run = tmp_path / "trials" / str(t.number) / f"seed{seed}"
            assert json.loads((run / "summary.json").read_text())["trial"]["seed"] == seed
            assert f"trainer.seed={seed}" in OmegaConf.load(run / ".hydra" / "overrides.yaml")
    # the sweep's readers see six runs that differ only in their seed: replicates of one configuration
    runs = SweepResults.read(tmp_path).runs
    assert len(runs) == 6
    assert len({" ".join(o for o in r.summary.overrides if not o.startswith("trainer.seed=")) for r in runs}) == 1

    text = study_report(tmp_path, plots=False)
    assert "3 trials (3 complete), 1 configurations, 2 seed(s) per trial" in text
    best = OmegaConf.load(tmp_path / "best.yaml")
    assert best.seeds == [42, 43, 44, 45, 46, 47] and best.trials == [0, 1, 2] and best.trial == 2
    assert best["values"][0] == pytest.approx(0.445)
    assert best.configurations_tried == 1
    # test accuracy beside validation, with a bootstrap interval over seeds x questions
    test = best.test.test_accuracy
    expected = sum(round(8 * (s / 100 - 0.1)) / 8 for s in range(42, 48)) / 6
    assert test.mean == pytest.approx(expected)
    assert test.low < test.mean < test.high and test.questions == 8 and test.seeds == 6
    assert "bootstrap over 6 seed(s) x 8 questions" in test.method
    assert best.command.endswith("optimizer.learning_rate=0.001 trainer.seed=42")
    assert best.command_all_seeds.endswith("trainer.seed=42,43,44,45,46,47")
    assert compose(best.command.split()[2:]).trainer.seed == 42


def test_replicated_trials_prune_on_their_first_replica(tmp_path):
    import optuna

    good, bad = 1e-3, 1e-2
    study, objective = fake_study(
        tmp_path,
        {"optimizer.learning_rate": {"type": "categorical", "choices": [good, bad]}},
        lambda lr, seed: (0.6 if lr == good else 0.2) + (seed - 42) / 100,
        pruner=optuna.pruners.MedianPruner(n_startup_trials=1, n_warmup_steps=0),
    )
    for lr in (good, bad, bad, good):
        study.enqueue_trial({"optimizer.learning_rate": lr})
    study.optimize(objective, n_trials=4, catch=())
    states = [t.state.name for t in study.trials]
    assert states == ["COMPLETE", "PRUNED", "PRUNED", "COMPLETE"]
    trials_dir = tmp_path / "trials"
    # the first replica reported every prune_every steps; the second ran without probes
    first = json.loads((trials_dir / "0" / "seed42" / "summary.json").read_text())
    assert sorted(first["intermediate"]) == ["2", "4", "6"]
    assert "intermediate" not in json.loads((trials_dir / "0" / "seed43" / "summary.json").read_text())
    # the bad configuration stopped on its first replica at the first report; its second seed never started
    pruned = json.loads((trials_dir / "1" / "seed42" / "summary.json").read_text())
    assert pruned["status"] == "pruned" and pruned["pruned_at_step"] == 2
    assert not (trials_dir / "1" / "seed43").exists()
    # a repeat of a pruned configuration is pruned at once, without training
    assert not (trials_dir / "2").exists()
    # a repeat of a completed configuration adds seeds 44, 45, unpruned, and is told the mean over 4 seeds
    assert study.trials[3].user_attrs["seeds"] == [44, 45]
    assert study.trials[3].value == pytest.approx(0.6 + (0 + 1 + 2 + 3) / 400)


def test_best_configuration_is_the_best_mean_over_all_its_seeds_not_a_lucky_trial(tmp_path):
    from grpo_sweep.search.optuna.report import study_report

    a, b = 1e-3, 1e-2
    # a: 0.70 on its first two seeds, then 0.40, 0.40 (mean 0.55); b: 0.60 on every seed
    values = {a: {42: 0.7, 43: 0.7, 44: 0.4, 45: 0.4}, b: {42: 0.6, 43: 0.6}}
    study, objective = fake_study(
        tmp_path,
        {"optimizer.learning_rate": {"type": "categorical", "choices": [a, b]}},
        lambda lr, seed: values[lr][seed],
    )
    for lr in (a, b, a):
        study.enqueue_trial({"optimizer.learning_rate": lr})
    study.optimize(objective, n_trials=3, catch=())
    assert study.best_trial.number == 0  # Optuna's best: trial 0, two lucky seeds
    text = study_report(tmp_path, plots=False)
    best = OmegaConf.load(tmp_path / "best.yaml")
    assert best.trial == 1 and best.seeds == [42, 43] and best["values"][0] == pytest.approx(0.6)
    assert best.configurations_tried == best.configurations_compared == 2
    assert "Best of 2 configurations (2 tried): configuration 1" in text
    assert "is optimistic" in text


def test_test_interval_counts_question_noise_when_seeds_agree():
    from grpo_sweep.search.optuna.report import test_interval

    # two seeds, 20 of 64 right each, the same questions: zero seed spread, yet a real interval
    outcomes = [{f"q{i}": float(i < 20) for i in range(64)}] * 2
    estimate = test_interval([20 / 64, 20 / 64], outcomes, 64)
    assert estimate["mean"] == pytest.approx(20 / 64)
    assert estimate["high"] - estimate["low"] > 0.15  # about +-0.11 for a proportion of 64 questions
    # every question wrong on every seed: the bootstrap has no spread, the interval still has width (Wilson's, 8
    # questions)
    estimate = test_interval([0.0], [{f"q{i}": 0.0 for i in range(8)}], 8)
    assert estimate["low"] == 0.0 and 0.3 < estimate["high"] < 0.4
    # questions judged None (no ground truth) are left out; a question only some seeds judged too
    outcomes = [{"a": 1.0, "b": None, "c": 0.0}, {"a": 1.0, "b": 1.0, "c": 0.0}]
    assert test_interval([0.5, 0.5], outcomes, 3)["questions"] == 2
    # without outcomes: seed variance plus the binomial variance of the questions, clipped to [0, 1]
    estimate = test_interval([0.5, 0.6, 0.55], None, 64)
    assert estimate["low"] < 0.55 < estimate["high"] and "normal approximation" in estimate["method"]
    assert test_interval([0.99], None, 8)["high"] == 1.0
    assert test_interval([0.7], None, None)["low"] is None


def test_test_interval_covers_the_true_accuracy():
    """Coverage by simulation: questions of varying difficulty drawn from a population with mean 0.6, three seeds
    answering them with seed-level shifts; the 95 % bootstrap interval should hold the truth about 95 % of the time."""
    import numpy as np

    from grpo_sweep.search.optuna.report import test_interval

    rng = np.random.default_rng(1)
    hits, reps = 0, 300
    for rep in range(reps):
        difficulty = rng.beta(3, 2, size=64)  # mean 0.6 over the question population
        shifts = rng.normal(0, 0.03, size=3)
        outcomes = [
            {str(q): float(rng.random() < min(1, max(0, p + s))) for q, p in enumerate(difficulty)} for s in shifts
        ]
        estimate = test_interval([], outcomes, 64, rng_seed=rep)
        hits += estimate["low"] <= 0.6 <= estimate["high"]
    assert 0.88 <= hits / reps <= 0.99, hits / reps


@pytest.mark.parametrize(
    "setting, message",
    [
        ({"seeds_per_trial": 0}, "hydra.sweeper.seeds_per_trial=0; use a whole number >= 1"),
        (
            {"seed_key": "trainer.max_steps"},
            "hydra.sweeper.seed_key='trainer.max_steps': its last dotted part must be `seed`",
        ),
    ],
)
def test_bad_replica_settings_fail_in_one_line(setting, message):
    from grpo_sweep.search.optuna.config import GRPOOptunaSweeperConf, check_replicas

    with pytest.raises(ValueError, match=message.replace("(", "\\(").replace(")", "\\)")):
        check_replicas(OmegaConf.merge(OmegaConf.structured(GRPOOptunaSweeperConf), setting))


def test_an_objective_on_the_test_split_is_refused():
    from grpo_sweep.search.optuna.config import GRPOOptunaSweeperConf, objectives_and_directions

    sweeper = OmegaConf.structured(GRPOOptunaSweeperConf)
    assert objectives_and_directions(sweeper, "val_accuracy") == (["val_accuracy"], ["maximize"])
    with pytest.raises(ValueError, match="objective 'test_accuracy' reads the test split"):
        objectives_and_directions(sweeper, "test_accuracy")


# the refusals below come after the sweeper has composed every choice of the space: one mix (of two rewards, so that
# the weights' simplex is still searched) instead of four halves their time
REFUSED_ARGS = [*DESIGN_ARGS, "hydra.sweeper.params.reward_mix.choices=[smoke]"]


@pytest.mark.parametrize(
    "extra, message",
    [
        (
            ["hydra.sweeper.sampler.name=bogus"],
            "hydra.sweeper.sampler.name='bogus'; use one of: tpe, random, grid, cmaes",
        ),
        (
            ["hydra.sweeper.pruner.name=sometimes"],
            "hydra.sweeper.pruner.name='sometimes'; use one of: median, hyperband, none",
        ),
        (
            ["hydra.sweeper.sampler.name=grid"],
            "hydra.sweeper.sampler.name=grid cannot search reward weights on the simplex",
        ),
    ],
)
def test_bad_sampler_or_pruner_is_refused_before_any_worker(tmp_path, extra, message):
    refused = subprocess.run(
        [
            sys.executable,
            str(ROOT / "launch.py"),
            *REFUSED_ARGS,
            *extra,
            "hydra.sweeper.study_name=refused",
            f"output_root={tmp_path}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert refused.returncode == 1
    last = refused.stderr.strip().splitlines()[-1]
    assert last.startswith("grpo-sweep: ") and message in last and last.endswith("no worker was started"), (
        refused.stderr[-2000:]
    )
    assert not list(tmp_path.rglob("trials"))


def test_a_study_made_for_the_other_direction_is_refused_in_one_line(tmp_path):
    import optuna

    storage = f"sqlite:///{tmp_path / 'study.db'}"
    optuna.create_study(study_name="old", storage=storage, direction="minimize")
    refused = subprocess.run(
        [
            sys.executable,
            str(ROOT / "launch.py"),
            *REFUSED_ARGS,
            "hydra.sweeper.study_name=old",
            f"hydra.sweeper.storage={storage}",
            f"output_root={tmp_path}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines()[-1] == (
        f"grpo-sweep: hydra.sweeper.direction=maximize: study 'old' in {storage} was made to minimize; keep its "
        "direction or give another hydra.sweeper.study_name; no worker was started"
    )
    assert not list(tmp_path.rglob("trials"))


def test_a_searched_key_the_command_line_adds_is_added_by_the_trial_and_the_best_command_too():
    """A space over a key the study's config or command line adds (``+reward_mix.flaky.params.fail=false``): the
    trial's value for it must add it too, else Hydra refuses the override (`Could not override`)."""
    from grpo_sweep.search.base import merge_overrides

    base = ["+reward_mix.flaky.fn=tests.failing_rewards.flaky", "+reward_mix.flaky.params.fail=false", "lora.r=8"]
    merged = merge_overrides(base, ["reward_mix.flaky.params.fail=true", "lora.r=16"])
    assert merged == [
        "+reward_mix.flaky.fn=tests.failing_rewards.flaky",
        "+reward_mix.flaky.params.fail=true",
        "lora.r=16",
    ]
    compose(merged)  # composes: the term is there, with the trial's value
