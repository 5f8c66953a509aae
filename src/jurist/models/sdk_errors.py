"""Errors of the provider SDKs, turned into jurist's, in one place for both adapters.

The ``openai`` and ``anthropic`` SDKs share their error classes' names and
shape, so one mapping serves both: timeouts, dropped connections, HTTP
statuses (with ``Retry-After``), invalid bodies.
"""

from __future__ import annotations

import json
import sys
import time
from email.utils import parsedate_to_datetime
from typing import Any, Mapping

import aiohttp

from jurist.errors import (
    AuthFailed,
    JuristError,
    ModelError,
    ModelTimeout,
    ModelUnavailable,
    RateLimited,
    RequestRejected,
)


def _transport_errors() -> tuple[tuple[type[Exception], ...], tuple[type[Exception], ...]]:
    """Timeout and transport exception classes of the HTTP libraries the SDKs use.

    Recent SDKs run on ``httpx2``, older ones on ``httpx``; a few raw transport
    errors (e.g. while reading a stream) escape the SDKs' own wrapping. Only
    libraries already imported count: the others raised nothing.
    """
    timeouts: list[type[Exception]] = []
    transport: list[type[Exception]] = []
    for name in ("httpx2", "httpx"):
        module = sys.modules.get(name)
        if module is not None:
            timeouts.append(module.TimeoutException)
            transport.append(module.TransportError)
    return tuple(timeouts), tuple(transport)


def map_sdk_error(
    exc: BaseException, sdk: Any, base_error: type[Exception] | None, *, model: str, endpoint: str,
    key_hint: str, wire: str,
) -> Exception:
    """The one place where SDK (and transport) errors become jurist errors.

    ``sdk`` is the ``openai`` or the ``anthropic`` module (both define the same
    error classes) and ``base_error`` its root error class, or both None when
    the SDK was not used; ``wire`` names the protocol in messages. Returns the
    exception to raise; anything unknown is returned unchanged.
    """
    where = f"{model} at {endpoint}"
    if isinstance(exc, JuristError):
        return exc
    http_timeouts, http_transport_errors = _transport_errors()
    sdk_timeouts = (sdk.APITimeoutError,) if sdk else ()
    sdk_connection = (sdk.APIConnectionError,) if sdk else ()
    if isinstance(exc, (*sdk_timeouts, *http_timeouts, TimeoutError)) and not dropped_connection(exc):
        return ModelTimeout(f"{where} did not answer in time; raise the timeout or check the server", model=model)
    if isinstance(exc, (*sdk_connection, *http_transport_errors, aiohttp.ClientError)):
        return ModelUnavailable(
            f"{where} could not be reached or dropped the connection ({exc}); check that the server is "
            "running and base_url is right",
            model=model,
        )
    if sdk is not None and isinstance(exc, sdk.APIStatusError):
        return status_error(
            exc.status_code, error_text(exc), exc.response.headers, model=model, where=where, key_hint=key_hint
        )
    if sdk is not None and isinstance(exc, sdk.APIError):  # an error event in the middle of a stream, or an invalid body
        return ModelUnavailable(f"{where} failed: {exc.message}; try again later", model=model)
    if isinstance(exc, (json.JSONDecodeError, UnicodeDecodeError)):
        return ModelUnavailable(
            f"{where} sent a reply that is not valid JSON ({exc}); the server may be overloaded or not "
            f"{wire}-compatible",
            model=model,
        )
    if base_error is not None and isinstance(exc, base_error):
        return ModelUnavailable(f"{where} failed: {exc}", model=model)
    return exc


def dropped_connection(exc: BaseException) -> bool:
    """True when a "timeout" is really a connection the server closed.

    The SDK's aiohttp transport reports every aiohttp connection error as a
    connect timeout; the original error is still in the exception chain.
    """
    seen = 0
    cur: BaseException | None = exc
    while cur is not None and seen < 10:
        if isinstance(cur, aiohttp.ClientConnectionError) and not isinstance(cur, aiohttp.ServerTimeoutError):
            return not isinstance(cur, (aiohttp.ConnectionTimeoutError, aiohttp.SocketTimeoutError))
        cur = cur.__cause__ or cur.__context__
        seen += 1
    return False


def status_error(
    status: int, detail: str, headers: Mapping[str, str], *, model: str, where: str, key_hint: str
) -> ModelError:
    """Turn an HTTP error status into the jurist error for it (shared by the adapters)."""
    said = f": {detail}" if detail else ""
    if status == 429:
        retry_after = retry_after_seconds(headers)
        wait = f"retry after {retry_after:g} s, or " if retry_after is not None else ""
        return RateLimited(
            f"{where} is rate limiting (429){said}; {wait}lower max_in_flight / requests per minute for it",
            retry_after=retry_after,
            model=model,
            status=status,
        )
    if status in (401, 403):
        return AuthFailed(f"{where} refused the credentials ({status}){said}; {key_hint}", model=model, status=status)
    if status == 408:
        return ModelTimeout(f"{where} timed out the request (408){said}; try again", model=model, status=status)
    if status >= 500 or status < 400:
        return ModelUnavailable(
            f"{where} failed on its side ({status}){said}; try again later or use another model",
            model=model,
            status=status,
        )
    return RequestRejected(
        f"{where} rejected the request ({status}){said}; check the model name, the parameters and the "
        "prompt size",
        model=model,
        status=status,
    )


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = (headers.get("retry-after") or "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def error_text(exc: Any) -> str:
    """The server's own error message, if the SDK error's body has one."""
    return _body_message(getattr(exc, "body", None))


def error_detail(raw: bytes) -> str:
    """The server's own error message from a raw error body (JSON or text)."""
    text = raw[:4096].decode("utf-8", "replace")
    try:
        body: Any = json.loads(text)
    except ValueError:
        body = text.strip()
    return _body_message(body)


def _body_message(body: Any) -> str:
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return err["message"]
        if isinstance(body.get("message"), str):
            return body["message"]
    if isinstance(body, str):
        return body[:200]
    return ""
