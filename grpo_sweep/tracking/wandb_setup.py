"""How a W&B run of this project is named and connects (its group, online or offline), without the training stack:
the end of a sweep (tracking/sweep_verdicts.py) runs on the launching machine, where torch need not be importable.
"""

from __future__ import annotations

import hashlib
import logging
import netrc
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from ..run.context import RunContext

log = logging.getLogger(__name__)

WANDB_MODES = ("online", "offline", "disabled", "dryrun", "run", "shared")


def default_group(cfg: Any, context: RunContext) -> str:
    """The sweep's directory names the group (a single run is a group of one); a short hash of its absolute
    path keeps two sweeps started in the same second on different machines apart."""
    where = context.sweep_dir or Path(context.run_dir).resolve()
    digest = hashlib.sha1(str(where).encode()).hexdigest()[:6]
    return f"{cfg.task_name}-{where.name}-{digest}"


def _has_credentials() -> bool:
    """W&B's own credential sources, checked without contacting the server: env, then ~/.netrc for the host."""
    if os.environ.get("WANDB_API_KEY") or os.environ.get("WANDB_IDENTITY_TOKEN_FILE"):
        return True
    host = urlparse(os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")).hostname or ""
    path = os.environ.get("NETRC") or os.path.expanduser("~/.netrc")
    try:
        return netrc.netrc(path).authenticators(host) is not None
    except (OSError, netrc.NetrcParseError):
        return False


def choose_mode(configured: str) -> str:
    """``auto``: WANDB_MODE if the user set it, else online with credentials and offline without."""
    env_mode = os.environ.get("WANDB_MODE")
    if env_mode is not None and env_mode not in WANDB_MODES:
        # wandb itself rejects any WANDB_MODE it does not know (even an empty one) before it starts a run
        log.warning("ignoring WANDB_MODE=%r (not one of %s)", env_mode, ", ".join(WANDB_MODES))
        del os.environ["WANDB_MODE"]
        env_mode = None
    if configured != "auto":
        return configured
    if env_mode:
        return {"dryrun": "offline", "run": "online", "shared": "online"}.get(env_mode, env_mode)
    return "online" if _has_credentials() else "offline"


def where_saved(run: Any) -> str:
    """The line a finished W&B run prints: its URL online; offline, where it is and the command that uploads it
    (every part of a run resumed in the same directory: one ``offline-run-*-<id>`` per start)."""
    if not run.offline:
        return f"W&B: run {run.url}" if getattr(run, "url", None) else ""
    where = Path(run.settings.sync_dir)
    parts = sorted(where.parent.glob(f"offline-run-*-{run.id}"))
    target = f"{where.parent}/offline-run-*-{run.id}" if len(parts) > 1 else str(where)
    return f"W&B: offline run {run.id} saved in {where}\n  upload it with: wandb sync {target}"
