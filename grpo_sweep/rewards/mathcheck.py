"""math-verify comparisons with a timeout that works in any thread: they run in a helper process.

math-verify's own timeouts use SIGALRM, which raises outside the main thread (where TRL may call rewards), so
grpo-sweep turns them off. sympy can then spin for minutes on a pathological answer; here the comparison runs
in one persistent helper process, and a comparison that takes longer than ``timeout_s`` gets the helper killed
(a fresh one starts on the next call) and scores 0. ``python -m grpo_sweep.rewards.mathcheck`` is the helper.
"""
from __future__ import annotations

import atexit
import json
import logging
import os
import select
import subprocess
import sys
import threading
import time

log = logging.getLogger(__name__)

TIMEOUT_S = 5.0


def compare(truth: str, candidate: str | None) -> float | None:
    """1.0 / 0.0 for a match / no match, None when the truth cannot be parsed (runs in the helper)."""
    from math_verify import parse, verify

    def parsed(expression: str):
        # Timeouts off: the helper's caller enforces one by killing the helper.
        value = parse(expression, parsing_timeout=None)
        if not value and "$" not in expression:
            value = parse(f"${expression}$", parsing_timeout=None)
        return value

    gold = parsed(truth)
    if not gold:
        return None
    if candidate is None or not candidate.strip():
        return 0.0
    answer = parsed(candidate)
    if not answer:
        return 0.0
    return 1.0 if verify(gold, answer, timeout_seconds=None) else 0.0


class Helper:
    """One helper process, used under a lock; replaced after a timeout or a crash."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.proc: subprocess.Popen | None = None
        self.buffer = b""
        self.timeouts = 0
        self.fresh = False  # started, first answer not read yet: it is still importing sympy

    def warm(self) -> None:
        """Start the helper now, so its ~0.4 s of imports overlap the caller's set-up, not the first reward call."""
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                self.stop()
                self.proc, self.fresh = self._start(), True

    def _start(self) -> subprocess.Popen:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        return subprocess.Popen(
            [sys.executable, "-m", "grpo_sweep.rewards.mathcheck"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
        )

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc, self.buffer = None, b""

    def compare(self, truth: str, candidate: str | None, timeout_s: float | None = None) -> float | None:
        timeout_s = TIMEOUT_S if timeout_s is None else timeout_s
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                self.stop()
                self.proc, self.fresh = self._start(), True
            if self.fresh:
                timeout_s += 30.0  # the first call waits for sympy and math-verify to import
            try:
                self.proc.stdin.write((json.dumps([truth, candidate]) + "\n").encode())
                self.proc.stdin.flush()
                line = self._read_line(timeout_s)
            except (BrokenPipeError, OSError):
                line = None
            self.fresh = False
            if line is None:
                self.timeouts += 1
                log.warning("math-verify took over %.1f s (or crashed) on %r vs %r: scored 0", timeout_s, candidate[:80] if candidate else candidate, truth[:80])
                self.stop()
                return 0.0
            return json.loads(line)

    def _read_line(self, timeout_s: float) -> bytes | None:
        deadline = time.monotonic() + timeout_s
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line


HELPER = Helper()
atexit.register(HELPER.stop)


def _serve() -> None:
    # The first comparison builds math-verify's LaTeX parser and sympy's caches (~0.3 s): do it before the
    # first request, so a helper started early (Helper.warm) answers its first reward call at full speed.
    compare("12", "x + 12 = 3")
    for line in sys.stdin:
        truth, candidate = json.loads(line)
        try:
            result = compare(truth, candidate)
        except Exception:  # noqa: BLE001  (math-verify failing on odd input is a non-match)
            result = 0.0
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    import logging as _logging

    _logging.disable(_logging.WARNING)  # math-verify's "timeout is disabled" notices
    _serve()
