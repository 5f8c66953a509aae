"""A scripted LLM provider on 127.0.0.1 for tests and benchmarks.

One real HTTP server speaks both wire formats jurist talks to:

* OpenAI chat completions, ``POST /v1/chat/completions`` (JSON, or SSE
  ``data: {...}`` chunks ending in ``data: [DONE]`` when ``stream`` is true);
* Anthropic messages, ``POST /v1/messages`` (JSON, or the SSE events
  ``message_start`` ... ``message_stop``; a reply's tool calls as ``tool_use`` blocks);
* the OpenAI Responses API, ``POST /v1/responses`` (a ``response`` object, or the
  SSE events ``response.created`` ... ``response.completed``);
* the model list, ``GET /v1/models``, when the server is given ``models``.

``ProviderServer(dialect="llama-cpp-python")`` answers as llama-cpp-python's server
does (:data:`jurist.testing.dialects.Dialect`): tool-call stream pieces that repeat
the call's id and name, no usage in streams, a 500 for ``response_format:
json_schema``.

Tests script the replies (text, status, latency, headers, raw bodies, hangs,
dropped connections) and read back what arrived::

    with ProviderServer() as server:
        server.script(Reply(status=429, headers={"Retry-After": "1"}), Reply(text="hi"))
        client = AsyncOpenAI(base_url=server.base_url, api_key="test")
        ...
        assert server.requests[0]["json"]["model"] == "gpt-test"

It needs only the standard library and jurist's table of error types. For
benchmarks, which need fixed replies and little CPU rather than scripting,
``python -m jurist.testing.provider_server --port 0 --latency 0.2`` serves
every request the same reply through :mod:`jurist.testing.fixed_server`; it
prints its base URL and serves until killed.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, TypedDict, Union

from jurist.models.error_types import ANTHROPIC_ERROR_TYPES, OPENAI_ERROR_TYPES
from jurist.testing.dialects import (DIALECTS, Dialect, anthropic_tool_events, anthropic_tool_message,
                                     llama_cpp_chunks, responses_events, responses_object)
from jurist.testing.replies import (DEFAULT_TEXT, Reply, WireRequest, anthropic_events, anthropic_message,
                                    openai_chunks, openai_completion)

__all__ = ["ProviderServer", "RecordedRequest", "Reply", "Responder", "schema_dialect"]

Responder = Union[Reply, Callable[[dict[str, Any]], Reply]]  # a callable reads the request's JSON body


class RecordedRequest(TypedDict):
    """A request as it arrived (``server.requests[i]["json"]``)."""

    path: str
    headers: dict[str, str]  # names lower-cased
    json: Any  # the body as parsed JSON, as the client sent it; None: not JSON
    started: float  # time.monotonic()
    finished: float | None  # when its reply began to go out


class ProviderServer:
    """A threaded HTTP server on 127.0.0.1 that answers as OpenAI and Anthropic.

    Replies queued with :meth:`script` are used in order, then ``default``.
    A responder may be a :class:`Reply` or a callable taking the parsed
    request JSON and returning one.
    """

    def __init__(self, default: Responder = Reply(), *, port: int = 0, models: list[str] | None = None,
                 dialect: Dialect = "openai") -> None:
        if dialect not in DIALECTS:
            raise ValueError(f"unknown dialect {dialect!r}; choose one of {', '.join(DIALECTS)}")
        self.dialect: Dialect = dialect
        # A copy, so a test that edits its server's default reply edits no other's.
        self.default: Responder = copy.deepcopy(default) if isinstance(default, Reply) else default
        # The ids ``GET /v1/models`` lists; None: the route answers 404, as on servers without one.
        self.models = models
        self.requests: list[RecordedRequest] = []
        self.in_flight = 0
        self.peak_in_flight = 0
        self._port = port
        self._queue: deque[Responder] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------

    def start(self) -> "ProviderServer":
        """Bind a port (random unless given) and serve on a daemon thread."""
        if self._httpd is not None:
            return self
        self._stopping.clear()
        self._httpd = _HTTPServer(("127.0.0.1", self._port), _Handler, self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving: release hanging requests and close every connection."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        httpd.close_connections()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> "ProviderServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("ProviderServer is not started; call start() or use it as a context manager")
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        """Base URL for the OpenAI SDK (``.../v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """Base URL for the Anthropic SDK (no ``/v1``; the SDK adds it)."""
        return f"http://127.0.0.1:{self.port}"

    # -- scripting -----------------------------------------------------------

    def script(self, *replies: Responder) -> None:
        """Queue replies; they are consumed in order, then ``default`` answers."""
        with self._lock:
            self._queue.extend(replies)

    def reset(self) -> None:
        """Forget queued replies, recorded requests and the in-flight peak."""
        with self._lock:
            self._queue.clear()
            self.requests.clear()
            self.peak_in_flight = self.in_flight

    # -- used by the handler -------------------------------------------------

    def _begin(self, record: RecordedRequest, *, take: bool = True) -> Responder:
        """Record an arriving request; ``take`` the next scripted reply for it."""
        with self._lock:
            self.requests.append(record)
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            return self._queue.popleft() if take and self._queue else self.default

    def _end(self, record: RecordedRequest) -> None:
        with self._lock:
            self.in_flight -= 1
            record["finished"] = time.monotonic()


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 1024  # benchmarks open many connections at once

    def __init__(self, address: tuple[str, int], handler: type, owner: ProviderServer) -> None:
        self.owner = owner
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._conns_lock:
            self._conns.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._conns_lock:
            self._conns.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """Unblock handler threads sitting on idle keep-alive connections."""
        with self._conns_lock:
            conns = list(self._conns)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        # Headers and body go out as separate writes; without this, Nagle's
        # algorithm and delayed ACKs add ~40 ms to every keep-alive reply.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        pass

    def do_GET(self) -> None:  # noqa: N802
        models = self.server.owner.models
        if models is not None and self.path.split("?", 1)[0].rstrip("/").endswith("/models"):
            data = {"object": "list", "data": [{"id": m, "object": "model", "owned_by": "test"} for m in models]}
            self._send(200, json.dumps(data).encode(), "application/json")
            return
        self._send_error_json(404, f"no route for GET {self.path}", anthropic=False)

    def do_POST(self) -> None:  # noqa: N802
        owner = self.server.owner
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        path = self.path.split("?", 1)[0]
        anthropic = path.rstrip("/").endswith("/messages")
        responses = path.rstrip("/").endswith("/responses")
        known = anthropic or responses or path.rstrip("/").endswith("/chat/completions")
        try:
            payload = json.loads(raw or b"null")
        except ValueError:
            payload = None
        record = RecordedRequest(path=path, headers={k.lower(): v for k, v in self.headers.items()}, json=payload,
                                 started=time.monotonic(), finished=None)
        self._record: RecordedRequest | None = record
        # A request the server cannot route or parse, or one its dialect refuses, does not use up a scripted reply.
        refused = _refusal(owner.dialect, payload, path)
        responder = owner._begin(record, take=known and isinstance(payload, dict) and refused is None)
        try:
            self._answer(refused or responder, payload, path, anthropic)
        finally:
            self._finish()

    def _finish(self) -> None:
        """Count the request as done, once; called just before the reply is written,
        so a client holding its answer never sees its own request still in flight."""
        record, self._record = getattr(self, "_record", None), None
        if record is not None:
            self.server.owner._end(record)

    def _answer(self, responder: Responder, payload: Any, path: str, anthropic: bool) -> None:
        stopping = self.server.owner._stopping
        if not isinstance(payload, dict):
            self._send_error_json(400, "request body is not a JSON object", anthropic=anthropic)
            return
        responses = path.rstrip("/").endswith("/responses")
        if not (anthropic or responses or path.rstrip("/").endswith("/chat/completions")):
            self._send_error_json(404, f"no route for POST {path}", anthropic=False)
            return
        try:
            reply = responder(payload) if callable(responder) else responder
        except Exception as exc:  # a broken test responder: say so on the wire
            self._send_error_json(500, f"responder raised {exc!r}", anthropic=anthropic)
            return
        if reply.delay > 0 and stopping.wait(reply.delay):
            self.close_connection = True
            return
        if reply.hang:
            stopping.wait()
            self.close_connection = True
            return
        if reply.drop:
            self.close_connection = True
            return
        if reply.body is not None:
            body = reply.body.encode() if isinstance(reply.body, str) else reply.body
            kind = "text/event-stream" if payload.get("stream") else "application/json"
            self._send(reply.status, body, kind, reply.headers)
        elif reply.status >= 400:
            self._send_error_json(reply.status, reply.message, anthropic=anthropic, headers=reply.headers)
        elif responses:
            if payload.get("stream"):
                self._send(reply.status, "".join(responses_events(reply, payload)).encode(), "text/event-stream",
                           reply.headers)
            else:
                self._send(reply.status, json.dumps(responses_object(reply, payload)).encode(), "application/json",
                           reply.headers)
        elif payload.get("stream"):
            req = WireRequest.of(payload)
            if anthropic:
                events = anthropic_tool_events(reply, req) if reply.tool_calls else anthropic_events(reply, req)
            else:
                events = openai_chunks(reply, req)
                if self.server.owner.dialect == "llama-cpp-python":
                    events = llama_cpp_chunks(events)
            self._send(reply.status, "".join(events).encode(), "text/event-stream", reply.headers)
        else:
            req = WireRequest.of(payload)
            if anthropic:
                data = anthropic_tool_message(reply, req) if reply.tool_calls else anthropic_message(reply, req)
            else:
                data = openai_completion(reply, req)
            self._send(reply.status, json.dumps(data).encode(), "application/json", reply.headers)

    def _send(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self._finish()
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def _send_error_json(
        self, status: int, message: str | None, *, anthropic: bool, headers: dict[str, str] | None = None
    ) -> None:
        try:
            phrase = HTTPStatus(status).phrase
        except ValueError:
            phrase = "Overloaded" if status == 529 else "Error"
        message = message or f"{status} {phrase} (scripted by the test)"
        if anthropic:
            kind = ANTHROPIC_ERROR_TYPES.get(status, "api_error")
            data: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": message}}
        else:
            kind = OPENAI_ERROR_TYPES.get(status, "server_error")
            data = {"error": {"message": message, "type": kind, "param": None, "code": None}}
        self._send(status, json.dumps(data).encode(), "application/json", headers)


def _refusal(dialect: Dialect, payload: Any, path: str) -> Reply | None:
    """The error a server of ``dialect`` answers this request with before any model runs, if any."""
    if dialect != "llama-cpp-python":
        return None
    if not path.rstrip("/").endswith("/chat/completions"):  # it serves no Responses or Messages API
        return Reply(status=404, body='{"detail":"Not Found"}')  # FastAPI's own 404
    fmt = payload.get("response_format") if isinstance(payload, dict) else None
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        return Reply(status=500, message=LLAMA_CPP_REFUSAL)
    return None


# -- structured output ----------------------------------------------------------

#: llama-cpp-python's refusal of a response_format type it does not know (a 500).
LLAMA_CPP_REFUSAL = ("1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
                     "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}")


def schema_dialect(mode: str, *, free_text: str = "Sure, here is my judgement: it looks fine.",
                   refusal: Reply | None = None) -> Callable[[dict[str, Any]], Reply]:
    """A responder for a server whose constrained decoding reads a schema only as
    ``mode`` does (a mode of :mod:`jurist.models.structured`): such a request gets
    the smallest JSON that follows the schema; a ``response_format`` of another
    type gets ``refusal`` (default: llama-cpp-python's 500 for ``json_schema``,
    when ``mode`` is ``json_object_schema``; else the field is ignored); anything
    else gets ``free_text``, as a model left to itself would write."""

    def respond(req: dict[str, Any]) -> Reply:
        fmt: dict[str, Any] = req["response_format"] if isinstance(req.get("response_format"), dict) else {}
        schema: Any = None
        if mode == "json_schema" and fmt.get("type") == "json_schema":
            schema = (fmt.get("json_schema") or {}).get("schema")
        elif mode == "json_object_schema" and fmt.get("type") == "json_object":
            schema = fmt.get("schema")
        elif mode == "ollama_format" and isinstance(req.get("format"), dict):
            schema = req["format"]
        if isinstance(schema, dict):
            return Reply(text=json.dumps(schema_instance(schema)))
        if fmt.get("type") == "json_schema" and mode == "json_object_schema":
            return refusal or Reply(status=500, message=LLAMA_CPP_REFUSAL)
        if fmt and refusal is not None:
            return refusal
        return Reply(text=free_text)

    return respond


def schema_instance(schema: Mapping[str, object]) -> object:
    """The smallest value that follows ``schema`` (enum's first value, required properties only, ...)."""
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties")
        props = props if isinstance(props, dict) else {}
        required = schema.get("required")
        return {str(name): schema_instance(_subschema(props.get(name)))
                for name in (required if isinstance(required, list) else [])}
    if kind == "array":
        prefix = schema.get("prefixItems")
        return [schema_instance(_subschema(s)) for s in prefix] if isinstance(prefix, list) else []
    if kind == "string":
        least = schema.get("minLength")
        return "x" * (least if isinstance(least, int) and least > 0 else 1)
    if kind in ("number", "integer"):
        return schema.get("minimum", 1)
    if kind == "boolean":
        return True
    return None


def _subschema(value: object) -> Mapping[str, object]:
    return value if isinstance(value, dict) else {}


def spawn(latency: float = 0.0, text: str | None = None) -> tuple[subprocess.Popen[str], str]:
    """Start the server in its own process (so its work is not the caller's);
    returns the process and its OpenAI base URL. Kill the process when done."""
    cmd = [sys.executable, "-m", "jurist.testing.provider_server", "--port", "0", "--latency", str(latency)]
    if text is not None:
        cmd += ["--text", text]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    base_url = proc.stdout.readline().strip()
    if not base_url.startswith("http"):
        proc.kill()
        raise RuntimeError(f"the provider server did not start: {base_url!r}")
    return proc, base_url


def main(argv: list[str] | None = None) -> None:
    """Serve fixed-latency replies until killed; print the OpenAI base URL first."""
    from jurist.testing.fixed_server import serve

    parser = argparse.ArgumentParser(
        prog="python -m jurist.testing.provider_server",
        description="Fixed-reply OpenAI/Anthropic-compatible server on 127.0.0.1 for benchmarks.",
    )
    parser.add_argument("--port", type=int, default=0, help="port to bind (0: a free one)")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each reply")
    parser.add_argument("--text", default=DEFAULT_TEXT, help="message content of every reply")
    args = parser.parse_args(argv)
    try:
        asyncio.run(serve(Reply(text=args.text, delay=args.latency), args.port,
                          lambda url: print(url, flush=True)))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
