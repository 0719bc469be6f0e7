"""HTTP client internals (httpx 0.28/0.29, and httpx2 under openai 3) the LLM judge relies on.

- ``bound_reply``: a response's body replaced, from a response event hook, by a stream that ends the read at a wall
  clock and past a size cap. The client has a per-read timeout only (a byte now and then resets it) and no size
  cap; a response hook may swap ``response.stream`` for any ``AsyncByteStream`` before the body is read, which is
  what the client's own transports hand it. The client is the one the response came from (httpx2 under openai 3,
  httpx before), so its ``AsyncByteStream`` and ``ReadTimeout`` are taken from the response's own module.
"""

from __future__ import annotations

import asyncio
import functools
import sys
from typing import Any

__all__ = ["bound_reply"]


def bound_reply(response: Any, ends: float, max_bytes: int, too_large: type[Exception]) -> None:
    """Make ``response``'s body a stream that raises the HTTP library's ReadTimeout at loop time ``ends`` (the client
    retries it as it does any timeout) and ``too_large`` past ``max_bytes``."""
    http = sys.modules[type(response).__module__.partition(".")[0]]
    stream = _bounded_stream_type(http.AsyncByteStream)
    response.stream = stream(response.stream, ends, max_bytes, http.ReadTimeout, too_large)


@functools.cache
def _bounded_stream_type(base: type) -> type:
    class BoundedStream(base):
        def __init__(self, inner, ends: float, max_bytes: int, timeout_error: type[Exception], too_large: type):
            self.inner, self.ends, self.max_bytes = inner, ends, max_bytes
            self.timeout_error, self.too_large = timeout_error, too_large

        async def __aiter__(self):
            loop = asyncio.get_running_loop()
            chunks, received = self.inner.__aiter__(), 0
            try:
                while True:
                    try:
                        chunk = await asyncio.wait_for(chunks.__anext__(), max(0.0, self.ends - loop.time()))
                    except StopAsyncIteration:
                        return
                    except TimeoutError:
                        raise self.timeout_error("the reply was not complete within timeout") from None
                    received += len(chunk)
                    if received > self.max_bytes:
                        raise self.too_large(f"the reply is longer than max_reply_bytes={self.max_bytes}")
                    yield chunk
            finally:
                if hasattr(chunks, "aclose"):
                    await chunks.aclose()

        async def aclose(self) -> None:
            await self.inner.aclose()

    return BoundedStream
