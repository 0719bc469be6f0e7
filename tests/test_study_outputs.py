"""A study's outputs: best.yaml's command composes (and trains as printed) for spaces whose terms exist only with
`+`/`++` or come from an hparams_search file's mix; the importances speak of the reward weights, every term."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

import pytest

from .conftest import ROOT, compose


def test_a_base_term_set_with_plus_plus_keeps_its_prefix_in_the_trial_value():
    from grpo_sweep.search.base import merge_overrides

    base = ["++reward_mix.plainint.fn=tests.failing_rewards.flaky", "++reward_mix.plainint.weight=0.5"]
    merged = merge_overrides(base, ["reward_mix.plainint.weight=0.2", "reward_mix.correct.weight=0.8"])
    assert merged == [
        "++reward_mix.plainint.fn=tests.failing_rewards.flaky",
        "++reward_mix.plainint.weight=0.2",
        "reward_mix.correct.weight=0.8",
    ]
    assert compose(merged).reward_mix.plainint.weight == 0.2  # old code: Could not override


def _study(params, weights, overrides):
    """An in-memory study whose trials were drawn on the simplex (params) and trained with ``overrides``."""
    import optuna
    from optuna.distributions import FloatDistribution

    study = optuna.create_study(direction="maximize")
    for u, w in zip(params, weights):
        study.add_trial(
            optuna.trial.create_trial(
                params={"simplex.xmlcount": u[0], "simplex.correct": u[1]},
                distributions={"simplex.xmlcount": FloatDistribution(0, 1), "simplex.correct": FloatDistribution(0, 1)},
                value=w[2],
                user_attrs={"overrides": overrides(w)},
            )
        )
    return study


def test_importances_rank_every_reward_weight_not_the_simplex_coordinates():
    import warnings

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from grpo_sweep.search.optuna.report import study_plots, weights_study
    from grpo_sweep.search.optuna.space import stick_breaking

    coords = [(0.1, 0.2), (0.5, 0.9), (0.9, 0.4), (0.3, 0.7), (0.7, 0.1), (0.2, 0.5)]
    weights = [stick_breaking(list(u)) for u in coords]
    names = ["xmlcount", "correct", "plainint"]
    study = _study(coords, weights, lambda w: [f"reward_mix.{n}.weight={round(x, 6)}" for n, x in zip(names, w)])
    copy = weights_study(study)
    assert [t.value for t in copy.trials] == [t.value for t in study.trials]
    assert set(copy.trials[0].params) == {f"reward_mix.{n}.weight" for n in names}
    jobs = dict(study_plots(study, ["val_rewards.xmlcount"], multi=False))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ax = jobs["param_importances.png"]()
    ranked = {label.get_text() for label in ax.get_yticklabels()}
    assert ranked == {"reward_mix.xmlcount.weight", "reward_mix.correct.weight", "reward_mix.plainint.weight"}
    assert "val_rewards.xmlcount" in [t.get_text() for t in ax.get_legend().get_texts()]
    plt.close(ax.figure)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ax = jobs["optimization_history.png"]()
    assert ax.get_ylabel() == "val_rewards.xmlcount"
    plt.close(ax.figure)


def _study_file(out, *args):
    done = subprocess.run(
        [sys.executable, str(ROOT / "launch.py"), *args, f"output_root={out}"],
        cwd=out,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_the_mix_an_hparams_search_file_picks_is_a_group_override_in_the_reproduce_command(tmp_path):
    """An hparams_search file that picks another mix (`override /reward_mix: format_correct`) and adds a term: the
    single run gets the mix as a group override (before: `+reward_mix.format.weight` on top of the default mix,
    whose xmlcount stayed), so a trial's own choice of the mix replaces it."""
    conf = tmp_path / "conf" / "hparams_search"
    conf.mkdir(parents=True)
    (conf / "mixed.yaml").write_text(
        "# @package _global_\ndefaults:\n  - /hparams_search/common/study_dir\n"
        "  - override /hydra/sweeper: grpo_optuna\n"
        "  - override /reward_mix: format_correct\nreward_mix:\n"
        "  plainint: {fn: tests.failing_rewards.flaky, weight: 1.0}\n"
        "hydra:\n  sweeper:\n    study_name: mixed\n    n_trials: 1\n    reward_weights: {rewards: null}\n"
    )
    from .test_search import study_with_its_budget_spent

    study_with_its_budget_spent(f"sqlite:///{tmp_path / 'grpo' / 'studies' / 'mixed' / 'optuna.db'}", "mixed")
    _study_file(tmp_path, "-m", "--config-dir", str(tmp_path / "conf"), "hparams_search=mixed")
    info = json.loads((tmp_path / "grpo" / "studies" / "mixed" / "study.json").read_text())
    base = info["reproduce_overrides"]
    assert "reward_mix=format_correct" in base
    # the report's per-parameter plots draw these on a continuous axis
    assert info["scales"] == {f"reward_mix.{t}.weight": "linear" for t in ("format", "correct", "plainint")}
    from grpo_sweep.search.base import merge_overrides

    trial = ["reward_mix.format.weight=0.2", "reward_mix.correct.weight=0.3", "reward_mix.plainint.weight=0.5"]
    cfg = compose(merge_overrides(base, trial))
    assert dict((k, v.weight) for k, v in cfg.reward_mix.items()) == {"format": 0.2, "correct": 0.3, "plainint": 0.5}
    cfg = compose(merge_overrides(base, ["reward_mix=smoke", "reward_mix.xmlcount.weight=0.5"]))
    assert list(cfg.reward_mix) == ["xmlcount", "correct", "plainint"]


@pytest.mark.slow
def test_best_command_of_a_study_with_a_new_term_trains_as_printed(tmp_path):
    """A study whose mix gets a term on the command line (`++reward_mix.plainint.*`), its weight searched on the
    simplex with the others: best.yaml's command, run through a shell as printed, trains the trial's config."""
    from omegaconf import OmegaConf

    small = [
        "trainer.max_steps=1",
        "data.max_val_samples=4",
        "data.max_test_samples=4",
        "data.arithmetic.n_train=32",
        "data.arithmetic.n_val=4",
        "data.arithmetic.n_test=4",
        "trainer.eval.max_new_tokens=8",
        "trainer.max_completion_length=8",
        "model.tiny.warm_start.steps=0",
    ]
    _study_file(
        tmp_path,
        "-m",
        "hparams_search=reward_weights",
        "++reward_mix.plainint.fn=tests.failing_rewards.flaky",
        "++reward_mix.plainint.weight=0.5",
        "hydra.sweeper.n_trials=2",
        *small,
    )
    study_dir = tmp_path / "grpo" / "studies" / "reward_weights"
    best = OmegaConf.load(study_dir / "best.yaml")
    assert "++reward_mix.plainint.weight=" in best.command
    trial_cfg = OmegaConf.load(
        study_dir / "trials" / str(best.trial) / f"seed{best.seeds[0]}" / ".hydra" / "config.yaml"
    )
    reproduced = compose(shlex.split(best.command)[2:])
    assert OmegaConf.to_container(reproduced.reward_mix) == OmegaConf.to_container(trial_cfg.reward_mix)
    ran = subprocess.run(
        ["bash", "-c", best.command.replace("python ", f"{sys.executable} ", 1)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    summaries = [json.loads(p.read_text()) for p in (tmp_path / "grpo").glob("runs/**/summary.json")]
    assert summaries and summaries[-1]["status"] == "completed"
