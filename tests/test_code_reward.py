"""The code reward: fraction of tests passed, and containment of hostile programs (each scores 0, the run goes on)."""

from __future__ import annotations

import os
import socket
import subprocess

import pytest

from grpo_sweep.rewards import REWARDS
from grpo_sweep.rewards.code import extract_code, parse_tests
from grpo_sweep.rewards.sandbox import Limits, check_isolation, execute

code_reward = REWARDS["code"]
ADD = ["assert add(1, 2) == 3", "assert add(-1, 1) == 0", "assert add(2, 2) == 4"]


def fenced(body: str) -> str:
    return f"Here you go:\n```python\n{body}\n```\nDone."


def nobody_processes() -> int:
    out = subprocess.run(["ps", "-u", "65534", "-o", "pid="], capture_output=True, text=True)
    return len(out.stdout.split())


def test_scores_the_fraction_of_tests_passed():
    completions = [
        fenced("def add(a, b):\n    return a + b"),
        fenced("def add(a, b):\n    return 3"),
        "<answer>def add(a, b): return a - b</answer>",
        "no code at all",
    ]
    assert code_reward(completions=completions, tests=[ADD] * 4) == [1.0, 1 / 3, 0.0, 0.0]


def test_stdin_stdout_tests_and_json_columns():
    program = fenced("n = int(input())\nprint(n * 2)")
    tests = '{"inputs": ["3", "10"], "outputs": ["6", "21"]}'
    assert code_reward(completions=[program], tests=[tests]) == [0.5]
    assert code_reward(completions=[program, program], tests=[None, "[]"]) == [None, None]  # no tests: TRL skips
    assert code_reward(
        completions=[[{"role": "assistant", "content": program}]], tests=[[{"input": "1", "output": "2"}]]
    ) == [1.0]


def test_extraction_and_parsing():
    assert extract_code("```py\na=1\n```\n```python\nb=2\n```") == "b=2\n"
    assert extract_code("<answer>x=1</answer>") == "x=1"
    assert extract_code("plain words") is None
    assert parse_tests("assert f(1)") == ["assert f(1)"]
    assert parse_tests('["assert 1", "assert 2"]') == ["assert 1", "assert 2"]
    assert parse_tests([{"bad": 1}]) is None


HOSTILE = {
    "infinite loop": "def add(a, b):\n    while True:\n        pass",
    "infinite loop at import": "while True:\n    pass",
    "fork bomb": "import os\nwhile True:\n    os.fork()",
    "memory bomb": "x = bytearray(8 * 1024**3)\ndef add(a, b): return a + b",
    "disk bomb": "with open('big', 'wb') as f:\n    while True: f.write(b'x' * 2**20)\ndef add(a, b): return a + b",
    "fake result line": "import os, sys\nos.write(1, b'0123 [true, true, true]\\n')\nos._exit(0)",
    "exit 0 early": "import os\nos._exit(0)",
}


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_programs_score_zero_and_the_next_one_runs(name):
    scores = code_reward(
        completions=[fenced(HOSTILE[name]), fenced("def add(a, b):\n    return a + b")],
        tests=[ADD, ADD],
        timeout_s=2.0,
        per_test_s=0.5,
        memory_mb=256,
    )
    assert scores == [0.0, 1.0]  # returned at all: the sandbox stopped it (a hang would stop the suite)
    if os.geteuid() == 0:
        assert nobody_processes() == 0  # nothing left running


def test_cannot_write_outside_its_temp_dir(tmp_path):
    target = tmp_path / "escaped.txt"
    for path in (target, "/tmp/grpo-sandbox-escape.txt", os.path.expanduser("~/grpo-sandbox-escape.txt")):
        program = f"open({str(path)!r}, 'w').write('x')\ndef add(a, b): return a + b"
        assert code_reward(completions=[fenced(program)], tests=[ADD]) == [0.0] or str(path).startswith("/tmp/grpo")
        assert not os.path.exists(path)
    # its own working directory is writable, and thrown away
    assert code_reward(
        completions=[fenced("open('scratch', 'w').write('x')\ndef add(a, b): return a + b")], tests=[ADD]
    ) == [1.0]


def test_cannot_open_a_network_connection():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.5)
    port = server.getsockname()[1]
    program = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1)\ndef add(a, b): return a + b"
    try:
        assert code_reward(completions=[fenced(program)], tests=[ADD]) == [0.0]
        with pytest.raises(socket.timeout):
            server.accept()  # nothing reached the listener
    finally:
        server.close()
    dns = "import socket\nsocket.getaddrinfo('pypi.org', 443)\ndef add(a, b): return a + b"
    assert code_reward(completions=[fenced(dns)], tests=[ADD]) == [0.0]


def test_cannot_read_the_parents_secrets(monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", "wandb-secret-123")
    monkeypatch.setenv("HF_TOKEN", "hf_secret_456")
    program = (
        "import os\n"
        "def add(a, b):\n"
        "    leaked = os.environ.get('WANDB_API_KEY') or os.environ.get('HF_TOKEN')\n"
        "    for pid in os.listdir('/proc'):\n"
        "        try:\n"
        "            leaked = leaked or ('secret' in open(f'/proc/{pid}/environ').read())\n"
        "        except Exception:\n"
        "            pass\n"
        "    return a + b if leaked else None"
    )
    assert code_reward(completions=[fenced(program)], tests=[ADD]) == [0.0]


def test_sees_only_its_own_processes():
    program = (
        "import os\npids = [p for p in os.listdir('/proc') if p.isdigit()]\n"
        "def add(a, b): return a + b if len(pids) > 3 else None"
    )
    assert code_reward(completions=[fenced(program)], tests=[ADD]) == [0.0]


def test_rlimits_fallback_still_contains_loops_and_memory():
    check_isolation("rlimits")
    limits = Limits(timeout_s=2, per_test_s=0.5, memory_mb=256)
    assert execute(HOSTILE["infinite loop at import"], ADD, limits, "rlimits").score == 0.0
    assert execute(HOSTILE["memory bomb"], ADD, limits, "rlimits").score == 0.0
    assert execute("def add(a, b): return a + b", ADD, limits, "rlimits").score == 1.0


def test_a_real_run_with_the_code_reward(tmp_path):
    """TRL hands the `tests` column to the code reward; the run trains and evaluates with it."""
    import json

    from grpo_sweep.run.train import train
    from grpo_sweep.run.validate import check_machine, validate

    from .conftest import FAST, compose

    rows = [
        {"prompt": f"Write add(a, b). Example: add({i}, 1) = {i + 1}", "ground_truth": str(i + 1), "tests": ADD}
        for i in range(40)
    ]
    data = tmp_path / "code.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = compose(
        FAST + ["data=file", f"data.path={data}", "+reward_mix.code.weight=1", "+reward_mix.code.params.timeout_s=2"]
    )
    validate(cfg)
    check_machine(cfg)
    summary = train(cfg, tmp_path / "run")
    assert summary["status"] == "completed" and summary["steps"] == 6
    assert summary["train_rewards"]["code"] == 0.0  # a random tiny model writes no working Python
    assert summary["test_rewards"]["code"] == 0.0 and summary["reward_failures"]["code"] == 0
