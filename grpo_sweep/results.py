"""What a run leaves in its directory: metrics.jsonl, summary.json, samples.jsonl — written so nothing is lost."""
from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable

from .redact import redact

SUMMARY = "summary.json"
METRICS = "metrics.jsonl"
SAMPLES = "samples.jsonl"


def write_text_atomic(path: Path, text: str) -> None:
    """Temp file in the same directory, fsync, rename: a reader (or a crash) never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, data: Any) -> None:
    """JSON, secrets masked (see redact.py), written atomically."""
    write_text_atomic(path, json.dumps(redact(data), indent=2, default=_jsonable) + "\n")


def write_jsonl_atomic(path: Path, rows: Iterable[dict]) -> None:
    write_text_atomic(path, "".join(json.dumps(redact(row), default=_jsonable) + "\n" for row in rows))


def append_jsonl(path: Path, row: dict) -> None:
    """One row appended as a line, NaN/inf as null, secrets masked (a line cut by a kill is skipped on read)."""
    with Path(path).open("a") as f:
        f.write(json.dumps(redact({k: clean_number(v) for k, v in row.items()}), default=_jsonable) + "\n")


def read_jsonl(path: Path) -> list[dict]:
    rows = []
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:  # a line cut short by a kill: skip it
                    continue
    return rows


def read_summary(run_dir: Path) -> dict | None:
    path = Path(run_dir) / SUMMARY
    if not path.exists():
        return None
    return json.loads(path.read_text())


def _jsonable(value: Any):
    if hasattr(value, "item"):  # numpy / torch scalars
        return value.item()
    if isinstance(value, Path):
        return str(value)
    return str(value)


def clean_number(value: Any) -> Any:
    """NaN/inf are not JSON; store them as None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def lookup(summary: dict, dotted: str) -> Any:
    """``summary["a"]["b"]`` for ``"a.b"``; a flat key containing dots wins."""
    if dotted in summary:
        return summary[dotted]
    node: Any = summary
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def reward_trajectory(history: list[dict], key: str) -> tuple[float | None, float | None]:
    """Mean of ``key`` over the first and the last fifth of the logged steps (single steps are noisy)."""
    values = [row[key] for row in history if isinstance(row.get(key), (int, float)) and math.isfinite(row[key])]
    if not values:
        return None, None
    window = max(1, len(values) // 5)
    return sum(values[:window]) / window, sum(values[-window:]) / window
