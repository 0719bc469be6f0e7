# The program that runs model-generated code inside the sandbox (see sandbox.py). It is started as
# `python -I -S -c <this file's text>` and reads one JSON payload on stdin. Standard library only, and
# everything it needs is imported before privileges are dropped: afterwards the interpreter's own
# directory may be unreadable. Everything here is readable and writable by the program it runs, so it is
# never given an expected value: it reports test inputs' outcomes as plain data and sandbox.py judges them.
import ctypes
import io
import json
import os
import resource
import signal
import sys
import traceback

CLONE_NEWUSER = 0x10000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC = 1, 2, 4, 8, 32, 4096, 16384
# kept on remount: a user namespace may not clear them (locked flags), and atime flags count too
MOUNT_FLAGS = {"ro": MS_RDONLY, "nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC,
               "noatime": 1024, "nodiratime": 2048, "relatime": 1 << 21, "strictatime": 1 << 24}
NOBODY = 65534
SCRATCH = ("/tmp", "/var/tmp", "/dev/shm")
libc = ctypes.CDLL(None, use_errno=True)


def _mount(source, target, fstype, flags, data=None):
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    if libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)) != 0:
        raise OSError(ctypes.get_errno(), f"mount {target}: {os.strerror(ctypes.get_errno())}")


def _mounts():
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            yield fields[4].replace("\\040", " "), fields[5].split(",")


def _reach(path):
    """Let an unprivileged user traverse to `path` (an interpreter under /root, say) in this mount namespace."""
    parts = os.path.abspath(path).strip("/").split("/")
    for depth in range(1, len(parts)):
        parent = "/" + "/".join(parts[:depth])
        if os.stat(parent).st_mode & 0o001:
            continue
        child = parent + "/" + parts[depth]
        keep = os.open(child, os.O_PATH)
        _mount("tmpfs", parent, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0755")
        os.mkdir(child)
        _mount(f"/proc/self/fd/{keep}", child, None, MS_BIND | MS_REC)
        os.close(keep)


def isolate(limits, real_root):
    """Fresh tmpfs scratch dirs, every other mount read-only, then no privileges left."""
    # Resolved before /tmp is covered: a venv under /tmp (a CI checkout) links to an interpreter elsewhere.
    interpreter_dirs = {sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    for point in SCRATCH:
        if os.path.isdir(point):
            _mount("tmpfs", point, "tmpfs", MS_NOSUID | MS_NODEV, f"size={limits['disk_mb']}m,mode=1777")
    for prefix in interpreter_dirs:
        if real_root and os.path.exists(prefix):
            _reach(prefix)
    for point, options in _mounts():
        if point in SCRATCH or point.startswith(("/proc", "/sys/fs/cgroup")) or "ro" in options:
            continue
        kept = sum(flag for name, flag in MOUNT_FLAGS.items() if name in options)
        try:
            _mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | kept)
        except OSError as exc:
            if os.path.exists(point):  # a mount left writable is a way out: refuse (setup_failed)
                raise OSError(exc.errno, f"cannot make {point} read-only: {exc.strerror}") from None
    if real_root:
        # uid 0 ignores RLIMIT_NPROC and owns most files: become nobody.
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
    elif libc.unshare(CLONE_NEWUSER) != 0:
        # A nested user namespace leaves no capability over the namespaces set up above.
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWUSER)")


def limit(limits):
    mb = 1024 * 1024
    cpu = max(1, int(limits["cpu_s"]))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_AS, (limits["memory_mb"] * mb,) * 2)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["disk_mb"] * mb,) * 2)
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    resource.setrlimit(resource.RLIMIT_NPROC, (limits["max_procs"],) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


class _TestTimeout(BaseException):
    pass


def _alarm(signum, frame):
    raise _TestTimeout()


# Results leave as plain data only: sandbox.py judges them against expected values that never enter here.
MAX_RESULT_CHARS = 256 * 1024  # one test's encoded result
MAX_REPORT_CHARS = 4 * 1024 * 1024  # all of them (sandbox.py reads at most this much back)
MAX_DEPTH = 64
_SEQUENCES = ((list, "l"), (tuple, "t"), (set, "s"), (frozenset, "f"))


def encode(value, depth=0):
    """`value` as JSON-able plain data; a subclass of a builtin is reduced to the builtin (its overrides go)."""
    if depth > MAX_DEPTH:
        raise ValueError("nested too deep")
    if value is None or type(value) is bool:
        return value
    if isinstance(value, int):
        return int.__index__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, str):
        return str.__str__(value)
    for kind, tag in _SEQUENCES:
        if isinstance(value, kind):
            return {tag: [encode(item, depth + 1) for item in kind.__iter__(value)]}
    if isinstance(value, dict):
        return {"d": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in dict.items(value)]}
    if isinstance(value, (bytes, bytearray)):
        return {"b" if isinstance(value, bytes) else "a": bytes(value).hex()}
    if isinstance(value, complex):
        value = complex(value)
        return {"c": [value.real, value.imag]}
    raise TypeError("not plain data")


def run_test(compiled, test):
    if test["kind"] == "stdio":  # run as a script; the captured stdout is the result
        stdout = io.StringIO()
        sys.stdout, sys.stdin = stdout, io.StringIO(test["input"])
        exec(compiled, {"__name__": "__main__"})
        return ["out", stdout.getvalue()]
    namespace = {"__name__": "__sandbox__"}
    exec(compiled, namespace)
    if test["kind"] == "probe":  # the values the test's asserts compare; the comparisons happen in sandbox.py
        exec(compile(test["setup"], "<test>", "exec"), namespace)
        return ["values", [encode(eval(compile(probe, "<test>", "eval"), namespace)) for probe in test["probes"]]]
    exec(compile(test["code"], "<test>", "exec"), namespace)  # a snippet sandbox.py could not split
    return ["ran"]


def run_tests(code, tests, per_test_s):
    """One JSON text per test, each from a fresh namespace holding the program."""
    results, used = [], 0
    signal.signal(signal.SIGALRM, _alarm)
    compiled = compile(code, "<completion>", "exec")
    for test in tests:
        sys.stdout, sys.stdin = io.StringIO(), io.StringIO()
        try:
            signal.setitimer(signal.ITIMER_REAL, per_test_s)
            try:
                # encoding inside the timer: a huge or endless value costs the program's time
                text = json.dumps(run_test(compiled, test))
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        except BaseException:  # noqa: BLE001  (SystemExit, timeouts and anything the program raises fail the test)
            text = '["error"]'
        if len(text) > MAX_RESULT_CHARS or used + len(text) > MAX_REPORT_CHARS:
            text = '["error"]'
        used += len(text)
        results.append(text)
    return results


def main():
    payload = json.loads(sys.stdin.read())
    token = payload.pop("token")
    result_fd = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    try:
        if payload["isolate"]:
            isolate(payload["limits"], payload["real_root"])
        os.chdir(payload["workdir"])
        limit(payload["limits"])
    except BaseException:  # noqa: BLE001
        os.write(result_fd, f"{token} SETUP {json.dumps(traceback.format_exc()[-800:])}\n".encode())
        os._exit(3)
    results = run_tests(payload["code"], payload["tests"], payload["limits"]["per_test_s"])
    os.write(result_fd, f"{token} [{', '.join(results)}]\n".encode())
    os._exit(0)


main()
