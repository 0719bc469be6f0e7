"""Guards for the private APIs grpo_sweep/adapters/ use: each fails naming the library and its version when an
upgrade takes away what the adapter relies on."""
from __future__ import annotations

import inspect
from importlib import metadata


def _version(package: str) -> str:
    return f"{package} {metadata.version(package)}"


def test_trl_grpo_trainer_keeps_its_latest_batch_in_logs():
    from trl import GRPOTrainer

    from grpo_sweep.adapters.trl import LATEST_BATCH_KEYS

    source = inspect.getsource(GRPOTrainer)
    assert "self._logs" in source, f"{_version('trl')}: GRPOTrainer no longer has _logs (adapters/trl.py)"
    for key in LATEST_BATCH_KEYS:
        assert f'self._logs["{key}"]' in source, f"{_version('trl')}: GRPOTrainer._logs has no {key!r} (adapters/trl.py)"
