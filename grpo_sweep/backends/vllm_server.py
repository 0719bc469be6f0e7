"""One run's generation server for TRL's ``vllm_mode="server"``: ports, command, start, health wait, hand-over, stop.

``serving(spec, run_dir)`` is a context manager: it picks two free ports (the HTTP port and the port of TRL's
weight-sync group), starts ``trl vllm-serve`` in its own process group with its output in
``run_dir/vllm_server.log``, waits until ``GET /health`` answers 200 (the endpoint TRL's ``VLLMClient.check_server``
polls), yields the ``GRPOConfig`` fields that point the trainer at it, and stops the whole process group on the
way out (normal exit, an exception, SIGTERM). A server that exits or does not come up raises ``ServerError`` in one
line naming the exit code or the timeout and the log's last lines.

Light on purpose (standard library only): the command is injectable, so the tests run the same start, wait and
stop path against a stand-in server on loopback, and nothing here needs vLLM or a GPU.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

HEALTH_PATH = "/health"  # trl/generation/vllm_client.py, VLLMClient.check_server (TRL 1.14.2)
LOG_NAME = "vllm_server.log"
TAIL_LINES = 5
TAIL_CHARS = 600
# Ports of every run on this machine are claimed here (node-local: ports are per machine).
DEFAULT_LOCK_DIR = Path(tempfile.gettempdir()) / "grpo-sweep-ports"


class ServerError(RuntimeError):
    """The generation server did not come up or could not be stopped; the message is one line."""


@dataclass(frozen=True)
class ServerSpec:
    """What to serve and where. Field names follow ``trl vllm-serve``'s ScriptArguments where they are its flags."""

    model: str
    tensor_parallel_size: int = 1
    data_parallel_size: int = 1
    # CUDA_VISIBLE_DEVICES for the server (numbers or UUIDs); None leaves the environment's
    gpus: Sequence[int | str] | None = None
    # The server and the trainer share a node here, so loopback; a server on another node binds 0.0.0.0 and is
    # reached through connect_host.
    host: str = "127.0.0.1"
    connect_host: str | None = None
    gpu_memory_utilization: float = 0.9
    max_model_len: int | None = None
    extra_args: Sequence[str] = field(default_factory=tuple)
    startup_timeout_s: float = 600.0  # a 7B+ model's load and CUDA graph capture take minutes
    # Under SLURM's default KillWait (30 s), so the escalation to SIGKILL is ours, not the job step's end.
    stop_grace_s: float = 20.0


@dataclass(frozen=True)
class Ports:
    http: int
    group: int


def trl_serve_command(spec: ServerSpec, port: int) -> list[str]:
    """The ``trl vllm-serve`` command line for ``spec`` on ``port``.

    Run as ``python -m trl.scripts.vllm_serve``: the same ScriptArguments parser as the ``trl vllm-serve``
    subcommand, without depending on the ``trl`` script being on a compute node's PATH.
    """
    command = [
        sys.executable,
        "-m",
        "trl.scripts.vllm_serve",
        "--model",
        spec.model,
        "--tensor_parallel_size",
        str(spec.tensor_parallel_size),
        "--data_parallel_size",
        str(spec.data_parallel_size),
        "--host",
        spec.host,
        "--port",
        str(port),
        "--gpu_memory_utilization",
        str(spec.gpu_memory_utilization),
    ]
    if spec.max_model_len is not None:
        command += ["--max_model_len", str(spec.max_model_len)]
    return command + list(spec.extra_args)


def server_env(spec: ServerSpec, base: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    if spec.gpus is not None:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in spec.gpus)
    return env


class _PortClaims:
    """Free ports that no other run on this machine holds, kept until ``release``.

    The server binds its port itself, so this process cannot hold the socket (bind-to-0-and-hold would make the
    server's own bind fail). Instead the kernel picks a free port (bind to 0), and an exclusive ``flock`` on
    ``<lock_dir>/<port>.lock`` claims it for this run until the server stops: two runs of a sweep on one machine
    never get the same port even if the kernel offers it twice. flock is released by the kernel when the process
    dies, so a killed run leaves no stale claim. A process outside grpo-sweep can still take the port in the gap;
    the server then exits at once and the run fails in one line with the server's log.
    """

    def __init__(self, lock_dir: Path):
        self.lock_dir = Path(lock_dir)
        self._held: dict[int, int] = {}  # port -> lock file descriptor

    def claim(self, host: str, attempts: int = 50) -> int:
        self.lock_dir.mkdir(parents=True, exist_ok=True)
        for _ in range(attempts):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
                probe.bind((host, 0))
                port = probe.getsockname()[1]
            if port in self._held:
                continue
            fd = os.open(self.lock_dir / f"{port}.lock", os.O_CREAT | os.O_RDWR, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                if exc.errno in (errno.EAGAIN, errno.EACCES):
                    continue  # another run holds it
                raise
            self._held[port] = fd
            return port
        raise ServerError(f"no free port on {host} after {attempts} tries (claims in {self.lock_dir})")

    def release(self) -> None:
        for fd in self._held.values():
            os.close(fd)
        self._held.clear()


def _tail(log_path: Path) -> str:
    try:
        with open(log_path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 64 * 1024))
            lines = fh.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return "(no log)"
    tail = " | ".join(line.strip() for line in lines[-TAIL_LINES:] if line.strip())
    return tail[-TAIL_CHARS:] if tail else "(empty log)"


def _healthy(url: str, timeout: float) -> bool:
    # No proxy: the server is on this machine or the allocation's network, never behind an HTTP proxy.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=timeout) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


class VLLMServer:
    """A started server: ``grpo_fields`` for GRPOConfig, ``stop()`` (idempotent)."""

    def __init__(
        self,
        spec: ServerSpec,
        run_dir: Path,
        *,
        command: Callable[[ServerSpec, int], list[str]] | None,
        lock_dir: Path,
        poll_s: float = 0.2,
    ):
        self.spec = spec
        self.log_path = Path(run_dir) / LOG_NAME
        self._command = command or trl_serve_command
        self._claims = _PortClaims(lock_dir)
        self._poll_s = poll_s
        self.proc: subprocess.Popen | None = None
        self.ports: Ports | None = None

    @property
    def url(self) -> str:
        assert self.ports is not None
        return f"http://{self.spec.connect_host or self.spec.host}:{self.ports.http}"

    @property
    def grpo_fields(self) -> dict:
        """The GRPOConfig fields (TRL 1.14.2 names) that point the trainer at this server."""
        assert self.ports is not None
        return {
            "use_vllm": True,
            "vllm_mode": "server",
            "vllm_server_host": self.spec.connect_host or self.spec.host,
            "vllm_server_port": self.ports.http,
            "vllm_group_port": self.ports.group,
            # The trainer's own check only confirms what start() already waited for.
            "vllm_server_timeout": 60.0,
        }

    def start(self) -> VLLMServer:
        try:
            # The group port is bound by the trainer (rank 0 of the NCCL weight-sync group, VLLMClient.
            # init_communicator) on this machine, so it is claimed here alongside the HTTP port.
            self.ports = Ports(http=self._claims.claim(self.spec.host), group=self._claims.claim(self.spec.host))
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.log_path, "ab") as log:
                # Its own session (and so process group): stop() signals the server and every worker it spawned,
                # and a Ctrl-C on the terminal reaches the trainer, which then stops the server itself.
                self.proc = subprocess.Popen(
                    self._command(self.spec, self.ports.http),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=server_env(self.spec),
                    start_new_session=True,
                )
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_healthy(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + self.spec.startup_timeout_s
        health = self.url + HEALTH_PATH
        while True:
            code = self.proc.poll()
            if code is not None:
                raise ServerError(
                    f"vLLM server exited with code {code} before {health} answered; "
                    f"log {self.log_path}: {_tail(self.log_path)}"
                )
            if _healthy(health, timeout=min(5.0, max(self._poll_s, 0.5))):
                return
            if time.monotonic() >= deadline:
                raise ServerError(
                    f"vLLM server not healthy at {health} after {self.spec.startup_timeout_s:g}s "
                    f"(startup_timeout_s); log {self.log_path}: {_tail(self.log_path)}"
                )
            time.sleep(self._poll_s)

    def stop(self) -> None:
        """SIGTERM to the server's process group, SIGKILL after ``stop_grace_s``; then the ports are free."""
        proc, self.proc = self.proc, None
        try:
            if proc is not None and proc.poll() is None:
                _signal_group(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=self.spec.stop_grace_s)
                except subprocess.TimeoutExpired:
                    _signal_group(proc.pid, signal.SIGKILL)
                    proc.wait()
            if proc is not None:
                # Workers that outlived the leader (it exited on its own) still hold GPUs: end them too, and wait
                # until they are gone, so what runs next (the final evaluation) finds their GPU memory free.
                _signal_group(proc.pid, signal.SIGKILL)
                deadline = time.monotonic() + self.spec.stop_grace_s
                while _group_running(proc.pid) and time.monotonic() < deadline:
                    time.sleep(0.05)
        finally:
            self._claims.release()


def _group_running(pgid: int) -> bool:
    """Whether a process of group ``pgid`` has not exited yet (Linux /proc; a zombie has freed its memory and
    devices). A killed process stays in the group until the kernel has torn it down."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            after_name = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if int(after_name[2]) == pgid and after_name[0] != "Z":  # fields 3 and 5 of proc(5): state, pgrp
            return True
    return False


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


@contextlib.contextmanager
def _stop_on_sigterm(server: VLLMServer) -> Iterator[None]:
    """On SIGTERM, stop the server before this process goes, without taking the decision from another handler.

    With no handler of its own (SIG_DFL) the process would die without unwinding and leave the server running on
    its GPUs: stop the server and exit with 143 as SIGTERM would. A Python handler installed before (submitit's
    logs and ignores SIGTERM because its requeue comes by SIGUSR2, whose handler ends in sys.exit and so unwinds
    through ``serving``) is called unchanged: if it returns, the run goes on and so does the server. SIG_IGN stays
    ignored. Handlers can only be set from the main thread; elsewhere only the unwinding stops the server.
    """
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)

    def handler(signum, frame):
        if callable(previous):
            previous(signum, frame)
        elif previous == signal.SIG_DFL:
            server.stop()
            raise SystemExit(128 + signum)

    if previous != signal.SIG_IGN:
        signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        # A handler the block installed after ours (a launcher's) is theirs to keep.
        if signal.getsignal(signal.SIGTERM) is handler:
            signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def serving(
    spec: ServerSpec,
    run_dir: Path | str,
    *,
    command: Callable[[ServerSpec, int], list[str]] | None = None,
    lock_dir: Path | str = DEFAULT_LOCK_DIR,
    poll_s: float = 0.2,
) -> Iterator[VLLMServer]:
    """Start the server for one run, yield it once healthy, stop it however the block ends.

    ``command(spec, port)`` builds the server's command line (default: ``trl_serve_command``).
    """
    server = VLLMServer(spec, Path(run_dir), command=command, lock_dir=Path(lock_dir), poll_s=poll_s)
    with _stop_on_sigterm(server):
        server.start()
        try:
            with no_proxy_for(spec.connect_host or spec.host):
                yield server
        finally:
            server.stop()


NO_PROXY_VARIABLES = ("NO_PROXY", "no_proxy")


@contextlib.contextmanager
def no_proxy_for(host: str) -> Iterator[None]:
    """While it lasts, ``host`` is in NO_PROXY and no_proxy. TRL's VLLMClient talks to the server through
    ``requests``, which honours HTTP(S)_PROXY: on a cluster that sets one, the health wait (no proxy) passed and the
    trainer's first request went to the proxy and failed after its timeout. Both spellings, as requests reads
    either; the values are put back afterwards."""
    env = os.environ
    before = {name: env.get(name) for name in NO_PROXY_VARIABLES}
    for name in NO_PROXY_VARIABLES:
        hosts = [h for h in (before[name] or "").split(",") if h.strip()]
        env[name] = ",".join(hosts + ([host] if host not in hosts else []))
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
