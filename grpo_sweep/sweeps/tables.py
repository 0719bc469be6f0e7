"""The tables the tools print and write: markdown (report.md, the sweep table, the study report) and plain aligned
columns (status, the per-configuration lines). One place, so every table escapes and aligns the same way."""
from __future__ import annotations

from typing import Any, Sequence


def markdown_table(header: Sequence[Any], rows: Sequence[Sequence[Any]]) -> list[str]:
    """Lines of a markdown table, columns padded to line up in a terminal too; a ``|`` in a cell is escaped."""
    cells = [[str(c).replace("|", "\\|") for c in row] for row in [header, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |" for row in cells]
    return [lines[0], "|" + "|".join("-" * (w + 2) for w in widths) + "|", *lines[1:]]


def aligned_columns(rows: Sequence[Sequence[Any]], indent: str = "") -> list[str]:
    """Plain text rows with their columns aligned, two spaces apart, no trailing spaces."""
    cells = [[str(c) for c in row] for row in rows]
    if not cells:
        return []
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    return [indent + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
