# The program that runs model-generated code inside the sandbox (see sandbox.py). It is started as
# `python -I -S -c <this file's text>` and reads one JSON payload on stdin. Standard library only, and
# everything it needs is imported before privileges are dropped: afterwards the interpreter's own
# directory may be unreadable.
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


def run_tests(code, tests, per_test_s):
    """One bool per test: each test in a fresh namespace holding the program."""
    results = []
    signal.signal(signal.SIGALRM, _alarm)
    compiled = compile(code, "<completion>", "exec")
    for test in tests:
        stdout = io.StringIO()
        sys.stdout, sys.stdin = stdout, io.StringIO(test.get("input", "") if isinstance(test, dict) else "")
        passed = False
        signal.setitimer(signal.ITIMER_REAL, per_test_s)
        try:
            if isinstance(test, dict):  # stdin/stdout test: run as a script, compare output
                exec(compiled, {"__name__": "__main__"})
                passed = stdout.getvalue().strip() == str(test["output"]).strip()
            else:  # a Python snippet (asserts) run after the program
                namespace = {"__name__": "__sandbox__"}
                exec(compiled, namespace)
                exec(compile(test, "<test>", "exec"), namespace)
                passed = True
        except BaseException:  # noqa: BLE001  (SystemExit, timeouts and anything the program raises fail the test)
            passed = False
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        results.append(passed)
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
    os.write(result_fd, f"{token} {json.dumps(results)}\n".encode())
    os._exit(0)


main()
