"""The GPU check's wheelhouse: the pure-Python (and a few binary) packages a GPU node lacks beside its own CUDA
torch and transformers, downloaded on a machine with an index and installed on the node without one.

    python scripts/gpu_wheels.py build DIR [--python-version 3.11] [--node-freeze FILE]   # connected machine
    python scripts/gpu_wheels.py plan DIR                                                  # node: what it would install
    python scripts/gpu_wheels.py install DIR                                               # node: pip --no-index

The list is scripts/gpu_check_wheels.txt. ``build`` downloads every entry (or, given the node's
``pip list --format=freeze`` as --node-freeze, only those the node lacks) for Linux x86_64 and one Python version.
``install`` installs only the entries this Python lacks, with ``--no-deps``: pip then never replaces the node's
torch or transformers. Imports nothing heavy (no torch): it runs before the stack is there.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

LIST = Path(__file__).with_name("gpu_check_wheels.txt")
# pure-Python packages published only as source: built into a wheel on the connected machine
SOURCE_ONLY = {"antlr4-python3-runtime"}
PLATFORMS = ["manylinux2014_x86_64", "manylinux_2_28_x86_64"]
LIMIT_MB = 64


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements() -> list[tuple[str, str]]:
    """(name, requirement line) for every entry of the list."""
    entries = []
    for line in LIST.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            entries.append((canonical(re.split(r"[=<>!~ \[]", line, maxsplit=1)[0]), line))
    return entries


def installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def missing_here() -> list[tuple[str, str]]:
    return [(name, line) for name, line in requirements() if installed(name) is None]


def wheel_for(directory: Path, name: str) -> Path | None:
    for wheel in sorted(directory.glob("*.whl")):
        if canonical(wheel.name.split("-", 1)[0]) == name:
            return wheel
    return None


def build(directory: Path, python_version: str, node_freeze: Path | None) -> int:
    wanted = requirements()
    if node_freeze is not None:
        have = {
            canonical(re.split(r"[=@ ]", line, maxsplit=1)[0])
            for line in node_freeze.read_text().splitlines()
            if line.strip()
        }
        wanted = [(n, line) for n, line in wanted if n not in have]
    directory.mkdir(parents=True, exist_ok=True)
    binary = [line for n, line in wanted if n not in SOURCE_ONLY]
    source = [line for n, line in wanted if n in SOURCE_ONLY]
    pip = [sys.executable, "-m", "pip"]
    if binary:
        platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
        subprocess.run(
            [
                *pip,
                "download",
                "-q",
                "--no-deps",
                "--only-binary=:all:",
                *platforms,
                "--python-version",
                python_version,
                "-d",
                str(directory),
                *binary,
            ],
            check=True,
        )
    if source:
        subprocess.run([*pip, "wheel", "-q", "--no-deps", "-w", str(directory), *source], check=True)
    size = sum(f.stat().st_size for f in directory.glob("*.whl")) / 2**20
    print(f"gpu_wheels: {len(wanted)} wheels, {size:.1f} MB in {directory}")
    if size > LIMIT_MB:
        print(
            f"gpu_wheels: over {LIMIT_MB} MB: pass the node's `pip list --format=freeze` as --node-freeze to leave "
            f"out what it has",
            file=sys.stderr,
        )
    return 0


def plan(directory: Path) -> list[tuple[str, Path | None]]:
    return [(name, wheel_for(directory, name)) for name, _ in missing_here()]


def install(directory: Path) -> int:
    todo = plan(directory)
    lacking = [name for name, wheel in todo if wheel is None]
    if lacking:
        print(
            f"gpu_wheels: not in {directory}: {', '.join(lacking)}; build the wheelhouse again "
            f"(python scripts/gpu_wheels.py build {directory}) on a machine with an index",
            file=sys.stderr,
        )
        return 1
    if not todo:
        print("gpu_wheels: this Python has every package of the list; nothing to install")
        return 0
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--no-deps",
            "--find-links",
            str(directory),
            *[str(wheel) for _, wheel in todo],
        ],
        check=True,
    )
    print(f"gpu_wheels: installed {len(todo)} from {directory}: {', '.join(name for name, _ in todo)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["build", "plan", "install"])
    parser.add_argument("directory", type=Path)
    parser.add_argument(
        "--python-version",
        default=f"{sys.version_info.major}.{sys.version_info.minor}",
        help="the node's Python (default: this one's)",
    )
    parser.add_argument(
        "--node-freeze", type=Path, help="the node's `pip list --format=freeze`: download only what it lacks"
    )
    args = parser.parse_args(argv)
    if args.command == "build":
        return build(args.directory, args.python_version, args.node_freeze)
    if args.command == "install":
        return install(args.directory)
    todo = plan(args.directory)
    if not todo:
        print("gpu_wheels: would install nothing: this Python has every package of the list")
    for name, wheel in todo:
        print(
            f"gpu_wheels: would install {name} from {wheel.name if wheel else 'NOTHING: not in ' + str(args.directory)}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
