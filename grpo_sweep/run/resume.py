"""Resuming a run in its own directory after a preemption, a time limit or a kill.

A run directory that already holds TRL checkpoints is continued from the newest complete one, and
metrics.jsonl is cut back to that step first, so every step is in it exactly once. No torch here.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from ..config.show import first_line
from .files import read_jsonl, write_jsonl_atomic, write_text_atomic
from .record import TEST_ROW_PREFIX
from .redact import redact
from .results import METRICS

CHECKPOINTS = "checkpoints"
# the config the run started with (Hydra rewrites .hydra/config.yaml on every start, so it cannot tell)
STARTED_WITH = "config.yaml"
RESUMES = "resumes.jsonl"
# keys that may differ between attempts without changing what is trained (a paused run goes on to a later pause)
IGNORED_KEYS = ("output_root", "trainer.pause_at_step")


class ResumeError(ValueError):
    """The run directory holds a different run; the message names the keys that differ."""


def last_checkpoint(run_dir: Path) -> tuple[Path, int] | None:
    """The newest checkpoint whose save finished, and its step.

    transformers' get_last_checkpoint takes the highest-numbered directory even when a kill cut its save
    short; trainer_state.json is written last, so a checkpoint counts only once that file parses.
    """
    found = []
    for path in (Path(run_dir) / CHECKPOINTS).glob("checkpoint-*"):
        match = re.fullmatch(r"checkpoint-(\d+)", path.name)
        if match and path.is_dir():
            found.append((int(match.group(1)), path))
    for _, path in sorted(found, reverse=True):
        try:
            state = json.loads((path / "trainer_state.json").read_text())
            return path, int(state["global_step"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return None


def _resolved(cfg: Any) -> dict:
    """The run's config, resolved, without Hydra's node: a sweep's job composed before it runs (the gate, a PBT's
    next round) has Hydra's runtime keys unset, and nothing of the run's own refers to them."""
    if not OmegaConf.is_config(cfg):
        return {k: v for k, v in cfg.items() if k != "hydra"}
    plain = OmegaConf.to_container(cfg, resolve=False)
    plain.pop("hydra", None)
    return OmegaConf.to_container(OmegaConf.create(plain), resolve=True)


def _flat(cfg: Any) -> dict:
    container = _resolved(cfg)
    out: dict = {}

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, dict) and node:
            for key, value in node.items():
                walk(value, f"{prefix}{key}.")
        else:
            out[prefix[:-1]] = node

    walk(container, "")
    return {k: v for k, v in out.items() if k not in IGNORED_KEYS}


def check_same_run(run_dir: Path, cfg: Any) -> None:
    """Refuse to continue a run directory that was started with another config."""
    path = Path(run_dir) / CHECKPOINTS / STARTED_WITH
    if not path.exists():
        return
    try:
        started = OmegaConf.load(path)
    except Exception as exc:  # noqa: BLE001 - YAML's, the decoder's or the file system's error: one line naming the file
        raise ResumeError(
            f"{path} cannot be read ({first_line(exc)}): it records the config this run directory was started "
            "with; restore it, or pick a new output directory"
        ) from None
    if not OmegaConf.is_dict(started):
        raise ResumeError(
            f"{path} holds no config (a YAML mapping): it records the config this run directory was "
            "started with; restore it, or pick a new output directory"
        )
    # compared as stored: masked (a URL's password is not kept in the record, see remember_config)
    before, now = redact(_flat(started)), redact(_flat(cfg))
    changed = sorted(k for k in before.keys() | now.keys() if before.get(k) != now.get(k))
    if changed:
        shown = ", ".join(f"{k}: {before.get(k)!r} -> {now.get(k)!r}" for k in changed[:5])
        raise ResumeError(
            f"{run_dir} holds a run started with another config ({shown}{', ...' if len(changed) > 5 else ''}); "
            "resume it with its own overrides, or pick a new output directory"
        )


def remember_config(run_dir: Path, cfg: Any) -> None:
    path = Path(run_dir) / CHECKPOINTS / STARTED_WITH
    path.parent.mkdir(parents=True, exist_ok=True)
    resolved = _resolved(cfg)
    # the ownership record: never half-written, and no URL's password or token in it
    write_text_atomic(path, OmegaConf.to_yaml(OmegaConf.create(redact(resolved))))


def trim_metrics(run_dir: Path, step: int) -> int:
    """Keep the logged steps up to ``step`` (the checkpoint's); drop later ones and end-of-training rows.

    Returns how many whole rows were dropped; a line cut short by a kill goes too (read_jsonl skips it).
    """
    path = Path(run_dir) / METRICS
    rows = read_jsonl(path)
    kept = rows_up_to(rows, step)
    write_jsonl_atomic(path, kept)
    return len(rows) - len(kept)


def rows_up_to(rows: list[dict], step: int) -> list[dict]:
    """The metrics rows of a run continued from its checkpoint of ``step``: the steps up to it, without the rows
    written when an attempt ended (the Trainer's ``train_runtime``, the test split's)."""
    return [
        row
        for row in rows
        if row.get("step", 0) <= step
        and "train_runtime" not in row
        and not any(key.startswith(TEST_ROW_PREFIX) for key in row)
    ]


def record_resume(run_dir: Path, step: int, dropped: int) -> list[dict]:
    """Note the resume in resumes.jsonl (read by the status command and the summary); return all of them."""
    path = Path(run_dir) / RESUMES
    with path.open("a") as f:
        f.write(json.dumps({"time": time.time(), "from_step": step, "dropped_metric_rows": dropped}) + "\n")
    return read_jsonl(path)
