"""How a one-line message shows a value read from a user's file (JSON-like, on one line, cut short), and an
exception another library raised (its first line)."""

from __future__ import annotations

import json
from typing import Any


def shown(value: Any, limit: int = 60) -> str:
    """``value`` as JSON (repr where JSON has no form for it), one line, cut at ``limit`` characters."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=repr)
    except (ValueError, TypeError, RecursionError):  # a cycle, non-string keys
        text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message (libraries' messages go on for lines), or its type's name when it has
    none."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
