"""Run untrusted Python (a model's completion) against test cases, contained.

Each execution is one short-lived process tree:

- ``isolation="namespaces"`` (default): util-linux ``unshare`` puts it in new **network** (no interface but a
  down loopback: nothing reachable), **IPC** (no System V shared memory or queue of the host's), **PID** (it sees
  only itself; when it ends or is killed the kernel kills every process it started) and **mount** namespaces
  (``--map-root-user`` adds a user namespace when not run as root). Inside, the harness builds a new root on a
  tmpfs, pivots into it and detaches the host's: the program sees, read-only, the interpreter, the standard
  library (all of ``sys.path`` under ``-I -S``: no site-packages, no project venv) and the shared-library
  directories (``/usr/lib``, ``/lib``, ...); a fresh size-capped ``/tmp`` (its working directory) and
  ``/dev/shm``; ``/dev/null``, ``zero``, ``full``, ``random``, ``urandom``; the ``/proc`` of its PID namespace.
  Nothing else of the host: no ``/etc``, no ``/home``, no checkout, no dataset with its expected outputs. Then
  privileges go: root becomes ``nobody`` (uid 0 ignores ``RLIMIT_NPROC``), anyone else enters a nested user
  namespace.
- ``isolation="rlimits"``: what follows, and root becomes ``nobody`` too (as root it would write ``/etc``, set
  the hostname, signal any process and fork past ``RLIMIT_NPROC``). The standard library stays importable
  through ``/proc/self/fd`` where nobody cannot reach it by path (an interpreter under ``/root``); where root
  may not change uid, the check refuses in one line. Where the kernel has Landlock (Linux 5.13+), reads are
  kept to what the namespaces' root would show and writes to its own working directory (also ``$TMPDIR`` and
  ``$HOME``); from Linux 6.7 TCP is refused, from 6.12 signals and abstract sockets outside it. Opt-in, with a
  logged warning, for machines where namespaces cannot be created: UDP still leaves, and without Landlock
  the program reads what its user can and writes where its user can.

Always: its own session and process group (killed as a group at the wall-time limit), rlimits on CPU time,
address space, file size, open files, processes and core dumps, an environment with nothing of the parent's
(no tokens, no keys), stdin/stdout/stderr away from the parent, and an output capped in size.

Judging happens here, outside the sandbox, and what is expected never enters it. The harness runs in the same
interpreter as the program, so everything it holds or reports is the program's to read and rewrite; it is
therefore given only the program and each test's inputs, and reports plain data back:

- a stdin/stdout test sends only its input; the captured stdout comes back and is compared here;
- an assert snippet made of imports and ``assert`` statements over calls into the program (``assert f(1, 2) ==
  3``, ``assert not f(x)``, ``assert math.isclose(f(x), 2.5)``, ``assert set(f(x)) == {1, 2}``, ...) is split:
  only the calls (``f(1, 2)``) are sent; their values come back as plain data (builtin types only; a subclass
  of a builtin arrives as the builtin, so its ``__eq__`` goes; anything else fails the test), and the rest of
  the assert is evaluated here on those values. A forged report can only claim values, and choosing values is
  what the program does anyway.
- any other snippet (loops, helper definitions, calls whose result is used through a method, ...) runs as a
  script after the program and reports whether it raised; such a result is the program's word, and a program
  that attacks the harness can forge it. ``Execution.self_reported`` counts them; a warning is logged once.

The report line carries a per-execution random token, so stray output is never mistaken for it.
"""

from __future__ import annotations

import ast
import builtins
import json
import logging
import math
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from functools import cache, lru_cache, partial
from pathlib import Path
from types import CodeType

log = logging.getLogger(__name__)

ISOLATIONS = ("namespaces", "rlimits")
HARNESS = (Path(__file__).with_name("_sandbox_harness.py")).read_text()
MAX_OUTPUT_BYTES = 4 * 1024 * 1024 + 4096  # the harness's cap on its report, plus the token
# Python start-up and namespace set-up, on top of the program's own time budget.
STARTUP_SLACK_S = 2.0
NOBODY = 65534  # whom root runs generated code as (uid 0 ignores RLIMIT_NPROC, writes /etc, sets the hostname)
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
    self_reported: int = 0  # tests that ran as scripts: passed on the program's word (see the module doc)

    @property
    def score(self) -> float:
        return sum(self.passed) / self.tests if self.tests else 0.0


def _namespaces() -> list[str]:
    """The `unshare` command line that starts a program in the sandbox's namespaces."""
    unshare = shutil.which("unshare")
    if unshare is None:
        raise SandboxUnavailable("the `unshare` command (util-linux) is not installed")
    user = [] if os.geteuid() == 0 else ["--map-root-user"]
    return [unshare, *user, "--net", "--ipc", "--pid", "--fork", "--kill-child", "--mount", "--mount-proc", "--"]


def _command(isolation: str) -> list[str]:
    # The interpreter itself, not a venv's link to it: the venv is no part of what the program is shown.
    python = [os.path.realpath(sys.executable), "-I", "-S", "-c", HARNESS]
    return python if isolation == "rlimits" else [*_namespaces(), *python]


def _unshare_error() -> str | None:
    """What `unshare` says when it cannot create the namespaces (the sandbox's own stderr goes nowhere)."""
    probe = subprocess.run(
        [*_namespaces(), os.path.realpath(sys.executable), "-I", "-S", "-c", ""],
        capture_output=True,
        text=True,
        timeout=30,
        env=CLEAN_ENV,
    )
    return probe.stderr.strip().splitlines()[-1] if probe.returncode and probe.stderr.strip() else None


def execute(code: str, tests: list, limits: Limits = Limits(), isolation: str = "namespaces") -> Execution:
    """Run ``code`` then each test (a Python snippet, or ``{"input", "output"}`` for a stdin/stdout program)."""
    if isolation not in ISOLATIONS:
        raise ValueError(f"isolation={isolation!r}; use one of {', '.join(ISOLATIONS)}")
    started = time.perf_counter()
    sent, judges = zip(*(_prepare(test) for test in tests)) if tests else ((), ())
    token = secrets.token_hex(16)
    root = os.geteuid() == 0
    workdir = "/tmp" if isolation == "namespaces" else tempfile.mkdtemp(prefix="grpo-sandbox-")
    if root and isolation == "rlimits":
        os.chown(workdir, NOBODY, NOBODY)
    payload = {
        "token": token,
        "code": code,
        "tests": list(sent),
        "limits": asdict(limits),
        "isolate": isolation == "namespaces",
        "drop_to": NOBODY if root else None,
        "workdir": workdir,
    }
    try:
        with tempfile.TemporaryFile() as out:
            proc = subprocess.Popen(
                _command(isolation),
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=subprocess.DEVNULL,
                env={**CLEAN_ENV, "HOME": workdir, "TMPDIR": workdir},
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
    execution = _parse(output, token, status, seconds, judges)
    execution.self_reported = sum(item["kind"] == "script" for item in sent)
    return execution


def _kill_group(proc: subprocess.Popen) -> None:
    # The whole group, also after a clean exit: a program may leave children behind.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _parse(output: str, token: str, status: str, seconds: float, judges) -> Execution:
    n_tests = len(judges)
    for line in reversed(output.splitlines()):
        if not line.startswith(token + " "):
            continue
        body = line[len(token) + 1 :]
        if body.startswith("SETUP "):
            return Execution([False] * n_tests, "setup_failed", seconds, json.loads(body[6:]), n_tests)
        try:
            results = json.loads(body)
        except (ValueError, RecursionError):
            break
        if not isinstance(results, list):
            break
        results = results[:n_tests] + [None] * (n_tests - len(results[:n_tests]))
        return Execution([judge(result) for judge, result in zip(judges, results)], "ok", seconds, "", n_tests)
    return Execution([False] * n_tests, "timeout" if status == "timeout" else "crashed", seconds, "", n_tests)


# ---- judging, outside the sandbox ----------------------------------------------------------------------------

# Builtins an assert may use around calls into the program; here they always mean the real builtins.
CHECK_NAMES = {
    name: getattr(builtins, name)
    for name in (
        "abs all any bin bool bytearray bytes chr complex dict divmod enumerate float frozenset hex int "
        "isinstance len list max min oct ord pow range repr reversed round set sorted str sum tuple type "
        "zip"
    ).split()
}
# Those that may take values from the sandbox: linear time and memory in their input at most (so no `range`,
# `pow`, `*`, `%`: a returned 10**12 or "%*d" must not cost this process anything).
VALUE_CALLS = frozenset(
    "abs all any bool dict float frozenset int isinstance len list max min round set sorted str sum tuple type "
    "math.isclose math.fabs math.floor math.ceil math.sqrt".split()
)
VALUE_BINOPS = (ast.Add, ast.Sub, ast.Div, ast.FloorDiv)
_NOT_CHECKABLE = (
    ast.Lambda,
    ast.NamedExpr,
    ast.Await,
    ast.Yield,
    ast.YieldFrom,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
    ast.Starred,
)
_warned_self_reported = False


@dataclass(frozen=True)
class Plan:
    """An assert snippet split into what runs in the sandbox (imports, probes) and what is judged here."""

    setup: str
    probes: tuple[str, ...]
    checks: tuple[CodeType, ...]


class _NotCheckable(Exception):
    pass


def _dotted(node: ast.expr) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else None


class _Splitter:
    """Rewrites an assert's test so that each call into the program becomes ``__probe__[i]``."""

    def __init__(self, imported: set[str]):
        self.trusted = (set(CHECK_NAMES) | {"math"}) - (imported - {"math"})
        self.imported = imported
        self.probes: list[str] = []

    def evaluable_here(self, node: ast.AST) -> bool:
        for sub in ast.walk(node):
            if isinstance(sub, _NOT_CHECKABLE) or (isinstance(sub, ast.Attribute) and sub.attr.startswith("_")):
                return False
            if isinstance(sub, ast.Name) and sub.id not in self.trusted:
                return False
        return True

    def into_program(self, node: ast.expr) -> bool:
        name = _dotted(node.func if isinstance(node, ast.Call) else node)
        root = name.split(".")[0] if name else None
        return root is not None and root not in self.trusted and root not in self.imported

    def probe(self, node: ast.expr) -> ast.expr:
        self.probes.append(ast.unparse(node))
        return ast.Subscript(ast.Name("__probe__", ast.Load()), ast.Constant(len(self.probes) - 1), ast.Load())

    def split(self, node: ast.expr) -> ast.expr:
        if self.evaluable_here(node):
            return node
        if isinstance(node, (ast.Name, ast.Attribute)) and self.into_program(node):
            return self.probe(node)  # a variable the program defines
        if isinstance(node, ast.Call):
            if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
                raise _NotCheckable
            if self.into_program(node):
                # a call into the program: its arguments are the test's inputs, the only part it sees
                return self.probe(node)
            if _dotted(node.func) not in VALUE_CALLS or not self.evaluable_here(node.func):
                raise _NotCheckable
            if _dotted(node.func) == "round" and len(node.args) > 1 and not self.evaluable_here(node.args[1]):
                raise _NotCheckable
            return ast.Call(
                node.func,
                [self.split(a) for a in node.args],
                [ast.keyword(k.arg, self.split(k.value)) for k in node.keywords],
            )
        if isinstance(node, ast.Compare):
            return ast.Compare(self.split(node.left), node.ops, [self.split(c) for c in node.comparators])
        if isinstance(node, ast.BoolOp):
            return ast.BoolOp(node.op, [self.split(v) for v in node.values])
        if isinstance(node, ast.UnaryOp):
            return ast.UnaryOp(node.op, self.split(node.operand))
        if isinstance(node, ast.BinOp) and isinstance(node.op, VALUE_BINOPS):
            return ast.BinOp(self.split(node.left), node.op, self.split(node.right))
        if isinstance(node, ast.Subscript):
            return ast.Subscript(self.split(node.value), self.split(node.slice), ast.Load())
        if isinstance(node, ast.Slice):
            return ast.Slice(
                *(None if part is None else self.split(part) for part in (node.lower, node.upper, node.step))
            )
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return type(node)(
                [self.split(e) for e in node.elts], *([ast.Load()] if not isinstance(node, ast.Set) else [])
            )
        raise _NotCheckable


@lru_cache(maxsize=4096)
def plan_snippet(snippet: str) -> Plan | None:
    """Imports plus asserts over calls into the program, split for judging here; None for any other shape."""
    try:
        tree = ast.parse(snippet)
    except (SyntaxError, ValueError):
        return None
    setup, imported, tests = [], set(), []
    for statement in tree.body:
        if isinstance(statement, (ast.Import, ast.ImportFrom)):
            setup.append(ast.unparse(statement))
            imported |= {(alias.asname or alias.name).split(".")[0] for alias in statement.names}
        elif isinstance(statement, ast.Assert):
            tests.append(statement.test)
        else:
            return None
    splitter = _Splitter(imported)
    try:
        checks = [splitter.split(test) for test in tests]
    except _NotCheckable:
        return None
    if not splitter.probes:
        return None  # nothing calls into the program: run it as written
    return Plan(
        "\n".join(setup),
        tuple(splitter.probes),
        tuple(compile(ast.fix_missing_locations(ast.Expression(check)), "<check>", "eval") for check in checks),
    )


_SEQUENCES = {"l": list, "t": tuple, "s": set, "f": frozenset}


def decode(value, depth: int = 0):
    """The harness's plain-data encoding back to builtin values; ValueError on anything else."""
    if depth > 64:
        raise ValueError("nested too deep")
    if value is None or type(value) in (bool, int, float, str):
        return value
    if type(value) is dict and len(value) == 1:
        ((tag, body),) = value.items()
        if tag in _SEQUENCES and type(body) is list:
            return _SEQUENCES[tag](decode(item, depth + 1) for item in body)
        if tag == "d" and type(body) is list and all(type(pair) is list and len(pair) == 2 for pair in body):
            return {decode(k, depth + 1): decode(v, depth + 1) for k, v in body}
        if tag in ("b", "a") and type(body) is str:
            return (bytes if tag == "b" else bytearray).fromhex(body)
        if tag == "c" and type(body) is list and len(body) == 2 and all(type(x) in (int, float) for x in body):
            return complex(*body)
    raise ValueError("not an encoded value")


def _judge_stdio(expected: str, result) -> bool:
    return (
        type(result) is list
        and len(result) == 2
        and result[0] == "out"
        and type(result[1]) is str
        and result[1].strip() == expected.strip()
    )


def _judge_probes(plan: Plan, result) -> bool:
    if not (
        type(result) is list
        and len(result) == 2
        and result[0] == "values"
        and type(result[1]) is list
        and len(result[1]) == len(plan.probes)
    ):
        return False
    try:
        values = [decode(value) for value in result[1]]
        scope = {"__builtins__": CHECK_NAMES, "math": math, "__probe__": values}
        return all(bool(eval(check, scope)) for check in plan.checks)  # noqa: S307  (the dataset's own expressions)
    except Exception:  # noqa: BLE001  (a value the check cannot handle fails the test)
        return False


def _judge_script(result) -> bool:
    return result == ["ran"]


def _prepare(test) -> tuple[dict, object]:
    """What goes into the sandbox for one test, and the judge of what comes back."""
    global _warned_self_reported
    if isinstance(test, dict):
        return {"kind": "stdio", "input": str(test["input"])}, partial(_judge_stdio, str(test["output"]))
    plan = plan_snippet(test)
    if plan is not None:
        return {"kind": "probe", "setup": plan.setup, "probes": list(plan.probes)}, partial(_judge_probes, plan)
    if not _warned_self_reported:
        _warned_self_reported = True
        log.warning(
            "code reward: a test snippet is not imports + asserts over calls into the program (%r); such "
            "tests run as scripts and pass on the program's own report, which a hostile program can forge",
            test[:200],
        )
    return {"kind": "script", "code": test}, _judge_script


LISTS_ROOT = (
    "import os\ndef lists_root():\n    try:\n        return os.listdir('/') is not None\n"
    "    except OSError:\n        return False"
)


@cache
def check_isolation(isolation: str = "namespaces") -> None:
    """Raise SandboxUnavailable (naming the cause) unless a trivial program runs and passes its test here."""
    try:
        result = execute("x = 1", ["assert x == 1"], Limits(timeout_s=10), isolation)
    except (OSError, SandboxUnavailable) as exc:
        raise SandboxUnavailable(str(exc)) from None
    if result.passed != [True]:
        lines = result.detail.strip().splitlines()
        detail = lines[-1] if lines else (isolation == "namespaces" and _unshare_error()) or result.status
        raise SandboxUnavailable(f"a trivial program did not run under isolation={isolation} ({detail})")
    if isolation == "rlimits":
        user = f"nobody (uid {NOBODY})" if os.geteuid() == 0 else "this user"
        landlock = execute(LISTS_ROOT, ["assert not lists_root()"], Limits(timeout_s=10), isolation).passed == [True]
        reach = (
            "Landlock keeps its reads to the interpreter's files, its writes to its own directory (and, from "
            "Linux 6.7, refuses TCP)"
            if landlock
            else "it can read what that user can and write where it can (this kernel has no Landlock)"
        )
        log.warning(
            "code reward: isolation=rlimits: generated code runs as %s with resource limits only, in the "
            "host's network and process namespaces; %s",
            user,
            reach,
        )
