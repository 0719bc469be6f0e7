"""Adversarial completions for the code reward: programs written to earn reward without solving the task,
and programs that attack the machine they run on.

Each attack program scores 0 (against tests that an honest program passes, see the positive cases); the
sandbox's own attacks (reading the host's files, root's powers under isolation=rlimits) each fail; the
hard-coding case documents what the reward cannot see: the visible tests' answers.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from grpo_sweep.rewards import REWARDS
from grpo_sweep.rewards.sandbox import Limits, check_isolation, decode, execute, plan_snippet

from .conftest import ROOT

code_reward = REWARDS["code"]

ADD = ["assert add(1, 2) == 3", "assert add(-1, 1) == 0", "assert add(2, 2) == 4"]
MIXED = ["assert add(1, 2) == 3", "assert not add(1, 2) != 3", "assert add(2, 2)", "assert add(2, 2) is not None"]
PAIR = ["assert pair(1) == [1, 1]", "assert pair(2) == [2, 2]"]
GREET = ["assert greet('ann') == 'hello ann'", "assert greet('bo') == 'hello bo'"]
FIB = ["assert fib(10) == 55", "assert fib(20) == 6765", "assert fib(15) == 610"]
AREA = ["assert math.isclose(area(2), 12.566, rel_tol=0.001)", "assert abs(area(1) - 3.1416) < 0.001"]
COMMON = ["assert set(common([1, 2, 3], [2, 3, 4])) == set([2, 3])", "assert sorted(common([5], [5]))[:1] == [5]"]
FREQ = ["assert freq('aab') == {'a': 2, 'b': 1}"]
# A stdin/stdout task whose expected output is a string no program could guess: only reading it can earn it.
STDIO = [{"input": "ping", "output": "zq-7c1e-pong"}, {"input": "3", "output": "6"}]

HONEST = {
    "add": ("def add(a, b):\n    return a + b", ADD),
    "add, mixed assert shapes": ("def add(a, b):\n    return a + b", MIXED),
    "pair returns a list": ("def pair(x):\n    return [x, x]", PAIR),
    "greet": ("def greet(n):\n    return 'hello ' + n", GREET),
    "fib": ("def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a", FIB),
    "area with math.isclose / abs": ("import math\ndef area(r):\n    return math.pi * r * r", AREA),
    "common through set() and sorted()[:1]": ("def common(a, b):\n    return [x for x in a if x in b]", COMMON),
    "Counter compared with a dict": ("from collections import Counter\ndef freq(s):\n    return Counter(s)", FREQ),
    "stdin/stdout": ("s = input()\nprint('zq-7c1e-pong' if s == 'ping' else int(s) * 2)", STDIO),
}

FORGE_VIA_FRAMES = """
import sys, os, re
f = sys._getframe()
while f is not None:
    for value in list(f.f_locals.values()):
        if isinstance(value, str) and re.fullmatch("[0-9a-f]{32}", value):
            for line in ("[true, true, true]", '[["ran"], ["ran"], ["ran"]]'):
                for fd in range(3, 64):
                    try:
                        os.write(fd, (value + " " + line + "\\n").encode())
                    except OSError:
                        pass
            os._exit(0)
    f = f.f_back
def add(a, b): return -99
"""
PAYLOAD_VIA_FRAMES = """
import sys
q = sys.stdin.read().strip()
f = sys._getframe()
while f is not None:
    for v in list(f.f_locals.values()):
        for t in (v.get("tests") if isinstance(v, dict) else None) or []:
            if isinstance(t, dict) and t.get("input", "").strip() == q and "output" in t:
                print(t["output"])
    f = f.f_back
"""
PAYLOAD_VIA_GC = """
import gc, re
TABLE = {}
for o in gc.get_objects():
    if isinstance(o, (list, dict)):
        for a, e in re.findall(r"fib\\((\\d+)\\) == (\\d+)", str(o)[:100000]):
            TABLE[int(a)] = int(e)
def fib(n): return TABLE.get(n)
"""
SCAN_OWN_MEMORY = """
import re
found = set()
with open("/proc/self/maps") as maps, open("/proc/self/mem", "rb", 0) as mem:
    for line in maps:
        span, perms = line.split()[:2]
        lo, hi = (int(x, 16) for x in span.split("-"))
        if "r" in perms and hi - lo < 64 << 20:
            try:
                mem.seek(lo)
                found.update(re.findall(rb"zq-[0-9a-f]{4}-pong", mem.read(hi - lo)))
            except (OSError, OverflowError, ValueError):
                pass
print(*sorted(hit.decode() for hit in found))
"""
ALWAYS_EQUAL = (
    "class A:\n    __eq__ = lambda s, o: True\n    __ne__ = lambda s, o: False\n    __bool__ = lambda s: True\n"
    "    __hash__ = object.__hash__\n"
)

# name: (program, tests). Each earns 0.
ATTACKS = {
    "__eq__ always true": (ALWAYS_EQUAL + "def add(a, b): return A()", ADD),
    "__eq__/__ne__/__bool__ on mixed asserts": (ALWAYS_EQUAL + "def add(a, b): return A()", MIXED),
    "int subclass __eq__": (
        "class I(int):\n    __eq__ = lambda s, o: True\n    __hash__ = int.__hash__\ndef add(a, b): return I(-99)",
        ADD,
    ),
    "str subclass __eq__": (
        "class S(str):\n    __eq__ = lambda s, o: True\n    __hash__ = str.__hash__\ndef greet(n): return S('nope')",
        GREET,
    ),
    "list subclass __eq__": ("class L(list):\n    __eq__ = lambda s, o: True\ndef pair(x): return L()", PAIR),
    "dict subclass __eq__": ("class D(dict):\n    __eq__ = lambda s, o: True\ndef freq(s): return D()", FREQ),
    "fake __class__ claims int": (
        "class F:\n    __class__ = property(lambda s: int)\n    __eq__ = lambda s, o: True\n"
        "    __hash__ = object.__hash__\ndef add(a, b): return F()",
        ADD,
    ),
    "shadow set() used by the test": ("def set(*a): return 1\ndef common(a, b): return []", COMMON[:1]),
    "fake math module": (
        "import types\nmath = types.SimpleNamespace(isclose=lambda *a, **k: True)\ndef area(r): return 0.0",
        AREA[:1],
    ),
    "patch builtins.abs": ("import builtins\nbuiltins.abs = lambda x: 0\ndef area(r): return 0.0", AREA[1:]),
    "sys.exit(0) at import": ("import sys\nsys.exit(0)\ndef add(a, b): return -99", ADD),
    "raise SystemExit in the function": ("def add(a, b):\n    raise SystemExit(0)", ADD),
    "os._exit(0) in the function": ("import os\ndef add(a, b):\n    os._exit(0)", ADD),
    "quit()": ("def add(a, b):\n    quit()", ADD),
    "rebind AssertionError": (
        "import builtins\nbuiltins.AssertionError = type('Nope', (Exception,), {})\ndef add(a, b): return -99",
        ADD,
    ),
    "rebind BaseException": (
        "import builtins\nbuiltins.BaseException = type('Nope', (Exception,), {})\ndef add(a, b): return -99",
        ADD,
    ),
    "patch builtins.isinstance": (
        "import builtins\nbuiltins.isinstance = lambda *a: True\ndef add(a, b): return -99",
        ADD,
    ),
    "patch json.dumps (the report)": (
        "import json\njson.dumps = lambda *a, **k: '[true, true, true]'\ndef add(a, b): return -99",
        ADD,
    ),
    "forge the report with the token from frames": (FORGE_VIA_FRAMES, ADD),
    "caller's constants as an oracle": (
        "import sys\ndef fib(n):\n    consts = sys._getframe(1).f_code.co_consts\n"
        "    return [c for c in consts if isinstance(c, int) and c != n][-1]",
        FIB,
    ),
    "tests from the harness's frames (stdio)": (PAYLOAD_VIA_FRAMES, STDIO),
    "tests from gc.get_objects()": (PAYLOAD_VIA_GC, FIB),
    "expected output from /proc/self/mem (stdio)": (SCAN_OWN_MEMORY, STDIO),
    "replace sys.stdout (stdio)": (
        "import sys, io\nclass W(io.StringIO):\n    def getvalue(self): return 'zq-7c1e-pong'\nsys.stdout = W()",
        STDIO,
    ),
    "atexit and __del__ print a pass": (
        "import atexit, os\natexit.register(lambda: os.write(1, b'[true, true, true]\\n'))\nclass D:\n"
        "    def __del__(self): print('passed')\nd = D()\ndef add(a, b): return -99",
        ADD,
    ),
    "cyclic value": ("def add(a, b):\n    x = []\n    x.append(x)\n    return x", ADD),
    "fork: a child lingers": (
        "import os, time\nif os.fork() == 0:\n    time.sleep(30)\ndef add(a, b): return -99",
        ADD,
    ),
    "fork bomb": ("import os\nwhile True:\n    os.fork()", ADD),
    "catch the timeout, return garbage": (
        "def add(a, b):\n    try:\n        while True:\n            pass\n    except BaseException:\n"
        "        return None",
        ADD,
    ),
    "ignore SIGALRM and loop": (
        "import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\ndef add(a, b):\n    while True:\n        pass",
        ADD,
    ),
}


def score(program: str, tests: list, **params) -> float:
    params = {"timeout_s": 2.0, "per_test_s": 1.0, "memory_mb": 256, **params}
    return code_reward(completions=[f"```python\n{program}\n```"], tests=[tests], **params)[0]


@pytest.mark.parametrize("name", HONEST)
def test_honest_programs_earn_full_reward(name):
    program, tests = HONEST[name]
    assert score(program, tests) == 1.0


# attacks on the time limit itself: a shorter limit tests the same thing in a third of the time (any other attack
# keeps the full limit, so that a time-out never hides what it would reach with more time)
ON_THE_TIME_LIMIT = {"catch the timeout, return garbage", "ignore SIGALRM and loop"}


@pytest.mark.parametrize("name", ATTACKS)
def test_attacks_earn_nothing(name):
    program, tests = ATTACKS[name]
    limits = {"timeout_s": 0.8, "per_test_s": 0.3} if name in ON_THE_TIME_LIMIT else {}
    assert score(program, tests, **limits) == 0.0


def test_python_semantics_of_plain_values_are_kept():
    # as in plain Python: 1 == True and 4 == 4.0 hold, a tuple is not a list
    assert score("def f(x): return 1", ["assert f(0) == True", "assert f(0) - 1 == 0"]) == 1.0
    assert score("def f(x): return 4", ["assert f(0) == 4.0", "assert f(0) is not None"]) == 1.0
    assert score("def pair(x): return (x, x)", PAIR) == 0.0


def test_one_oversized_value_fails_only_its_own_test():
    program = "def add(a, b):\n    return 'x' * 10**7 if a == 1 else a + b"
    assert score(program, ADD) == pytest.approx(2 / 3)


def test_only_inputs_enter_the_sandbox():
    plan = plan_snippet("import math\nassert math.isclose(area(2), 12.566, rel_tol=0.001) and area(0) == 0")
    assert plan.setup == "import math" and plan.probes == ("area(2)", "area(0)")
    # names the test imports (other than math) or anything but calls into the program: not split
    assert plan_snippet("from collections import Counter\nassert f('ab') == Counter('ab')") is None
    assert plan_snippet("assert f(1).startswith('a')") is None
    assert plan_snippet("assert f(1) * 10**9 == 3") is None  # no unbounded arithmetic on returned values here
    assert plan_snippet("assert len('abc') == 3") is None  # never calls the program: runs as written


def test_decode_accepts_only_plain_encodings():
    assert decode({"t": [1, {"l": ["a"]}, {"s": [2]}]}) == (1, ["a"], {2})
    assert decode({"d": [[{"f": [1]}, None]]}) == {frozenset([1]): None}
    for bad in ({"x": []}, {"l": 1}, {"d": [[1]]}, {"l": [], "t": []}):
        with pytest.raises(ValueError):
            decode(bad)


def test_script_snippets_still_run_and_are_flagged(caplog):
    loop = "for i in range(3):\n    assert add(i, i) == 2 * i"
    with caplog.at_level(logging.WARNING):
        good = execute("def add(a, b): return a + b", [loop, ADD[0]], Limits(timeout_s=3))
    assert good.passed == [True, True] and good.self_reported == 1
    assert execute("def add(a, b): return -99", [loop], Limits(timeout_s=3)).score == 0.0


def test_hard_coding_the_visible_tests_is_not_detected():
    """A property of the test set, not of the sandbox: prompts that show the asserts invite this."""
    table = "def add(a, b):\n    return {(1, 2): 3, (-1, 1): 0, (2, 2): 4}[(a, b)]"
    assert score(table, ADD) == 1.0
    assert score(table, ["assert add(5, 5) == 10"]) == 0.0  # held-out tests are the cure


# ---- the sandbox against the machine it runs on ----------------------------------------------------------------

SEES = (
    "import os\ndef seen(path):\n    if not os.path.exists(path):\n        return 0\n    try:\n"
    "        os.listdir(path) if os.path.isdir(path) else open(path, 'rb').close()\n        return 2\n"
    "    except OSError:\n        return 1"
)


def unseen(paths: list[str], isolation: str = "namespaces") -> dict[str, bool]:
    """For each path: True when the sandboxed program cannot read it (namespaces: cannot even tell it exists)."""
    most = 0 if isolation == "namespaces" else 1
    result = execute(SEES, [f"assert seen({path!r}) <= {most}" for path in paths], Limits(timeout_s=5), isolation)
    assert result.status == "ok", result
    return dict(zip(paths, result.passed))


def landlock_abi() -> int:
    """The kernel's Landlock version (landlock_create_ruleset with LANDLOCK_CREATE_RULESET_VERSION), 0 for none."""
    import ctypes

    return max(0, ctypes.CDLL(None).syscall(444, None, 0, 1))


@pytest.fixture(params=["tmp", "checkout"])
def dataset(request, tmp_path):
    """The run's data.path, with its expected outputs: under a temp dir, or inside the checkout (data/...)."""
    with tempfile.TemporaryDirectory(dir=tmp_path if request.param == "tmp" else ROOT, prefix=".data-") as where:
        path = Path(where) / "mbpp.jsonl"
        path.write_text('{"prompt": "add", "tests": ["assert add(1, 2) == 3"]}\n')
        yield str(path)


@pytest.mark.parametrize("isolation", ["namespaces", "rlimits"])
def test_the_program_sees_none_of_the_hosts_files(dataset, isolation):
    if isolation == "rlimits" and not landlock_abi():
        pytest.skip("isolation=rlimits confines reads with Landlock, which this kernel does not have")
    paths = [dataset, str(ROOT), str(ROOT / ".git"), str(ROOT / "pyproject.toml"), "/etc/passwd", "/etc", "/home"]
    if sys.prefix != sys.base_prefix:
        paths.append(sys.prefix)  # the project's venv: its site-packages are not the program's to import
    assert unseen(paths, isolation) == {path: True for path in paths}


ORDINARY = """
import bisect, collections, datetime, decimal, fractions, functools, hashlib, heapq, itertools, json, math, random, re
import os, statistics, string, tempfile
words = input().split()
scratch = os.path.join(tempfile.gettempdir(), "scratch.json")  # /tmp; under rlimits its own directory
with open(scratch, "w") as f:
    json.dump(collections.Counter(words), f)
with open(scratch) as f:
    counts = json.load(f)
print(max(counts, key=counts.get), math.isqrt(len(words) ** 2), sorted(heapq.nsmallest(2, map(len, words))),
      "é".encode("cp1252"))
"""


@pytest.mark.parametrize("isolation", ["namespaces", "rlimits"])
def test_ordinary_programs_still_run(isolation):
    """The standard library imports (a codec too), the temp dir is writable, stdout comes back."""
    assert score(ORDINARY, [{"input": "a bb a ccc", "output": "a 4 [1, 1] b'\\xe9'"}], isolation=isolation) == 1.0


def test_the_program_sees_none_of_the_hosts_shared_memory():
    """System V IPC is per IPC namespace: a segment anyone may open on the host is not there inside."""
    import ctypes
    import secrets

    libc = ctypes.CDLL(None, use_errno=True)
    key = secrets.randbits(30) + 1
    segment = libc.shmget(key, 4096, 0o1000 | 0o666)  # IPC_CREAT, readable and writable by all
    assert segment != -1, os.strerror(ctypes.get_errno())
    try:
        program = f"import ctypes\ndef sees():\n    return ctypes.CDLL(None).shmget({key}, 0, 0) != -1"
        assert execute(program, ["assert not sees()"], Limits(timeout_s=5)).passed == [True]
    finally:
        libc.shmctl(segment, 0, None)  # IPC_RMID


def test_rlimits_refuses_tcp_where_landlock_can():
    import socket

    if landlock_abi() < 4:
        pytest.skip("this kernel's Landlock has no TCP rules (Linux 6.7+)")
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(0.5)
        port = server.getsockname()[1]
        program = (
            f"import socket\ndef reached():\n    try:\n        socket.create_connection(('127.0.0.1', {port}), 1)\n"
            "        return True\n    except OSError:\n        return False"
        )
        assert execute(program, ["assert not reached()"], Limits(timeout_s=5), "rlimits").passed == [True]
        with pytest.raises(socket.timeout):
            server.accept()


def test_a_user_other_than_root_sees_the_same_minimal_root(dataset):
    """Not root: the user namespace path (mounts locked by the kernel, a nested user namespace at the end)."""
    python = shutil.which("python3", path="/usr/bin:/bin")
    if os.geteuid() != 0 or shutil.which("setpriv") is None or python is None:
        pytest.skip("needs root (to become another user), setpriv and a system python3")
    paths = [dataset, str(ROOT), "/etc/passwd", "/home"]
    script = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('sandbox', {str(ROOT / 'grpo_sweep/rewards/sandbox.py')!r})\n"
        "sandbox = importlib.util.module_from_spec(spec)\nsys.modules['sandbox'] = sandbox\n"
        "spec.loader.exec_module(sandbox)\n"
        f"tests = [f'assert seen({{path!r}}) == 0' for path in {paths!r}] + ['assert seen(\"/tmp\") == 2']\n"
        f"result = sandbox.execute({SEES!r}, tests, sandbox.Limits(timeout_s=5))\n"
        "print(result.status, result.passed, result.detail.strip().splitlines()[-1:])"
    )
    os.chmod(Path(dataset).parent, 0o755)  # readable by that user too: what hides it is the sandbox
    Path(dataset).chmod(0o644)
    out = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", python, "-I", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
        env={"PATH": "/usr/bin:/bin"},
    )
    if "Permission denied" in out.stderr:
        pytest.skip(f"the checkout is not readable by uid 65534 ({out.stderr.strip().splitlines()[-1]})")
    assert out.stdout.strip() == f"ok {[True] * (len(paths) + 1)} []", out


# What root may do and nobody may not. Under isolation=rlimits as root each worked before the sandbox
# became nobody (uid 65534); under namespaces root has always become nobody.
PROBE = "grpo-sandbox-probe-written"
ROOT_ATTACKS = {
    "write /etc": f"open('/etc/{PROBE}', 'w').write('x')",
    "write the checkout": f"open({str(ROOT / PROBE)!r}, 'w').write('x')",
    "set the hostname (to itself)": "import socket\nsocket.sethostname(socket.gethostname())",
    "read a file only root may read": "open({secret!r}).read()",
    "signal a process of root's": "import os\nos.kill({pid}, 0)",
    "fork past max_procs (16)": (
        "import os, time\nfor _ in range(200):\n    if os.fork() == 0:\n        time.sleep(2)\n        os._exit(0)"
    ),
}


def attack_program(action: str) -> str:
    """`attack()` is True when `action` ran to its end, False when the system refused it."""
    body = "\n".join("        " + line for line in action.splitlines())
    return f"def attack():\n    try:\n{body}\n        return True\n    except OSError:\n        return False"


@pytest.mark.skipif(os.geteuid() != 0, reason="root's powers: only root has them to lose")
@pytest.mark.parametrize("isolation", ["rlimits", "namespaces"])
@pytest.mark.parametrize("name", ROOT_ATTACKS)
def test_root_runs_generated_code_as_nobody(name, isolation, tmp_path):
    check_isolation(isolation)
    secret = tmp_path / "only-root"
    secret.write_text("x")
    secret.chmod(0o600)
    program = attack_program(ROOT_ATTACKS[name].format(secret=str(secret), pid=os.getpid()))
    try:
        result = execute(program, ["assert not attack()"], Limits(timeout_s=5, per_test_s=4), isolation)
        assert (result.status, result.passed) == ("ok", [True])
        assert not (ROOT / PROBE).exists() and not Path("/etc", PROBE).exists()
    finally:
        for path in (ROOT / PROBE, Path("/etc", PROBE)):
            path.unlink(missing_ok=True)


def refusal_without(capabilities: str, isolation: str) -> str:
    """What check_isolation refuses with, run as root without `capabilities` (dropped by setpriv)."""
    check = (
        "from grpo_sweep.rewards.sandbox import SandboxUnavailable, check_isolation\n"
        f"try:\n    check_isolation({isolation!r})\nexcept SandboxUnavailable as exc:\n    print(exc)"
    )
    out = subprocess.run(
        ["setpriv", f"--bounding-set={capabilities}", "--", sys.executable, "-c", check],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.stdout.count("\n") == 1, out  # one line
    return out.stdout


needs_setpriv = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None, reason="root, and setpriv to drop capabilities"
)


@needs_setpriv
def test_root_that_cannot_become_nobody_is_refused_in_one_line():
    assert "cannot drop from root to uid 65534 (nobody)" in refusal_without("-setuid,-setgid", "rlimits")


@needs_setpriv
def test_where_namespaces_cannot_be_created_the_refusal_says_why():
    """A container without CAP_SYS_ADMIN (Docker's default): unshare's own reason, not just `crashed`."""
    assert "unshare failed: Operation not permitted" in refusal_without("-sys_admin", "namespaces")
