"""Run untrusted Python (a model's completion) against test cases, contained.

Each execution is one short-lived process tree:

- ``isolation="namespaces"`` (default): util-linux ``unshare`` puts it in new **network** (no interface but a
  down loopback: nothing reachable), **PID** (it sees only itself; when it ends or is killed the kernel kills
  every process it started) and **mount** namespaces (``--map-root-user`` adds a user namespace when not run
  as root). Inside, ``/tmp``, ``/var/tmp`` and ``/dev/shm`` are fresh size-capped tmpfs (the throw-away
  working directory is ``/tmp``), every other mount is remounted read-only, and then privileges go: root
  becomes ``nobody`` (uid 0 ignores ``RLIMIT_NPROC``), anyone else enters a nested user namespace.
- ``isolation="rlimits"``: only what follows. Opt-in, with a logged warning, for machines where namespaces
  cannot be created: the program can then reach the network and write wherever the user can.

Always: its own session and process group (killed as a group at the wall-time limit), rlimits on CPU time,
address space, file size, open files, processes and core dumps, an environment with nothing of the parent's
(no tokens, no keys), stdin/stdout/stderr away from the parent, and an output capped in size.

The harness reports through a per-execution random token, so a program that prints a fake result or exits
early with status 0 passes nothing. It runs in the same interpreter as the program, so a program that digs
the token out of the harness's frames could still forge a result: this contains damage, it is not a proof
against deliberate reward hacking.
"""
from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path

log = logging.getLogger(__name__)

ISOLATIONS = ("namespaces", "rlimits")
HARNESS = (Path(__file__).with_name("_sandbox_harness.py")).read_text()
MAX_OUTPUT_BYTES = 64 * 1024
# Python start-up and namespace set-up, on top of the program's own time budget.
STARTUP_SLACK_S = 2.0
CLEAN_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}


class SandboxUnavailable(RuntimeError):
    """The requested isolation cannot be set up on this machine."""


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 5.0  # wall time for the whole execution (all tests)
    per_test_s: float = 2.0  # wall time for one test (SIGALRM inside the harness)
    cpu_s: float = 5.0
    memory_mb: int = 512
    disk_mb: int = 16
    max_procs: int = 16


@dataclass
class Execution:
    passed: list[bool]
    status: str  # ok | timeout | crashed | setup_failed
    seconds: float
    detail: str = ""
    tests: int = field(default=0)

    @property
    def score(self) -> float:
        return sum(self.passed) / self.tests if self.tests else 0.0


def _command(isolation: str) -> list[str]:
    python = [sys.executable, "-I", "-S", "-c", HARNESS]
    if isolation == "rlimits":
        return python
    unshare = shutil.which("unshare")
    if unshare is None:
        raise SandboxUnavailable("the `unshare` command (util-linux) is not installed")
    user = [] if os.geteuid() == 0 else ["--map-root-user"]
    return [unshare, *user, "--net", "--pid", "--fork", "--kill-child", "--mount", "--mount-proc", "--", *python]


def execute(code: str, tests: list, limits: Limits = Limits(), isolation: str = "namespaces") -> Execution:
    """Run ``code`` then each test (a Python snippet, or ``{"input", "output"}`` for a stdin/stdout program)."""
    if isolation not in ISOLATIONS:
        raise ValueError(f"isolation={isolation!r}; use one of {', '.join(ISOLATIONS)}")
    started = time.perf_counter()
    token = secrets.token_hex(16)
    workdir = "/tmp" if isolation == "namespaces" else tempfile.mkdtemp(prefix="grpo-sandbox-")
    payload = {
        "token": token,
        "code": code,
        "tests": tests,
        "limits": asdict(limits),
        "isolate": isolation == "namespaces",
        "real_root": os.geteuid() == 0,
        "workdir": workdir,
    }
    try:
        with tempfile.TemporaryFile() as out:
            proc = subprocess.Popen(
                _command(isolation),
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=subprocess.DEVNULL,
                env={**CLEAN_ENV, "HOME": workdir},
                cwd=workdir if isolation == "rlimits" else "/",
                start_new_session=True,
                close_fds=True,
            )
            status = "ok"
            try:
                proc.stdin.write(json.dumps(payload).encode())
                proc.stdin.close()
            except BrokenPipeError:
                pass
            try:
                proc.wait(timeout=limits.timeout_s + STARTUP_SLACK_S)
            except subprocess.TimeoutExpired:
                status = "timeout"
            _kill_group(proc)
            out.seek(0)
            output = out.read(MAX_OUTPUT_BYTES).decode("utf-8", "replace")
    finally:
        if isolation == "rlimits":
            shutil.rmtree(workdir, ignore_errors=True)
    seconds = time.perf_counter() - started
    return _parse(output, token, status, seconds, len(tests))


def _kill_group(proc: subprocess.Popen) -> None:
    # The whole group, also after a clean exit: a program may leave children behind.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _parse(output: str, token: str, status: str, seconds: float, n_tests: int) -> Execution:
    for line in reversed(output.splitlines()):
        if not line.startswith(token + " "):
            continue
        body = line[len(token) + 1 :]
        if body.startswith("SETUP "):
            return Execution([False] * n_tests, "setup_failed", seconds, json.loads(body[6:]), n_tests)
        passed = [bool(p) for p in json.loads(body)][:n_tests]
        return Execution(passed + [False] * (n_tests - len(passed)), "ok", seconds, "", n_tests)
    return Execution([False] * n_tests, "timeout" if status == "timeout" else "crashed", seconds, "", n_tests)


@lru_cache(maxsize=None)
def check_isolation(isolation: str = "namespaces") -> None:
    """Raise SandboxUnavailable (naming the cause) unless a trivial program runs and passes its test here."""
    try:
        result = execute("x = 1", ["assert x == 1"], Limits(timeout_s=10), isolation)
    except (OSError, SandboxUnavailable) as exc:
        raise SandboxUnavailable(str(exc)) from None
    if result.passed != [True]:
        detail = result.detail.strip().splitlines()[-1] if result.detail.strip() else result.status
        raise SandboxUnavailable(f"a trivial program did not run under isolation={isolation} ({detail})")
    if isolation == "rlimits":
        log.warning(
            "code reward: isolation=rlimits: generated code runs with resource limits only; it can reach the "
            "network and write wherever this user can"
        )
