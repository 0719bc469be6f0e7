"""Read an offline W&B run back from its ``.wandb`` file, without a server or an account.

wandb 0.31 has no Python reader any more (``wandb.sdk.internal.datastore`` is gone); its CLI ships one,
``wandb leet inspect --json``, which prints each record of the transaction log as a JSON line. This wraps it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class OfflineRun:
    path: Path
    run_id: str = ""
    project: str = ""
    group: str = ""
    job_type: str = ""
    name: str = ""
    tags: list = field(default_factory=list)
    config: dict = field(default_factory=dict)
    history: list = field(default_factory=list)
    summary: dict = field(default_factory=dict)
    exit_code: int | None = None


def offline_run_dirs(root: Path) -> list[Path]:
    """Every ``offline-run-*`` directory under ``root`` (a run dir or a whole sweep), oldest first."""
    return sorted(Path(root).glob("**/wandb/offline-run-*"), key=lambda p: p.name)


def read_records(path: Path) -> list[dict]:
    """All records of one ``.wandb`` file (or of the run directory holding it), as W&B's CLI decodes them."""
    out = subprocess.run(
        [sys.executable, "-m", "wandb", "leet", "inspect", "--json", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if out.returncode != 0:
        raise RuntimeError(f"wandb leet inspect {path} failed: {out.stderr.strip()[-500:]}")
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def read_offline_run(path: Path) -> OfflineRun:
    run = OfflineRun(path=Path(path))
    for record in read_records(path):
        kind = record.get("type")
        body = record.get(kind) or {}
        if kind == "run":
            run.run_id = body.get("run_id", "")
            run.project = body.get("project", "")
            run.group = body.get("run_group", "")
            run.job_type = body.get("job_type", "")
            run.name = body.get("display_name", "")
            run.tags = list(body.get("tags", []))
            run.config.update(_user_config(body.get("config")))
        elif kind == "config":
            run.config.update(_user_config(body))
        elif kind == "history":
            run.history.append(body.get("item", {}))
        elif kind == "summary":
            run.summary.update(body.get("update", {}))
        elif kind == "exit":
            run.exit_code = body.get("exit_code", 0)
    return run


def _user_config(config: dict | None) -> dict:
    return {k: v for k, v in ((config or {}).get("update") or {}).items() if k != "_wandb"}
