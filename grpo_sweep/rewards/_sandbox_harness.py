# The program that runs model-generated code inside the sandbox (see sandbox.py). It is started as
# `python -I -S -c <this file's text>` and reads one JSON payload on stdin. Standard library only, and
# everything it needs is imported before the new root is built and privileges are dropped. Everything
# here is readable and writable by the program it runs, so it is never given an expected value: it
# reports test inputs' outcomes as plain data and sandbox.py judges them.
import ctypes
import errno
import io
import json
import os
import resource
import signal
import sys
import traceback

CLONE_NEWUSER = 0x10000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC = 1, 2, 4, 8, 32, 4096, 16384
MNT_DETACH = 2
# kept on remount: a user namespace may not clear them (locked flags), and atime flags count too
MOUNT_FLAGS = {
    "ro": MS_RDONLY,
    "nosuid": MS_NOSUID,
    "nodev": MS_NODEV,
    "noexec": MS_NOEXEC,
    "noatime": 1024,
    "nodiratime": 2048,
    "relatime": 1 << 21,
    "strictatime": 1 << 24,
}
# glibc has no pivot_root(); the kernel's number for it on each architecture Python wheels exist for
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203, "ppc64": 203, "s390x": 217}
# What the new root holds of the host: the shared-library directories (the dynamic loader's default search
# path, and what lib-dynload's modules link), a few harmless devices, and the interpreter (see `shown`).
SYSTEM_LIBS = ("/lib", "/lib64", "/lib32", "/libx32", "/usr/lib", "/usr/lib64", "/usr/lib32", "/usr/libx32")
WRITTEN_DEVICES = ("/dev/null", "/dev/zero", "/dev/full")
DEVICES = (*WRITTEN_DEVICES, "/dev/random", "/dev/urandom")
DEV_LINKS = {
    "fd": "/proc/self/fd",
    "stdin": "/proc/self/fd/0",
    "stdout": "/proc/self/fd/1",
    "stderr": "/proc/self/fd/2",
}
SCRATCH = ("/tmp", "/dev/shm")
BUILD = "/tmp"  # where the new root is put together (its host content is never shown: sources are opened first)
libc = ctypes.CDLL(None, use_errno=True)


def _check(result, what):
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def _mount(source, target, fstype, flags, data=None, name=None):
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    what = f"mount {name or source or fstype or 'again'} on {target}"
    _check(libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)), what)


def _mounts():
    """(mount id, mount point, per-mount options) of each mount in this namespace."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            yield fields[0], fields[4].replace("\\040", " "), fields[5].split(",")


def shown():
    """The host directories generated code may read: the interpreter, the standard library (the only entries
    of `sys.path` under -I -S: no site-packages, no project venv), the libraries mapped into this process
    (libpython), the interpreter prefix's lib (what lib-dynload links in a relocatable build: conda's zlib,
    libssl) and the system's shared libraries. Real paths, none inside another."""
    prefixes = {os.path.join(prefix, "lib") for prefix in (sys.base_prefix, sys.base_exec_prefix)}
    paths = {os.path.dirname(sys.executable), *sys.path, *prefixes, *SYSTEM_LIBS}
    with open("/proc/self/maps") as maps:
        mapped = (line.split(None, 5)[5:] for line in maps)
        paths |= {os.path.dirname(name[0].rstrip("\n")) for name in mapped if name and name[0].startswith("/")}
    paths = {os.path.realpath(p) for p in paths if os.path.isdir(p) and not os.path.islink(p)} - {"/"}
    return sorted(p for p in paths if not any(p.startswith(q + "/") for q in paths))


def build_root(limits):
    """A fresh root holding only `shown()` (read-only), fresh /tmp and /dev/shm, a few devices and this PID
    namespace's /proc; the host's root is then detached, so no path leads back to it."""
    # Opened before BUILD is covered: an interpreter or a library can live under /tmp (a CI checkout).
    sources = {path: os.open(path, os.O_PATH) for path in shown() + [d for d in DEVICES if os.path.exists(d)]}
    links = {path: os.readlink(path) for path in SYSTEM_LIBS if os.path.islink(path)}
    new = BUILD
    hidden = {mount for mount, _, _ in _mounts()}  # the host's, some of them under BUILD (covered next)
    _mount("tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
    for point in SCRATCH:
        os.makedirs(new + point)
        _mount("tmpfs", new + point, "tmpfs", MS_NOSUID | MS_NODEV, f"size={limits['disk_mb']}m,mode=1777")
    for path, fd in sources.items():
        if path.startswith("/dev/"):
            open(new + path, "x").close()
        else:
            os.makedirs(new + path, exist_ok=True)
        # recursive: a non-recursive bind of a tree with locked submounts (a GPU driver's files bound into
        # /usr/lib by a container runtime) is refused in a user namespace; each submount is made read-only below
        _mount(f"/proc/self/fd/{fd}", new + path, None, MS_BIND | MS_REC, name=path)
        os.close(fd)  # a descriptor of a host directory left open would lead out of the new root
    for path, target in links.items():
        os.symlink(target, new + path)
    for name, target in DEV_LINKS.items():
        os.symlink(target, f"{new}/dev/{name}")
    os.mkdir(new + "/proc")
    _mount("proc", new + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    writable = [new + point for point in (*SCRATCH, "/proc")]
    for mount, point, options in _mounts():
        if mount not in hidden and point not in writable:  # the new root itself, and what is bound into it
            kept = sum(flag for name, flag in MOUNT_FLAGS.items() if name in options)
            _mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | kept)
    os.chdir(new)
    number = SYS_PIVOT_ROOT.get(os.uname().machine)
    if number is None:
        raise OSError(errno.ENOSYS, f"pivot_root: no syscall number known for {os.uname().machine}")
    _check(libc.syscall(number, b".", b"."), "pivot_root")
    _check(libc.umount2(b".", MNT_DETACH), "detach the host's root")
    os.chdir("/")


def imports_by_descriptor():
    """Keep the standard library importable for a user who cannot reach it by path (an interpreter under
    /root, mode 0700): its directories are opened now and imported through /proc/self/fd, which a process may
    always follow for itself."""
    moved = {
        entry: f"/proc/self/fd/{os.open(entry, os.O_PATH | os.O_DIRECTORY)}"
        for entry in sys.path
        if os.path.isdir(entry)
    }
    sys.path[:] = [moved.get(entry, entry) for entry in sys.path]
    for module in list(sys.modules.values()):  # packages imported already (encodings) import submodules later
        path = getattr(module, "__path__", None)
        if isinstance(path, list):
            path[:] = [
                next((fd + item[len(entry) :] for entry, fd in moved.items() if item.startswith(entry + "/")), item)
                for item in path
            ]


def drop_privileges(drop_to, isolated):
    """Root becomes `drop_to` (nobody: uid 0 ignores RLIMIT_NPROC, writes /etc, sets the hostname); anyone
    else, inside the namespaces, enters a nested user namespace, which leaves no capability over them."""
    if drop_to is not None:
        if not isolated:
            imports_by_descriptor()
        try:
            os.setgroups([])
            os.setgid(drop_to)
            os.setuid(drop_to)
        except OSError as exc:
            raise OSError(
                exc.errno,
                f"cannot drop from root to uid {drop_to} (nobody): {exc.strerror}; allow it "
                "(CAP_SETUID, CAP_SETGID) or run as another user",
            ) from None
    elif isolated:
        _check(libc.unshare(CLONE_NEWUSER), "unshare(CLONE_NEWUSER)")


# Landlock (Linux 5.13+, no privilege needed): one syscall number on every architecture.
LANDLOCK_CREATE_RULESET, LANDLOCK_ADD_RULE, LANDLOCK_RESTRICT_SELF = 444, 445, 446
PR_SET_NO_NEW_PRIVS = 38
# filesystem rights by ABI version (1: execute .. make_sym; 2: refer; 3: truncate; 5: ioctl on devices)
FS_RIGHTS = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}
FS_READ = 1 | 4 | 8  # execute, read a file, read a directory
FS_FILE = 1 | 2 | 4 | (1 << 14) | (1 << 15)  # those that apply to a file (a device) rather than a directory
NET_TCP = 1 | 2  # bind, connect (ABI 4)
SCOPES = 1 | 2  # abstract unix sockets and signals outside the sandbox (ABI 6)


class _Ruleset(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_rules(readable, writable):
    """(descriptor, is a directory, rights or None for all) per path, opened while every path can still be
    reached (before privileges drop)."""
    return [
        (os.open(path, os.O_PATH), os.path.isdir(path), rights)
        for paths, rights in ((readable, FS_READ), (writable, None))
        for path in paths
    ]


def confine(rules):
    """Where the kernel has Landlock: reads only beneath the readable paths, writes only beneath the writable
    ones, and (by ABI version) no TCP, no signal or abstract socket outside the sandbox; else nothing."""
    abi = libc.syscall(LANDLOCK_CREATE_RULESET, None, 0, 1)  # LANDLOCK_CREATE_RULESET_VERSION
    if abi < 1:
        return
    fs = FS_RIGHTS[max(v for v in FS_RIGHTS if v <= abi)]
    ruleset = _Ruleset(fs, NET_TCP if abi >= 4 else 0, SCOPES if abi >= 6 else 0)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    fd = libc.syscall(LANDLOCK_CREATE_RULESET, ctypes.byref(ruleset), size, 0)
    _check(0 if fd >= 0 else -1, "landlock_create_ruleset")
    for target, is_dir, rights in rules:
        allowed = (fs if rights is None else rights) & fs & (-1 if is_dir else FS_FILE)
        _check(
            libc.syscall(LANDLOCK_ADD_RULE, fd, 1, ctypes.byref(_PathBeneath(allowed, target)), 0),
            f"landlock_add_rule {os.readlink(f'/proc/self/fd/{target}')}",
        )
        os.close(target)
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    _check(libc.syscall(LANDLOCK_RESTRICT_SELF, fd, 0), "landlock_restrict_self")
    os.close(fd)


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
            build_root(payload["limits"])
        else:  # no new root: Landlock, where the kernel has it, shows about as little
            devices = [device for device in DEVICES if os.path.exists(device)]
            rules = landlock_rules(shown() + devices, [payload["workdir"], *set(devices) & set(WRITTEN_DEVICES)])
        os.chdir(payload["workdir"])
        drop_privileges(payload["drop_to"], payload["isolate"])
        if not payload["isolate"]:
            confine(rules)
        limit(payload["limits"])
    except BaseException:  # noqa: BLE001
        os.write(result_fd, f"{token} SETUP {json.dumps(traceback.format_exc()[-800:])}\n".encode())
        os._exit(3)
    results = run_tests(payload["code"], payload["tests"], payload["limits"]["per_test_s"])
    os.write(result_fd, f"{token} [{', '.join(results)}]\n".encode())
    os._exit(0)


main()
