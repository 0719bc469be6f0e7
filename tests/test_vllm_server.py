"""The generation server's lifecycle (grpo_sweep/backends/vllm_server.py) against a real server process on
loopback: tests/vllm_standin.py stands in for `trl vllm-serve` through the same start, health wait and stop path."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from grpo_sweep.backends import vllm_server
from grpo_sweep.backends.vllm_server import ServerError, ServerSpec, serving

ROOT = Path(__file__).resolve().parents[1]
STANDIN = ROOT / "tests" / "vllm_standin.py"


def standin(mode: str, pid_file: Path | None = None):
    def command(spec: ServerSpec, port: int) -> list[str]:
        extra = ["--pid-file", str(pid_file)] if pid_file else []
        return [sys.executable, str(STANDIN), mode, "--host", spec.host, "--port", str(port), *extra]

    return command


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its parent) holds nothing.
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()[0] != "Z"


def port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as any server binding it would
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@pytest.fixture
def spec():
    return ServerSpec(model="tiny", startup_timeout_s=20, stop_grace_s=5)


def test_server_comes_up_hand_over_points_at_it_and_stops_at_exit(tmp_path, spec):
    pid_file = tmp_path / "worker.pid"
    with serving(spec, tmp_path, command=standin("ok", pid_file), lock_dir=tmp_path / "locks") as server:
        fields = server.grpo_fields
        assert fields["vllm_mode"] == "server" and fields["vllm_server_host"] == "127.0.0.1"
        url = f"http://{fields['vllm_server_host']}:{fields['vllm_server_port']}/health"
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(url, timeout=5) as response:
            assert response.status == 200
        assert fields["vllm_group_port"] != fields["vllm_server_port"]
        pid, worker = server.proc.pid, int(pid_file.read_text())
        assert alive(pid) and alive(worker)
    assert not alive(pid) and not alive(worker)  # the whole process group, not only the leader
    assert port_free(fields["vllm_server_port"])
    assert "ready" in (tmp_path / vllm_server.LOG_NAME).read_text()


def test_server_stopped_when_the_block_raises(tmp_path, spec):
    with pytest.raises(KeyError), serving(spec, tmp_path, command=standin("ok"), lock_dir=tmp_path / "locks") as server:
        pid, port = server.proc.pid, server.ports.http
        raise KeyError("training failed")
    assert not alive(pid) and port_free(port)


def test_server_that_exits_at_once_fails_in_one_line_with_its_log_tail(tmp_path, spec):
    locks = tmp_path / "locks"
    with pytest.raises(ServerError) as info, serving(spec, tmp_path, command=standin("exit"), lock_dir=locks):
        pytest.fail("the block must not run")
    message = str(info.value)
    assert "\n" not in message
    assert "exited with code 3" in message and "CUDA out of memory (stand-in)" in message


def test_server_that_never_answers_fails_at_the_timeout(tmp_path):
    spec = ServerSpec(model="tiny", startup_timeout_s=1.5, stop_grace_s=5)
    started = time.monotonic()
    locks = tmp_path / "locks"
    with pytest.raises(ServerError) as info, serving(spec, tmp_path, command=standin("never"), lock_dir=locks):
        pytest.fail("the block must not run")
    assert time.monotonic() - started >= 1.5  # it waited out the timeout (a lower bound: no flake on a busy host)
    message = str(info.value)
    assert "\n" not in message and "after 1.5s (startup_timeout_s)" in message and "stand-in never loading" in message
    # and nothing is left running: the lock files are free again
    assert all(p.suffix == ".lock" for p in (tmp_path / "locks").iterdir())


def test_server_ignoring_sigterm_is_killed_after_the_grace_period(tmp_path):
    spec = ServerSpec(model="tiny", startup_timeout_s=20, stop_grace_s=0.5)
    with serving(spec, tmp_path, command=standin("stubborn"), lock_dir=tmp_path / "locks") as server:
        pid = server.proc.pid
        started = time.monotonic()
    assert time.monotonic() - started >= 0.5  # the grace period was given before SIGKILL
    assert not alive(pid)


def test_two_servers_started_at_once_get_different_ports(tmp_path, spec):
    fields, errors = [], []
    barrier = threading.Barrier(2)

    def one(i):
        try:
            with serving(spec, tmp_path / f"run{i}", command=standin("ok"), lock_dir=tmp_path / "locks") as server:
                fields.append(server.grpo_fields)
                barrier.wait(timeout=20)  # both are up at the same time
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    ports = [f[k] for f in fields for k in ("vllm_server_port", "vllm_group_port")]
    assert len(ports) == 4 and len(set(ports)) == 4


def test_a_port_claimed_by_another_run_is_not_handed_out(tmp_path, monkeypatch):
    claims = vllm_server._PortClaims(tmp_path / "locks")
    taken = claims.claim("127.0.0.1")
    offered = iter([taken, taken])  # the kernel offers the claimed port twice, then anything

    class Probe(socket.socket):
        def getsockname(self):
            return ("127.0.0.1", next(offered, super().getsockname()[1]))

    # Another run is another process: its claim is held by a separate open file description.
    other = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
        import fcntl, os, sys, time
        fd = os.open({str(tmp_path / "locks" / f"{taken}.lock")!r}, os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)"""),
        ],
        stdout=subprocess.PIPE,
    )
    claims.release()  # the other process may now take it
    try:
        assert other.stdout.readline().strip() == b"held"
        mine = vllm_server._PortClaims(tmp_path / "locks")
        monkeypatch.setattr(vllm_server.socket, "socket", Probe)
        port = mine.claim("127.0.0.1")
        assert port != taken
        mine.release()
    finally:
        other.kill()
        other.wait()


SIGTERM_SCRIPT = """
import json, signal, sys, time
sys.path.insert(0, {root!r}); sys.path.insert(0, {tests!r})
from grpo_sweep.backends.vllm_server import ServerSpec, serving
from test_vllm_server import standin
if {chain!r}:
    def requeue(signum, frame):  # like submitit's preemption handler: requeue, then sys.exit
        print("requeued", flush=True)
        sys.exit(7)
    signal.signal(signal.SIGTERM, requeue)
spec = ServerSpec(model="tiny", startup_timeout_s=20, stop_grace_s=5)
with serving(spec, {run_dir!r}, command=standin("ok", {pid_file!r}), lock_dir={locks!r}) as server:
    print(json.dumps({{"pid": server.proc.pid, "port": server.ports.http}}), flush=True)
    time.sleep(60)
"""


@pytest.mark.parametrize("chain", [False, True], ids=["no_handler", "chained_handler"])
def test_sigterm_to_the_owning_process_stops_the_server(tmp_path, chain):
    pid_file = tmp_path / "worker.pid"
    script = SIGTERM_SCRIPT.format(
        root=str(ROOT),
        tests=str(ROOT / "tests"),
        chain=chain,
        run_dir=str(tmp_path),
        pid_file=str(pid_file),
        locks=str(tmp_path / "locks"),
    )
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        started = json.loads(owner.stdout.readline())
        worker = int(pid_file.read_text())
        assert alive(started["pid"]) and alive(worker)
        owner.send_signal(signal.SIGTERM)
        rc = owner.wait(timeout=20)
    finally:
        owner.kill()
    assert rc == (7 if chain else 128 + signal.SIGTERM)
    if chain:
        assert "requeued" in owner.stdout.read()
    assert not alive(started["pid"]) and not alive(worker)
    assert port_free(started["port"])


def test_trl_command_parses_with_trl_vllm_serve_arguments():
    vllm_serve = pytest.importorskip("trl.scripts.vllm_serve")
    spec = ServerSpec(
        model="Qwen/Qwen2.5-7B-Instruct",
        tensor_parallel_size=2,
        data_parallel_size=1,
        gpus=(6, 7),
        host="0.0.0.0",
        gpu_memory_utilization=0.85,
        max_model_len=4096,
    )
    command = vllm_server.trl_serve_command(spec, 41234)
    assert command[:3] == [sys.executable, "-m", "trl.scripts.vllm_serve"]
    (args,) = vllm_serve.make_parser().parse_args_into_dataclasses(command[3:])
    assert (
        args.model,
        args.tensor_parallel_size,
        args.data_parallel_size,
        args.host,
        args.port,
        args.gpu_memory_utilization,
        args.max_model_len,
    ) == ("Qwen/Qwen2.5-7B-Instruct", 2, 1, "0.0.0.0", 41234, 0.85, 4096)
    assert vllm_server.server_env(spec, {})["CUDA_VISIBLE_DEVICES"] == "6,7"


def test_hand_over_fields_are_grpo_config_fields():
    import dataclasses

    from trl import GRPOConfig

    names = {f.name for f in dataclasses.fields(GRPOConfig)}
    server = vllm_server.VLLMServer(ServerSpec(model="m"), Path("."), command=None, lock_dir=Path("."))
    server.ports = vllm_server.Ports(http=1, group=2)
    assert set(server.grpo_fields) <= names


def test_the_module_imports_only_the_standard_library():
    heavy = ("torch", "trl", "transformers", "vllm", "requests", "aiohttp")
    code = f"import sys, grpo_sweep.backends.vllm_server; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_proxy_on_the_cluster_does_not_come_between_the_trainer_and_its_server(tmp_path, spec, monkeypatch):
    import requests

    with socket.socket() as dead:  # a port nothing listens on: the proxy a cluster set and this node cannot reach
        dead.bind(("127.0.0.1", 0))
        proxy = f"http://127.0.0.1:{dead.getsockname()[1]}"
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.setenv(name, proxy)
    monkeypatch.setenv("NO_PROXY", "example.org")
    monkeypatch.delenv("no_proxy", raising=False)
    with serving(spec, tmp_path, command=standin("ok"), lock_dir=tmp_path / "locks") as server:
        # what TRL's VLLMClient does: requests, which reads the proxy variables
        assert requests.get(f"{server.url}/health", timeout=5).status_code == 200
    assert os.environ["NO_PROXY"] == "example.org" and "no_proxy" not in os.environ
    with pytest.raises(requests.exceptions.ProxyError):  # the same request outside the block goes to the dead proxy
        requests.get(f"{server.url}/health", timeout=5)
