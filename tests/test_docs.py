"""The README stays a short first read, and every link in it and in docs/ leads somewhere."""
from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

from .conftest import ROOT

README = ROOT / "README.md"
PAGES = [README, ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").rglob("*.md"))]
SETUP_COMMANDS = ['pip install -e ".[dev]" && python launch.py', "python -m pytest -q"]

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
CODE_SPAN = re.compile(r"`[^`\n]*`")


def links(text: str) -> list[str]:
    """Markdown link and image targets outside code blocks and code spans."""
    return LINK.findall(CODE_SPAN.sub("", FENCE.sub("", text)))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    kept = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LMN")
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text())
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", text, re.M):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def test_readme_setup_block_is_the_two_commands():
    text = README.read_text()
    section = text.split("## Set up, run, test", 1)[1]
    block = re.search(r"^```bash\n(.*?)^```", section, re.S | re.M)
    assert block is not None, "no ```bash block under 'Set up, run, test'"
    assert [line for line in block.group(1).splitlines() if line.strip()] == SETUP_COMMANDS


def test_readme_has_code_map_and_architecture():
    text = README.read_text()
    assert "## Where things are" in text
    assert "(docs/architecture.md)" in text
    assert (ROOT / "docs" / "architecture.md").is_file()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path):
    broken = []
    for target in links(page.read_text()):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        if not dest.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target} (no heading with that anchor in {dest.relative_to(ROOT)})")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_checker_sees_a_broken_link(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# A heading\n\n[ok](#a-heading) [bad](#nope) `[not a link](x.md)`\n")
    assert links(page.read_text()) == ["#a-heading", "#nope"]
    assert anchors(page) == {"a-heading"}
