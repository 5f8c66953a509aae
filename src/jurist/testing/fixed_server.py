"""The benchmarks' judge endpoint: every request gets the same reply after a fixed latency.

:class:`~jurist.testing.provider_server.ProviderServer` is the scripted
server of the tests (a thread per connection, queued replies, hangs, drops).
The benchmarks need none of that, but they run the server on the same CPUs
as the code they measure, so this one is an asyncio protocol that does
little more than parse a request and write the reply: it answers OpenAI
chat completions (``POST .../chat/completions``) and Anthropic messages
(``POST .../messages``), as JSON or as an event stream, with the same
bodies as the scripted server. Anything else gets a 404 or a 400.

Run it with ``python -m jurist.testing.provider_server --latency 0.1``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Callable

from jurist.testing.replies import (Reply, WireRequest, anthropic_events, anthropic_message, openai_chunks,
                                    openai_completion)

_MAX_HEAD = 64 * 1024
_MAX_BODY = 64 * 1024 * 1024


def _response(status: int, reason: str, body: bytes, content_type: str, close: bool) -> bytes:
    head = [f"HTTP/1.1 {status} {reason}", f"Content-Type: {content_type}", f"Content-Length: {len(body)}"]
    if close:
        head.append("Connection: close")
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


def _error(status: int, reason: str, message: str, close: bool = False) -> bytes:
    body = json.dumps({"error": {"message": message, "type": "invalid_request_error", "param": None,
                                 "code": None}}).encode()
    return _response(status, reason, body, "application/json", close)


def reply_for(reply: Reply, path: str, raw: bytes) -> bytes:
    """The whole HTTP response to one POST (without the latency)."""
    route = path.split("?", 1)[0].rstrip("/")
    anthropic = route.endswith("/messages")
    if not (anthropic or route.endswith("/chat/completions")):
        return _error(404, "Not Found", f"no route for POST {path}")
    try:
        payload = json.loads(raw or b"null")
    except ValueError:
        payload = None
    if not isinstance(payload, dict):
        return _error(400, "Bad Request", "request body is not a JSON object")
    req = WireRequest.of(payload)
    if payload.get("stream"):
        events = anthropic_events(reply, req) if anthropic else openai_chunks(reply, req)
        return _response(200, "OK", "".join(events).encode(), "text/event-stream", False)
    data = anthropic_message(reply, req) if anthropic else openai_completion(reply, req)
    return _response(200, "OK", json.dumps(data).encode(), "application/json", False)


class _Connection(asyncio.Protocol):
    """One client connection: requests are answered in order (HTTP/1.1 keep-alive)."""

    def __init__(self, reply: Reply, on_count: Callable[[int], None]) -> None:
        self.reply = reply
        self.on_count = on_count
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.pending: asyncio.Task[None] | None = None  # the request being answered

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        if self.pending is not None:
            self.pending.cancel()
        self.transport = None

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        self._next()

    def _next(self) -> None:
        """Start answering the next complete request in the buffer, if none is being answered."""
        if self.pending is not None or self.transport is None:
            return
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(self.buffer) > _MAX_HEAD:
                self._fail(_error(431, "Request Header Fields Too Large", "request head too large", close=True))
            return
        lines = bytes(self.buffer[:end]).decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if len(parts) != 3 or "chunked" in headers.get("transfer-encoding", "").lower():
            self._fail(_error(400, "Bad Request", "send one request with a Content-Length", close=True))
            return
        try:
            length = int(headers.get("content-length") or 0)
        except ValueError:
            length = -1
        if not 0 <= length <= _MAX_BODY:
            self._fail(_error(400, "Bad Request", "bad Content-Length", close=True))
            return
        if len(self.buffer) < end + 4 + length:
            return  # the body is still arriving
        body = bytes(self.buffer[end + 4:end + 4 + length])
        del self.buffer[:end + 4 + length]
        method, path = parts[0], parts[1]
        close = headers.get("connection", "").lower() == "close"
        if method != "POST":
            out = _error(404, "Not Found", f"no route for {method} {path}", close)
        else:
            out = reply_for(self.reply, path, body)
        self.pending = asyncio.get_running_loop().create_task(self._answer(out, close))

    async def _answer(self, out: bytes, close: bool) -> None:
        self.on_count(1)
        try:
            if self.reply.delay > 0:
                await asyncio.sleep(self.reply.delay)
        finally:
            self.on_count(-1)
        if self.transport is None:
            return
        self.transport.write(out)
        self.pending = None
        if close:
            self.transport.close()
        else:
            self._next()

    def _fail(self, out: bytes) -> None:
        assert self.transport is not None
        self.transport.write(out)
        self.transport.close()


class FixedServer:
    """Serve ``reply`` to every request on 127.0.0.1 from the running event loop."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.in_flight = 0
        self.peak_in_flight = 0
        self.server: asyncio.Server | None = None

    def _count(self, delta: int) -> None:
        self.in_flight += delta
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)

    async def start(self, port: int = 0) -> str:
        """Bind and serve; returns the OpenAI base URL (``http://127.0.0.1:<port>/v1``)."""
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(lambda: _Connection(self.reply, self._count), "127.0.0.1", port,
                                               backlog=1024)
        bound = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{bound}/v1"

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None


async def serve(reply: Reply, port: int, on_ready: Callable[[str], None]) -> None:
    """Serve until cancelled; ``on_ready`` gets the base URL once bound."""
    server = FixedServer(reply)
    on_ready(await server.start(port))
    try:
        await asyncio.Event().wait()
    finally:
        await server.stop()
