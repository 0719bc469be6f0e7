"""No API key or token in any file a run writes, even when a reward logs one or an error quotes one."""
from __future__ import annotations

import pytest

import json

from .conftest import FAST, run_launch

SECRETS = {"WANDB_API_KEY": "fake-wandb-key-0123456789abcdef", "HF_TOKEN": "hf_FakeToken0123456789"}


@pytest.mark.slow
def test_real_runs_write_no_secrets(tmp_path):
    leaky = ["+reward_mix.leaky.fn=tests.reward_plugins.leaks_secrets", "+reward_mix.leaky.weight=0.1"]
    # W&B offline too: its run files must not carry the key either
    wandb = ["logger=wandb", "logger.mode=offline", "logger.log_completions_steps=2"]
    out = run_launch(["-m", "reward_errors=raise,skip", *FAST, *leaky, *wandb], tmp_path, env={**SECRETS, "WANDB_SILENT": "true"})
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) > 10, out.stderr
    assert any(p.suffix == ".wandb" for p in files), [str(p) for p in files]
    for path in files:
        data = path.read_bytes()
        for name, value in SECRETS.items():
            assert value.encode() not in data, f"{name} leaked into {path}"
    summaries = {p.parent.name: json.loads(p.read_text()) for p in tmp_path.rglob("summary.json")}
    assert summaries["0"]["status"] == "failed" and "auth failed for key ***" in summaries["0"]["error"]
    assert summaries["1"]["status"] == "completed" and summaries["1"]["reward_failures"]["leaky"] > 0
    logs = "".join(p.read_text() for p in tmp_path.rglob("*.log"))
    assert "using token ***" in logs  # the secret was there to leak, and was masked
