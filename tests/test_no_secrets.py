"""No API key, token or password in any file a run writes, in its W&B run, or in a refusal: even when a reward
logs or prints one, an error quotes one, or a URL carries one (run/redact.py knows what a secret looks like)."""

from __future__ import annotations

import json
import re

import pytest

from grpo_sweep.run.redact import credential_in, redact

from .conftest import FAST, ROOT, launch_here, run_launch

# Not shaped like any provider's token: masked because the variables' names say they are secrets.
SECRETS = {
    "WANDB_API_KEY": "fake-wandb-key-0123456789abcdef",
    "HF_TOKEN": "hf_FakeToken0123456789",
    "MY_API_KEY": "my-fake-api-key-9876543210fedcba",
}
PASSWORD = "s3cretpw"
JUDGE = ["+reward_mix.judge.factory=grpo_sweep.rewards.judge.llm_judge", "+reward_mix.judge.factory_args.model=m"]


def prints_secrets(completions, **kwargs):
    """A careless reward: prints, warns and logs what it finds in the environment, and scores 0."""
    import logging
    import os
    import sys
    import warnings

    print("using key", os.environ.get("MY_API_KEY"), "and", os.environ.get("WANDB_API_KEY"))
    print("judge at", os.environ.get("JUDGE_URL"), file=sys.stderr)
    warnings.warn(f"key {os.environ.get('MY_API_KEY')} looks old", stacklevel=1)
    logging.getLogger("careless_reward").info(
        "judge %s, key %s", os.environ.get("JUDGE_URL"), os.environ.get("MY_API_KEY")
    )
    return [0.0 for _ in completions]


@pytest.mark.parametrize(
    "text, masked",
    [
        ("POST http://judge:s3cretpw@127.0.0.1:18080/v1/chat", "POST http://judge:***@127.0.0.1:18080/v1/chat"),
        ("postgresql://optuna:p%40ss@db:5432/optuna", "postgresql://optuna:***@db:5432/optuna"),
        ("job 0 (url=http\\://judge\\:s3cretpw@127.0.0.1\\:1/v1)", "job 0 (url=http\\://judge\\:***@127.0.0.1\\:1/v1)"),
        ("key=hf_" + "AbCdEfGhIj" * 4, "key=***"),
        ("Bearer sk-proj-abcdef0123456789ABCDEF", "Bearer ***"),
        ("https://ghp_" + "a1B2" * 9 + "@github.com/o/r", "https://***@github.com/o/r"),
        ("AKIAIOSFODNN7EXAMPLE", "***"),
    ],
)
def test_url_passwords_and_token_shapes_are_masked_with_no_variable_holding_them(text, masked):
    assert redact(text, []) == masked
    assert credential_in(text)


@pytest.mark.parametrize(
    "text",
    [
        "http://judge:8000/v1",
        "git@github.com:org/repo.git",
        "sqlite:////tmp/study.db",
        "hf_hub_enable_hf_transfer",
        "task-specific-reward-function-name",
        "bf93df16423d596b" * 4,
        "0123456789abcdef" * 2 + "01234567",
    ],
)
def test_ordinary_values_are_not_masked(text):
    """A URL's port, a user without a password, sha256s of weights (64 hex), git and Hub revisions (40 hex)."""
    assert redact(text, []) == text and credential_in(text) is None


def test_no_committed_result_or_model_file_changes_under_the_patterns():
    """The project's own measurements, reports and the tiny model's files: real summaries, hashes and ids, none of
    it masked (a pattern that masked them would hide what a run measured)."""
    files = [
        p
        for pattern in (
            "bench/results/*",
            "docs/example_report/*.md",
            "docs/example_report/*.json",
            "grpo_sweep/models/prebuilt/*.json",
            "grpo_sweep/config/*.json",
        )
        for p in ROOT.glob(pattern)
        if p.suffix in (".json", ".md", ".csv", ".txt")
    ]
    assert len(files) > 30
    changed = [p.name for p in files if redact(p.read_text(), []) != p.read_text()]
    assert not changed


def test_what_the_run_process_prints_is_masked(monkeypatch):
    """What a reward prints (to stdout or stderr, as a warning does) reaches the terminal, and under SLURM the job's
    log file: masked there too."""
    import contextlib
    import io
    import sys

    from grpo_sweep.run.redact import install_log_redaction

    monkeypatch.setenv("MY_API_KEY", SECRETS["MY_API_KEY"])
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        install_log_redaction()  # what every run's process does first (app.run_task)
        prints_secrets(["a completion"])
        print(f"judge at http://judge:{PASSWORD}@host/v1", file=sys.stderr)
    assert "using key *** and" in out.getvalue() and "judge at http://judge:***@host/v1" in err.getvalue()
    assert SECRETS["MY_API_KEY"] not in out.getvalue() + err.getvalue() and PASSWORD not in err.getvalue()


def test_a_refused_sweep_does_not_echo_the_credential(tmp_path):
    """A sweep's refusal names the job by its overrides as typed (Hydra-quoted: ``http\\://judge\\:pw@``): the token
    and the password in them are masked."""
    out = launch_here(
        [
            "-m",
            *JUDGE,
            f"+reward_mix.judge.factory_args.base_url=http://judge:{PASSWORD}@127.0.0.1:1/v1",
            "+reward_mix.judge.factory_args.key_env=sk-abcdef1234567890abcdef",
        ],
        tmp_path,
    )
    text = out.stdout + out.stderr
    assert out.returncode == 1 and text.startswith("grpo-sweep: job 0 (") and "key_env=***" in text, text
    assert "sk-abcdef1234567890abcdef" not in text and PASSWORD not in text, text


@pytest.mark.slow
def test_real_runs_write_no_secrets(tmp_path):
    """Two real tiny runs of a sweep, W&B offline, a judge whose URL (with a password) comes from the environment,
    and rewards that log, print, warn and raise quoting the secrets: no file under the output root holds one."""
    from .support.judge_servers import JudgeServer, scored

    # run 0: a reward that logs a token and raises quoting a key; run 1: one that prints, warns and logs them
    leaky = [
        "+reward_mix.leaky.fn=tests.reward_plugins.leaks_secrets,tests.test_no_secrets.prints_secrets",
        "+reward_mix.leaky.weight=0.1",
    ]
    wandb = ["logger=wandb", "logger.mode=offline", "logger.log_completions_steps=2"]
    with JudgeServer(scored(lambda prompt: "Score: 5")) as server:
        url = server.base_url.replace("http://", f"http://judge:{PASSWORD}@")
        judge = [*JUDGE, "+reward_mix.judge.factory_args.base_url=${oc.env:JUDGE_URL}", "+reward_mix.judge.weight=0.1"]
        out = run_launch(
            ["-m", *FAST, *leaky, *judge, *wandb], tmp_path, env={**SECRETS, "JUDGE_URL": url, "WANDB_SILENT": "true"}
        )
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.suffix == ".wandb" for p in files) and any(p.name == "multirun.yaml" for p in files), files
    assert any(p.name == "output.log" for p in files) and any(p.name == "config.yaml" for p in files), files
    needles = {**SECRETS, "the judge's password": PASSWORD}
    leaked = [f"{name} in {p}" for p in files for name, value in needles.items() if value.encode() in p.read_bytes()]
    assert not leaked and len(files) > 40, leaked
    printed = [name for name, value in needles.items() if value in out.stdout + out.stderr]
    assert not printed, printed  # what the rewards printed included
    summaries = {p.parent.name: json.loads(p.read_text()) for p in tmp_path.rglob("summary.json")}
    assert summaries["0"]["status"] == "failed" and "auth failed for key ***" in summaries["0"]["error"]
    done = summaries["1"]
    assert done["status"] == "completed" and done["steps"] == 6
    # only the secrets were masked: the weights' sha256, the rewards and the judge's scores are all there
    assert re.fullmatch(r"[0-9a-f]{64}", done["base_model_sha256"]) and done["train_rewards"]["judge"] == 0.5
    assert json.dumps(done).count("***") == json.dumps(done).count("judge:***@")
    logs = "".join(p.read_text() for p in tmp_path.rglob("launch.log"))
    # the secrets were there to leak, and were masked (the judge's requests went through the URL's password: its
    # scores are above; the HTTP client's line per request is off for a judge, so a reward quotes the URL here)
    assert "using token ***" in logs and "judge http://judge:***@127.0.0.1" in logs
    # Hydra's own record of the run keeps the interpolation, not the URL it resolves to
    assert "${oc.env:JUDGE_URL}" in next(tmp_path.glob("grpo/multiruns/*/1/.hydra/config.yaml")).read_text()
