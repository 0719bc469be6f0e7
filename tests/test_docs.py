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


# docs/architecture.md names code as `path/module.function` (paths under grpo_sweep/, or hydra_plugins/...) or as a
# top-level package's `package.module.function` (`rewards.mix.build_mix`, `app.run_task`); a class's member is
# `module.Class.member`. Each must exist: a rename that forgets the page fails here.
ARCHITECTURE = ROOT / "docs" / "architecture.md"
NAMED = re.compile(r"(?<![\w/.$-])((?:[a-z_][a-z0-9_]*/)*[a-z_][a-z0-9_]*)(?:\.py)?((?:\.[A-Za-z_]\w*)+)")
FILE = re.compile(r"(?<![\w/.-])((?:[a-z_][a-z0-9_]*/)+[a-z_][a-z0-9_]*\.py)\b")


def _modules() -> dict[str, Path]:
    """'run/lifecycle' -> its file, for grpo_sweep/ and hydra_plugins/ (packages by their folder)."""
    out = {}
    for base, prefix in ((ROOT / "grpo_sweep", ""), (ROOT / "hydra_plugins", "hydra_plugins/")):
        for path in base.rglob("*.py"):
            rel = path.relative_to(base).with_suffix("")
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            out[prefix + "/".join(parts)] = path
    return out


def _defines(path: Path, names: list[str]) -> bool:
    import ast

    body = ast.parse(path.read_text()).body
    for name in names:
        found = None
        for node in body:
            targets = (
                [node.name]
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                else [
                    t.id for t in getattr(node, "targets", [getattr(node, "target", None)]) if isinstance(t, ast.Name)
                ]
            )
            if name in targets:
                found = node
        if found is None:
            return False
        body = getattr(found, "body", [])
        if not isinstance(found, ast.ClassDef):
            return name == names[-1]
    return True


def named_code_problems(text: str) -> list[str]:
    modules = _modules()
    problems = []
    for rel in FILE.findall(text):
        if not ((ROOT / "grpo_sweep" / rel).is_file() or (ROOT / rel).is_file()):
            problems.append(f"{rel}: no such file")
    for path, dotted in NAMED.findall(text):
        names = dotted.lstrip(".").split(".")
        if names == ["py"]:
            continue  # a file: FILE checks it
        key, rest = path, names
        # `rewards.mix.build_mix`: dotted module parts after the path
        while rest and f"{key}/{rest[0]}" in modules:
            key, rest = f"{key}/{rest[0]}", rest[1:]
        if key not in modules:
            ours = key.split("/", 1)[0] in {k.split("/", 1)[0] for k in modules}
            if "/" in key and ours and names != ["py"]:
                problems.append(f"{path}{dotted}: no module {key}")
                continue
            if "/" in key:
                continue  # a file named above (FILE), or a path outside the package (tests/, conf/)
            continue  # a word, an attribute of a value (plan.done), another library's (trl.GRPOTrainer)
        if rest and not _defines(modules[key], rest):
            problems.append(f"{path}{dotted}: {key} defines no {'.'.join(rest)}")
    return problems


def test_the_architecture_page_names_only_code_that_exists():
    assert named_code_problems(ARCHITECTURE.read_text()) == []


def test_the_checker_sees_a_renamed_function():
    assert named_code_problems("`run/lifecycle.run_one`, `launching/gate.check_run`, `rewards.mix.build_mix`") == []
    assert named_code_problems(
        "`run/lifecycle.run_two` and `sweeps/gone.py` and `reading/results.SweepResults.nope`"
    ) == [
        "sweeps/gone.py: no such file",
        "run/lifecycle.run_two: run/lifecycle defines no run_two",
        "reading/results.SweepResults.nope: reading/results defines no SweepResults.nope",
    ]
