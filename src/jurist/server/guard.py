"""The server's door: an ASGI middleware that checks every request before any route runs.

In this order, each refusal a JSON error (OpenAI's shape under ``/v1/``):

1. the ``Host`` header names an allowed host (:func:`jurist.server.auth.allowed_hosts`),
   else 400: a page on another name that resolves here (DNS rebinding) reads nothing
   (any host name, ``*``, only with a token: refused when the app is built);
2. a ``Content-Length`` above the limit is 413 at once, before any of the body is read;
3. no NUL byte in the path or the query, nor (``\u0000``) in a write's JSON body outside
   ``/v1/`` (422: PostgreSQL stores none); no lone surrogate (``\ud800`` without its other
   half) in a write's JSON body (422 naming where: such a string decodes, then fails wherever
   it is encoded, in the store, a prompt, a log);
4. a write (a route's POST, PUT, PATCH or DELETE; a method no route serves is left to
   the app's 404 / 405) carries the API token when the server has one (401), a
   browser's ``Origin`` is this server itself (403), and the body is
   ``Content-Type: application/json`` (415), which no cross-site form or simple
   request can send;
5. the body is read with a counter and cut at the limit (413, chunked bodies too); the
   route then gets the body from memory.

The tutor socket: the host and a browser's ``Origin`` are checked in the handshake
(refused: HTTP 403); with a token, a socket without it is accepted only to say why
(an ``error`` frame) and closed with 4401.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable

from starlette.datastructures import Headers
from starlette.routing import Match, Router
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from jurist.config import Settings
from jurist.server.auth import (
    ANY_HOST,
    allowed_hosts,
    bearer,
    host_name,
    require_token_for_any_host,
    same_origin,
    token_matches,
    ws_subprotocol,
    ws_token,
)
from jurist.server.errors import MESSAGES_PATH, PROXY_PREFIX, error_body

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
CLOSE_POLICY = 1008  # a socket refused in the handshake
CLOSE_UNAUTHORIZED = 4401  # a socket without the token
TOKEN_HINT = "send 'Authorization: Bearer <JURIST_API_TOKEN>'"
# A JSON string's NUL: the escape \u0000 after an even number of backslashes (JSON allows no raw NUL).
NUL_ESCAPE = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000")
# A JSON string's surrogate escape (\ud800-\udfff): the body may hold a lone one (lone_surrogate says).
SURROGATE_ESCAPE = re.compile(rb"(?<!\\)(?:\\\\)*\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


class Refusal(Exception):
    def __init__(self, status: int, detail: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.headers = headers or {}


class Guard:
    """Wraps the app; built by :func:`jurist.server.create_app` from the settings."""

    def __init__(self, app: ASGIApp, settings: Settings, router: Router) -> None:
        require_token_for_any_host(settings)  # create_app checks it first; never a guard that lets any page in
        self.app = app
        self.router = router  # the app's routes, to tell a write from a method no route serves
        self.token = settings.api_token or None
        self.hosts = allowed_hosts(settings)
        self.max_body = settings.max_body_bytes
        self.max_proxy_body = settings.max_proxy_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self.http(scope, receive, send)
        elif scope["type"] == "websocket":
            await self.websocket(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    # -- HTTP ----------------------------------------------------------------------------
    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = Headers(scope=scope)
        limit = self.max_proxy_body if scope["path"].startswith(PROXY_PREFIX) else self.max_body
        try:
            self.check_host(headers)
            self.check_length(headers, limit)
            self.check_nul(scope)
            write = scope["method"] not in SAFE_METHODS and self.served(scope)
            if write:
                self.check_write(headers, scope["path"])
            body = await read_body(receive, limit)
            if write and not scope["path"].startswith(PROXY_PREFIX) and NUL_ESCAPE.search(body.get("body", b"")):
                raise Refusal(422, "invalid request: a NUL character (\\u0000) in the body")
            if write and SURROGATE_ESCAPE.search(body.get("body", b"")):
                check_surrogates(body["body"])
        except Refusal as refusal:
            await respond(scope, send, refusal)
            return
        await self.app(scope, replay(body, receive), send)

    def served(self, scope: Scope) -> bool:
        return any(route.matches(scope)[0] == Match.FULL for route in self.router.routes)

    def check_host(self, headers: Headers) -> None:
        if ANY_HOST in self.hosts:
            return
        name = host_name(headers.get("host", ""))
        if name not in self.hosts:
            known = ", ".join(sorted(self.hosts))
            raise Refusal(400, f"this server does not answer to the host name {name!r} (it answers to {known}): "
                               f"start it with --allowed-host {name or 'NAME'} (or allowed_hosts in jurist.yaml) "
                               "to serve that name")

    @staticmethod
    def check_length(headers: Headers, limit: int) -> None:
        raw = headers.get("content-length")
        if raw is None:
            return
        if not (raw.isascii() and raw.strip().isdigit()):
            raise Refusal(400, f"Content-Length is not a number: {raw[:40]!r}")
        if int(raw) > limit:
            raise too_large(limit)

    @staticmethod
    def check_nul(scope: Scope) -> None:
        query = scope.get("query_string", b"").lower()
        if "\x00" in scope["path"] or b"%00" in query or b"\x00" in query:
            raise Refusal(422, "invalid request: a NUL byte (%00) in the path or a query parameter")

    def check_write(self, headers: Headers, path: str) -> None:
        given = bearer(headers.get("authorization"))
        if given is None and path == MESSAGES_PATH:  # Anthropic's clients send their key as x-api-key
            given = headers.get("x-api-key")
        if self.token and not token_matches(given, self.token):
            raise Refusal(401, f"this request needs the API token: {TOKEN_HINT}", {"WWW-Authenticate": "Bearer"})
        origin = headers.get("origin")
        if origin is not None and not same_origin(origin, headers.get("host", "")):
            raise Refusal(403, f"a write from the web page at {origin[:200]!r} is refused: only pages of this "
                               "server itself may write")
        media = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if media != "application/json":
            raise Refusal(415, "a write needs 'Content-Type: application/json' (with a JSON body, or none)")

    # -- WebSocket -----------------------------------------------------------------------
    async def websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = Headers(scope=scope)
        origin = headers.get("origin")
        try:
            self.check_host(headers)
            self.check_nul(scope)
            if origin is not None and not same_origin(origin, headers.get("host", "")):
                raise Refusal(403, "cross-origin socket")
        except Refusal:
            await receive()  # websocket.connect
            await send({"type": "websocket.close", "code": CLOSE_POLICY})  # before accept: HTTP 403
            return
        if self.token:
            subprotocols = scope.get("subprotocols") or []
            given = bearer(headers.get("authorization")) or ws_token(subprotocols)
            if not token_matches(given, self.token):
                await receive()
                await send({"type": "websocket.accept", "subprotocol": ws_subprotocol(subprotocols)})
                frame = {"type": "error", "message": "this server needs the API token (JURIST_API_TOKEN)"}
                await send({"type": "websocket.send", "text": json.dumps(frame)})
                await send({"type": "websocket.close", "code": CLOSE_UNAUTHORIZED})
                return
        await self.app(scope, receive, send)


def check_surrogates(body: bytes) -> None:
    """A 422 naming where a JSON body holds a lone surrogate: a string that is not text (half of a
    UTF-16 pair) and cannot be encoded, stored or shown. A body that is not JSON is the route's to refuse."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return
    where = lone_surrogate(data)
    if where is not None:
        path, text = where
        at = next(i for i, ch in enumerate(text) if "\ud800" <= ch <= "\udfff")
        raise Refusal(422, f"invalid request: {path or 'the body'}: a lone surrogate (\\u{ord(text[at]):04x}) at "
                           f"character {at + 1}: half of a UTF-16 pair is not text; send the character itself, or "
                           "both halves of its escape")


def lone_surrogate(data: object) -> tuple[str, str] | None:
    """The first string (a value or a key) of decoded JSON that holds a lone surrogate, with where it
    is (``session.0.content``); None if there is none. Walked without recursion (bodies nest deep)."""
    stack: list[tuple[str, object]] = [("", data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return path, value
        elif isinstance(value, dict):
            for key in value:
                try:
                    key.encode("utf-8")
                except UnicodeEncodeError:
                    return f"{path} (a field's name)" if path else "a field's name", key
            stack.extend((f"{path}.{key}" if path else key, item) for key, item in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend((f"{path}.{i}" if path else str(i), item) for i, item in reversed(list(enumerate(value))))
    return None


def too_large(limit: int) -> Refusal:
    return Refusal(413, f"the request body is larger than this server accepts ({limit:,} bytes; "
                        "max_body_bytes / max_proxy_body_bytes in the settings)", {"Connection": "close"})


async def read_body(receive: Receive, limit: int) -> Message:
    """The whole body as one ``http.request`` message, cut (413) as soon as it passes ``limit``;
    a disconnect is passed on as it is."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return message
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise too_large(limit)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return {"type": "http.request", "body": b"".join(chunks), "more_body": False}


def replay(first: Message, receive: Receive) -> Callable[[], Awaitable[Message]]:
    """A ``receive`` that gives the buffered body first, then what the server sends (a disconnect)."""
    pending = [first]

    async def receive_again() -> Message:
        return pending.pop() if pending else await receive()

    return receive_again


async def respond(scope: Scope, send: Send, refusal: Refusal) -> None:
    body = json.dumps(error_body(scope["path"], refusal.status, refusal.detail)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.lower().encode(), v.encode()) for k, v in refusal.headers.items()]
    await send({"type": "http.response.start", "status": refusal.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
