"""A run directory belongs to one run config: another config must not write into it.

The first run in a directory records its config in ``run_identity.json``. A later run in the same
directory is allowed only with the same config (a requeued, resumed or repeated run); any other gets an
error naming the directory and the keys that differ, before anything is written. A directory from before
this file existed is judged by its ``summary.json`` overrides.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from .results import SUMMARY, read_summary, write_json_atomic

IDENTITY = "run_identity.json"
# Keys that may differ between attempts of the same run (where outputs go, not what is trained).
IDENTITY_EXEMPT = ("output_root",)


class RunDirTaken(ValueError):
    """The output directory holds a different run."""


def _flat(node: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, value in node.items():
            out.update(_flat(value, f"{prefix}{key}."))
        return out
    return {prefix.rstrip("."): node}


def identity(cfg: Any) -> dict[str, Any]:
    """The run's config, flattened to dotted keys, without the exempt keys."""
    from omegaconf import OmegaConf

    container = OmegaConf.to_container(cfg, resolve=True) if not isinstance(cfg, dict) else cfg
    container = {k: v for k, v in container.items() if k not in IDENTITY_EXEMPT and k != "hydra"}
    return {k: v for k, v in _flat(container).items()}


def fingerprint(flat: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(flat, sort_keys=True, default=str).encode()).hexdigest()[:16]


def check_owner(run_dir: Path, cfg: Any, overrides: list[str] | None = None) -> None:
    """Raise RunDirTaken when ``run_dir`` already belongs to a run with a different config."""
    run_dir = Path(run_dir)
    mine = identity(cfg)
    recorded = run_dir / IDENTITY
    if recorded.is_file():
        theirs = json.loads(recorded.read_text())
        if theirs.get("fingerprint") == fingerprint(mine):
            return
        old = theirs.get("config", {})
        differ = sorted(k for k in set(old) | set(mine) if old.get(k, "<unset>") != mine.get(k, "<unset>"))
        shown = ", ".join(f"{k}: {old.get(k, '<unset>')!r} -> {mine.get(k, '<unset>')!r}" for k in differ[:3])
        more = f" (+{len(differ) - 3} more)" if len(differ) > 3 else ""
        raise RunDirTaken(
            f"output directory {str(run_dir)!r} belongs to another run ({shown}{more}); "
            "pick a new hydra.run.dir / hydra.sweep.dir or move that directory away"
        )
    summary = read_summary(run_dir) if (run_dir / SUMMARY).is_file() else None
    if summary is not None and overrides is not None and sorted(summary.get("overrides", [])) != sorted(overrides):
        raise RunDirTaken(
            f"output directory {str(run_dir)!r} holds a finished run with overrides {summary.get('overrides')} "
            f"(this run: {overrides}); pick a new hydra.run.dir / hydra.sweep.dir or move that directory away"
        )


def claim(run_dir: Path, cfg: Any, overrides: list[str] | None = None) -> None:
    """Check ownership, then record this run as the owner of ``run_dir`` (if nobody is yet)."""
    check_owner(run_dir, cfg, overrides)
    recorded = Path(run_dir) / IDENTITY
    if not recorded.is_file():
        flat = identity(cfg)
        write_json_atomic(recorded, {"fingerprint": fingerprint(flat), "overrides": overrides or [], "config": flat})
