"""Every third-party package the tests import is declared: in pyproject's main dependencies or its dev extra.

A package that only arrives with another one (aiohttp came with datasets 4's fsspec extras) goes when that one
changes, and the test files importing it then fail to import. This reads tests/ (tests/support/ too) and the
repository's own modules they import (scripts/, bench/), following those imports; grpo_sweep/ and our Hydra plugins are
the package itself, whose imports its dependencies cover. Each top-level import name is mapped to its distribution with
importlib.metadata.packages_distributions(), so it runs in the environment the tests run in. An import guarded by
``except ImportError`` (or ModuleNotFoundError) is optional and not counted; neither is a package a test skips
without (``pytest.importorskip("x")``, ``find_spec("x")``) in the file that imports it.

    python scripts/check_test_imports.py        # exit 1, naming each file and package, when one is undeclared

Standard library only: it runs right after the install, before anything else.
"""

from __future__ import annotations

import ast
import re
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# the package itself: what it imports, its dependencies declare
OURS = {"grpo_sweep", "hydra_plugins", "launch"}
# the repository's own modules the tests import, followed into
FOLLOWED = {"bench", "tests", "scripts"}
OPTIONAL_ERRORS = {"ImportError", "ModuleNotFoundError"}


def normalized(name: str) -> str:
    """A distribution's name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    return normalized(re.split(r"[\s\[<>=!~;(@]", requirement.strip(), maxsplit=1)[0])


def declared(pyproject: Path) -> set[str]:
    """The distributions the main dependencies and the dev extra name (extras like ``transformers[serving]``
    count as their distribution)."""
    try:
        import tomllib
    except ImportError:  # Python 3.10: what the installed package says it requires (installed from this pyproject)
        requires = metadata.requires("grpo-sweep") or []
        return {requirement_name(r) for r in requires if ";" not in r or re.search(r"""extra\s*==\s*["']dev["']""", r)}
    project = tomllib.loads(pyproject.read_text())["project"]
    names = list(project.get("dependencies", [])) + list(project.get("optional-dependencies", {}).get("dev", []))
    return {requirement_name(r) for r in names}


def guarded_lines(tree: ast.AST) -> set[int]:
    """Lines inside a ``try`` whose handlers catch ImportError: an optional import."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Try):
            continue
        caught = set()
        for handler in node.handlers:
            types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
            caught |= {getattr(t, "id", getattr(t, "attr", None)) for t in types if t is not None}
        if caught & OPTIONAL_ERRORS:
            for statement in node.body:
                lines.update(range(statement.lineno, (statement.end_lineno or statement.lineno) + 1))
    return lines


def skipped_without(source: str) -> set[str]:
    """Packages the file skips without: ``importorskip("x")``, ``find_spec("x")``."""
    return set(re.findall(r"""(?:importorskip|find_spec)\(\s*["']([\w.]+)["']""", source))


def module_file(dotted: str, root: Path = ROOT) -> Path | None:
    base = root.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def imports(path: Path, root: Path = ROOT) -> tuple[list[tuple[str, int]], list[Path]]:
    """The third-party top-level names ``path`` imports unguarded (with their line), and the files of the
    repository's own followed modules it imports."""
    source = path.read_text()
    tree = ast.parse(source, str(path))
    guarded = guarded_lines(tree)
    optional = {name.split(".")[0] for name in skipped_without(source)}
    package = ".".join(path.relative_to(root).parts[:-1])  # a module's package; an __init__.py's own
    third_party, local = [], []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
                modules = [base] + [f"{base}.{alias.name}" for alias in node.names]
            else:
                modules = [node.module or ""] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for module in modules:
            top = module.split(".")[0]
            if top in FOLLOWED:
                found = module_file(module, root)
                if found is not None:
                    local.append(found)
            elif (
                top
                and top not in OURS
                and top not in sys.stdlib_module_names
                and top not in optional
                and node.lineno not in guarded
                and module_file(top, root) is None
            ):
                third_party.append((top, node.lineno))
    return third_party, local


def undeclared(root: Path = ROOT) -> list[str]:
    """``file:line imports name (distribution)`` for each unguarded import of a package not declared."""
    wanted = declared(root / "pyproject.toml")
    distributions = metadata.packages_distributions()
    problems, seen = [], set()
    queue = sorted((root / "tests").rglob("*.py"))
    while queue:
        path = queue.pop()
        if path in seen:
            continue
        seen.add(path)
        third_party, local = imports(path, root)
        queue += [p for p in local if p not in seen]
        for name, line in third_party:
            folders = [path.parent, *(root / folder for folder in FOLLOWED)]
            if any((d / f"{name}.py").is_file() or (d / name / "__init__.py").is_file() for d in folders):
                continue  # a module of ours imported with its folder on sys.path (scripts/gpu_check.py)
            owners = distributions.get(name, [])
            if not any(normalized(owner) in wanted for owner in owners):
                what = ", ".join(sorted(set(owners))) if owners else "not installed"
                problems.append(f"{path.relative_to(root)}:{line} imports {name} ({what})")
    return sorted(set(problems))


def main() -> int:
    problems = undeclared()
    for problem in problems:
        print(problem)
    if problems:
        print(
            f"{len(problems)} import(s) of packages neither pyproject's dependencies nor its dev extra declare: "
            "declare each in the dev extra (or guard it as optional)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
