"""Files a run and a sweep write, written so that nothing is lost: atomically (a reader or a crash never sees half a
file), secrets masked, NaN as null; JSONL read back skipping a line a kill cut short."""

from __future__ import annotations

import json
import math
import os
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Iterator

from .redact import redact


@lru_cache(maxsize=1)
def _new_file_mode() -> int:
    """The mode any new file gets here (0666 less the umask). Reading the umask means setting it, so it is put
    straight back; read once, on first write, not at import."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def write_text_atomic(path: Path, text: str) -> None:
    """Temp file in the same directory, fsync, rename: a reader (or a crash) never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", dir=path.parent)
    try:
        # mkstemp makes the file 0600; a run's files are read by the people sharing the sweep directory, so they
        # get the mode any other new file gets here
        os.fchmod(fd, _new_file_mode())
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# bytes a file name may have on Linux filesystems (NAME_MAX); a longer one fails as "File name too long"
NAME_MAX = 255


def check_path_name(setting: str, value: Any) -> None:
    """Refuse, in one line naming ``setting=value``, a name that becomes one directory of a path (a study's, a PBT's):
    it must stay one directory under its root, so no ``/``, no ``..``/``.``, nothing empty, and no longer than a file
    name may be. ValueError."""
    name = str(value)
    shown = name if len(name) <= 60 else f"{name[:40]}...({len(name)} characters)"
    why = None
    if not name.strip():
        why = "a name is needed"
    elif "/" in name or "\\" in name:
        why = "it names a directory: it may not hold / or \\"
    elif any(c < " " for c in name):
        why = "it holds a control character"
    elif name in (".", ".."):
        why = "it names no directory of its own"
    elif len(name.encode()) > NAME_MAX:
        why = f"longer than a file name may be ({NAME_MAX} bytes)"
    if why:
        raise ValueError(f"{setting}={shown!r}: {why}; give a plain name, e.g. {setting}=my_study")


def cannot_write(directory: Path) -> str | None:
    """Why nothing can be written in ``directory`` (a read-only mount, no permission), as one short phrase; None when
    a file can be made there. A command that only reads a directory asks first and skips what it would write."""
    try:
        with tempfile.TemporaryFile(dir=directory):
            return None
    except OSError as exc:
        return exc.strerror or type(exc).__name__


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


def iter_jsonl(path: Path) -> Iterator[dict]:
    """The rows of a JSONL file one at a time (a sweep's metrics need not all be in memory); a cut line is skipped."""
    try:
        f = Path(path).open()
    except FileNotFoundError:
        return
    with f:
        for line in f:
            if line.strip():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:  # a line cut short by a kill: skip it
                    continue
                if isinstance(row, dict):
                    yield row


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
