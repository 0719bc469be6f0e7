"""OpenAI-compatible chat endpoints on loopback for the judge tests, started by the caller and stopped after.

`tiny_model_server`: transformers' own server (`transformers serve`, FastAPI + uvicorn) serving the shipped tiny
model on CPU, the library's real endpoint rather than one written here. `JudgeServer`: a small aiohttp app (aiohttp
is declared in the dev extra) whose replies the test chooses (a score computed from the completion, a hang, garbage,
429s, a reply of many megabytes, one that trickles in a byte at a time); it counts requests and the most it had in
flight, and keeps each request's Authorization header and prompt. `free_port()` with nothing started on it is a
judge that is down.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Awaitable, Callable

from aiohttp import web

ROOT = Path(__file__).resolve().parents[2]
TINY_MODEL = ROOT / "grpo_sweep" / "models" / "prebuilt"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def tiny_model_server(startup_s: float = 90.0):
    """`transformers serve` with the tiny model preloaded on CPU; yields the base URL (…/v1). Requests must name
    the model as it was given (`TINY_MODEL`): another name is a 400."""
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "transformers.cli.transformers",
        "serve",
        str(TINY_MODEL),
        "--device",
        "cpu",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    # its log goes to a file: a pipe nobody reads fills up after a few hundred requests and stalls the server
    log = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen(
        cmd, stdout=log, stderr=subprocess.STDOUT, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}
    )
    try:
        started = time.monotonic()
        while True:
            if proc.poll() is not None:
                log.seek(0)
                raise RuntimeError(f"transformers serve exited: {log.read()[-2000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() - started > startup_s:
                raise RuntimeError("transformers serve did not come up")
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def chat_reply(text: str, prompt: str = "", model: str = "judge") -> web.Response:
    return web.json_response(
        {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
            "usage": {
                "prompt_tokens": len(prompt.split()),
                "completion_tokens": len(text.split()),
                "total_tokens": len(prompt.split()) + len(text.split()),
            },
        }
    )


# a handler: (the server, the request's number from 1, its prompt) -> the response
Handler = Callable[["JudgeServer", int, str], Awaitable[web.StreamResponse]]


class JudgeServer:
    """An aiohttp chat-completions endpoint in a thread of its own; ``with JudgeServer(handler) as server:``."""

    def __init__(self, handler: Handler, port: int = 0):
        self.handler = handler
        self.port = port
        self.requests = 0
        self.in_flight = self.max_in_flight = 0
        self.authorizations: list[str | None] = []
        self.prompts: list[str] = []
        self.times: list[float] = []
        self._live: dict[int, web.Request] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        number = self.requests
        self.times.append(time.monotonic())
        self.authorizations.append(request.headers.get("Authorization"))
        body = await request.json()
        prompt = body["messages"][-1]["content"]
        self.prompts.append(prompt)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        self._live[number] = request
        try:
            return await self.handler(self, number, prompt)
        finally:
            self.in_flight -= 1
            del self._live[number]

    def request_of(self, number: int) -> web.Request:
        """Request ``number``, for a handler that streams its response (``StreamResponse.prepare``)."""
        return self._live[number]

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        self._runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self._runner.setup()
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        self.port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock).start()

    def __enter__(self) -> JudgeServer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    def __exit__(self, *exc) -> None:
        async def stop():
            await self._runner.cleanup()
            handlers = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]  # a hanging one's
            for task in handlers:
                task.cancel()
            await asyncio.gather(*handlers, return_exceptions=True)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


def scored(score: Callable[[str], str]) -> Handler:
    """Replies ``score(prompt)``, at once."""

    async def handle(server, number, prompt):
        return chat_reply(score(prompt), prompt)

    return handle


async def hang(server, number, prompt):
    """Accepts the request and never answers it."""
    await asyncio.sleep(3600)
    return web.Response(status=500)


def rate_limited(times: int, retry_after: str = "0.1", then: Handler | None = None) -> Handler:
    """429 with Retry-After for the first ``times`` requests, then ``then`` (a score of 7)."""
    then = then or scored(lambda prompt: "Score: 7")

    async def handle(server, number, prompt):
        if number <= times:
            return web.json_response(
                {"error": {"message": "rate limited", "type": "rate_limit"}},
                status=429,
                headers={"Retry-After": retry_after},
            )
        return await then(server, number, prompt)

    return handle


def chat_body(text: str) -> bytes:
    """A chat completion's JSON, as chat_reply sends it."""
    return chat_reply(text).body


def huge(megabytes: float, score: str = "Score: 7") -> Handler:
    """A well-formed reply whose text is ``megabytes`` MB of words, ending in ``score`` (a runaway judge)."""
    text = "very " * int(megabytes * 1e6 / 5) + score

    async def handle(server, number, prompt):
        return chat_reply(text, prompt)

    return handle


def trickle(every_s: float, text: str = "Score: 7") -> Handler:
    """A well-formed reply sent one byte every ``every_s`` seconds (an overloaded proxy): each read is quick, the
    whole takes len(body) * every_s."""

    async def handle(server, number, prompt):
        body = chat_body(text)
        response = web.StreamResponse(headers={"Content-Type": "application/json", "Content-Length": str(len(body))})
        await response.prepare(server.request_of(number))
        for i in range(len(body)):
            await response.write(body[i : i + 1])
            await asyncio.sleep(every_s)
        await response.write_eof()
        return response

    return handle
