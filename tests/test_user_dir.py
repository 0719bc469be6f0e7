"""A researcher's own directory, outside the checkout: their reward mixes and search space (found through
`hydra.searchpath` or `--config-dir`), their reward module (imported from the launch directory), their jsonl. Every
launch here starts from that directory, with only the documented settings (README, "Where a new reward goes")."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

MODULE = '''
import re


def plainint(completions, **kwargs):
    """1 for a completion that holds a whole number: the user's own term."""
    texts = [c[0]["content"] if isinstance(c, list) else c for c in completions]
    return [1.0 if re.search(r"-?[0-9]+", t) else 0.0 for t in texts]
'''
# both user mixes hold the user's term (plainint) and a built-in
MIXES = {
    "fmt_int": "xmlcount: {weight: 0.5}\nplainint: {fn: myrewards.plainint, weight: 1.0}\n",
    "int_correct": "correct: {weight: 1.0}\nplainint: {fn: myrewards.plainint, weight: 0.5}\n",
}
SEARCH = """# @package _global_
defaults:
  - /hparams_search/common/study_dir
  - override /hydra/sweeper: grpo_optuna
optimized_metric: val_rewards.plainint
hydra:
  sweeper:
    study_name: mine
    n_trials: 2
    sampler: {name: grid}
    params:
      reward_mix: {type: categorical, choices: [fmt_int, int_correct]}
"""
# seconds-long runs of the random tiny model on the user's data (conftest.FAST, for data=file)
FAST = [
    "model.tiny.warm_start.steps=0",
    "trainer.max_steps=2",
    "trainer.save_steps=2",
    "trainer.num_generations=4",
    "trainer.per_device_train_batch_size=8",
    "trainer.max_completion_length=16",
    "trainer.eval.max_new_tokens=16",
    "data.max_val_samples=8",
    "data.max_test_samples=8",
]


@pytest.fixture
def user_dir(tmp_path) -> Path:
    """The user's directory: conf/reward_mix/*.yaml, conf/hparams_search/mine.yaml, myrewards.py, data.jsonl."""
    home = tmp_path / "me"
    for mix, text in MIXES.items():
        (home / "conf" / "reward_mix").mkdir(parents=True, exist_ok=True)
        (home / "conf" / "reward_mix" / f"{mix}.yaml").write_text(text)
    (home / "conf" / "hparams_search").mkdir()
    (home / "conf" / "hparams_search" / "mine.yaml").write_text(SEARCH)
    (home / "myrewards.py").write_text(MODULE)
    rows = [{"problem": f"What is {a} + {b}?", "answer": str(a + b)} for a in range(1, 10) for b in range(1, 10)]
    (home / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return home


def data(home: Path) -> list[str]:
    return [
        "data=file",
        f"data.path={home / 'data.jsonl'}",
        "data.prompt_column=problem",
        "data.ground_truth_column=answer",
    ]


def searchpath(home: Path) -> str:
    return f"hydra.searchpath=[file://{home / 'conf'}]"


def launch(args: list[str], cwd: Path, out: Path, pythonpath: list[Path] = (), timeout: int = 600):
    """`python <checkout>/launch.py ARGS` started in ``cwd``. PYTHONPATH holds the checkout (where the tests' own
    code comes from) and ``pythonpath``, not the user's directory unless given: their module must be found from
    the launch directory."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, [ROOT, *pythonpath]))}
    return subprocess.run(
        [sys.executable, str(ROOT / "launch.py"), *args, f"output_root={out}"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def user_term_scored(summary_file: Path) -> float:
    summary = json.loads(summary_file.read_text())
    assert summary["status"] == "completed", summary
    return summary["train_rewards"]["plainint"]


@pytest.mark.parametrize("where", ["searchpath", "config_dir"])
def test_a_study_over_the_users_own_mixes_passes_the_gate_from_their_directory(user_dir, tmp_path, where):
    """The sweeper composes the space's every mix (and each worker a trial's) with the user's directory searched;
    its gate imports their module from the launch directory. A dry run: the plan, nothing trains."""
    given = [searchpath(user_dir)] if where == "searchpath" else ["--config-dir", "conf"]
    out = launch(
        [
            "-m",
            *given,
            "hparams_search=mine",
            *data(user_dir),
            "hydra/launcher=submitit_local",
            "hydra.launcher.dry_run=true",
        ],
        user_dir,
        tmp_path / "out",
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "dry run (local): 1 job(s)" in out.stdout
    # the best configuration's command names the user's directory: it composes as printed, from there (a dry run
    # writes nothing: it prints the command's start)
    assert not (tmp_path / "out" / "grpo" / "studies" / "mine" / "study.json").exists()
    line = next(x for x in out.stdout.splitlines() if "replays as a plain run: python launch.py " in x)
    reproduce = shlex.split(line.split("python launch.py ", 1)[1].removesuffix(" <the trial's overrides>"))
    if where == "searchpath":
        assert reproduce[0] == searchpath(user_dir)
    again = [] if where == "searchpath" else given  # a --config-dir is the command's own flag: given again
    shown = launch(["--cfg", "job", *again, *reproduce, "reward_mix=int_correct"], user_dir, tmp_path)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "fn: myrewards.plainint" in shown.stdout


def test_a_grid_of_the_users_own_mixes_passes_the_gate_from_their_directory(user_dir, tmp_path):
    """The grid's gate (grpo_basic's plan of every run, the same whichever launcher runs them: local, pool,
    submitit_local, slurm) finds the user's mixes and imports their module; submitit_local's dry run then shows both
    jobs, and nothing trains."""
    out = launch(
        [
            "-m",
            "--config-dir",
            "conf",
            "reward_mix=fmt_int,int_correct",
            *data(user_dir),
            "hydra/launcher=submitit_local",
            "hydra.launcher.dry_run=true",
        ],
        user_dir,
        tmp_path,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "dry run (local): 2 job(s)" in out.stdout
    assert "job 1 (reward_mix=int_correct" in out.stdout


def test_a_reward_module_not_found_from_the_launch_directory_is_one_line_saying_where_it_was_looked_for(
    user_dir, tmp_path
):
    """Launched from another directory, the user's module is not found: the gate says from where it was looked for
    and how to fix it, and nothing runs; PYTHONPATH is the other documented way."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    args = ["-m", "--config-dir", str(user_dir / "conf"), "reward_mix=fmt_int", *data(user_dir)]
    out = launch([*args, "hydra/launcher=pool"], elsewhere, tmp_path / "out")
    assert out.returncode == 1
    line = out.stderr.strip().splitlines()[-1]
    assert line.startswith("grpo-sweep: job 0 (reward_mix=fmt_int "), line
    assert line.endswith(
        "): reward 'myrewards.plainint': cannot import module 'myrewards' from the launch directory "
        f"{elsewhere} or PYTHONPATH; run from the directory that holds it, or add that directory to PYTHONPATH; "
        "no run was started"
    ), line
    assert not (tmp_path / "out").exists()
    out = launch(
        [*args, "hydra/launcher=submitit_local", "hydra.launcher.dry_run=true"],
        elsewhere,
        tmp_path / "out",
        pythonpath=[user_dir],
    )
    assert out.returncode == 0, out.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("how", ["pool", "study", "submitit_local"])
def test_every_launcher_trains_the_users_own_mix_with_their_module(user_dir, tmp_path, how):
    """From the user's directory: a grid on the pool (2 runs), a 2-trial study (resumed by the same command with a
    third trial), a submitit_local job; every run scores the user's own term."""
    out_dir = tmp_path / "out"
    fast = [*data(user_dir), *FAST]
    if how == "pool":
        out = launch(
            [
                "-m",
                searchpath(user_dir),
                "hydra/launcher=pool",
                "hydra.launcher.n_jobs=2",
                "reward_mix=fmt_int,int_correct",
                *fast,
            ],
            user_dir,
            out_dir,
        )
        summaries = sorted(out_dir.glob("grpo/multiruns/*/*/summary.json"))
        assert len(summaries) == 2, out.stderr[-3000:]
    elif how == "study":
        args = ["-m", searchpath(user_dir), "hparams_search=mine", *fast]
        out = launch(args, user_dir, out_dir)
        assert out.returncode == 0, out.stderr[-3000:]
        assert len(list(out_dir.glob("grpo/studies/mine/trials/*/*/summary.json"))) == 2
        out = launch([*args, "hydra.sweeper.n_trials=3"], user_dir, out_dir)  # the same study, resumed
        summaries = sorted(out_dir.glob("grpo/studies/mine/trials/*/*/summary.json"))
        assert len(summaries) == 3, out.stderr[-3000:]
    else:
        out = launch(
            ["-m", "--config-dir", "conf", "hydra/launcher=submitit_local", "reward_mix=fmt_int", *fast],
            user_dir,
            out_dir,
        )
        summaries = sorted(out_dir.glob("grpo/multiruns/*/*/summary.json"))
        assert len(summaries) == 1, out.stderr[-3000:]
    assert out.returncode == 0, out.stderr[-3000:]
    for summary in summaries:
        assert isinstance(user_term_scored(summary), float)
