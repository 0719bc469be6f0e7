"""The tables the tools print and write: markdown (report.md, the sweep table, the study report) and plain aligned
columns (status, the per-configuration lines). One place, so every table escapes and aligns the same way."""
from __future__ import annotations

from typing import Any, Sequence


def number(value: Any, digits: int = 3, missing: str = "-") -> str:
    """A value as every table and summary line shows it: ``digits`` decimals, a small non-zero float in ``digits``
    significant figures (a learning rate is not 0.000), a list as ``(a, b)``, ``missing`` for None."""
    if value is None:
        return missing
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 1e-2 and value != 0 else f"{value:.{digits}f}"
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(number(v, digits, missing) for v in value) + ")"
    return str(value)


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
