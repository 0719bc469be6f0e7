"""grpo_sweep/reading/tables.py: the one table helper every report and status line uses."""

from grpo_sweep.reading.tables import aligned_columns, markdown_table


def test_markdown_table_pads_escapes_and_has_its_rule():
    lines = markdown_table(["run", "overrides"], [[0, "a|b"], [12, "c"]])
    assert lines == [
        "| run | overrides |",
        "|-----|-----------|",
        "| 0   | a\\|b      |",
        "| 12  | c         |",
    ]


def test_aligned_columns_line_up_without_trailing_spaces():
    assert aligned_columns([["a", "bb", ""], ["ccc", "d", "e"]], indent="  ") == ["  a    bb", "  ccc  d   e"]
    assert aligned_columns([]) == []
