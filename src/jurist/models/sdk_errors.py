"""Errors of the model endpoints, turned into jurist's, in one place for both adapters.

:func:`status_error` turns an HTTP error status (with its body and
``Retry-After``) into the jurist error; :func:`map_transport_error` handles
timeouts, dropped connections and invalid bodies; :func:`map_sdk_error` adds
the ``anthropic`` SDK's own error classes in front of both.
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

#: Headers of an error reply kept on the error (lower case), for a proxy to relay.
RELAYED_HEADERS = ("retry-after", "retry-after-ms", "x-request-id", "content-type")


def _httpx_errors() -> tuple[tuple[type[Exception], ...], tuple[type[Exception], ...]]:
    """Timeout and transport exception classes of the HTTP libraries the
    ``anthropic`` SDK runs on (recent ones on ``httpx2``, older on ``httpx``);
    a few raw transport errors (e.g. while reading a stream) escape the SDK's
    own wrapping. Only libraries already imported count: the others raised nothing.
    """
    timeouts: list[type[Exception]] = []
    transport: list[type[Exception]] = []
    for name in ("httpx2", "httpx"):
        module = sys.modules.get(name)
        if module is not None:
            timeouts.append(module.TimeoutException)
            transport.append(module.TransportError)
    return tuple(timeouts), tuple(transport)


def map_transport_error(
    exc: Exception, *, model: str, endpoint: str, wire: str,
    timeouts: tuple[type[Exception], ...] = (), connection_errors: tuple[type[Exception], ...] = (),
) -> Exception:
    """The one mapping of transport failures to jurist errors: a timeout, a
    connection refused or dropped (aiohttp, the SDKs' ``httpx``, or an SDK's own
    ``timeouts`` / ``connection_errors``), a body that is not valid JSON. Returns
    the exception to raise; jurist's own errors and anything unknown are returned unchanged."""
    where = f"{model} at {endpoint}"
    if isinstance(exc, JuristError):
        return exc
    http_timeouts, http_transport_errors = _httpx_errors()
    if isinstance(exc, (*timeouts, *http_timeouts, TimeoutError)) and not dropped_connection(exc):
        return ModelTimeout(f"{where} did not answer in time; raise the timeout or check the server", model=model)
    if isinstance(exc, (*connection_errors, *http_transport_errors, aiohttp.ClientError)):
        return ModelUnavailable(
            f"{where} could not be reached or dropped the connection ({exc}); check that the server is "
            "running and base_url is right",
            model=model,
        )
    if isinstance(exc, (json.JSONDecodeError, UnicodeDecodeError)):
        return ModelUnavailable(
            f"{where} sent a reply that is not valid JSON ({exc}); the server may be overloaded or not "
            f"{wire}-compatible",
            model=model,
        )
    # JSON that decodes into nothing Python holds: nested past the recursion limit, or an integer of
    # more than 4,300 digits (Python's ValueError says "integer string conversion")
    if isinstance(exc, RecursionError) or (isinstance(exc, ValueError) and "integer string conversion" in str(exc)):
        return ModelUnavailable(f"{where} sent a reply too deep or with a number too long to read; the server "
                                f"may not be {wire}-compatible", model=model)
    return exc


def map_sdk_error(
    exc: Exception, sdk: Any, base_error: type[Exception], *, model: str, endpoint: str,
    key_hint: str, wire: str,
) -> Exception:
    """A provider SDK's errors as jurist errors (the ``anthropic`` SDK's; the
    ``openai`` SDK defines the same classes), then :func:`map_transport_error`.

    ``sdk`` is the SDK module and ``base_error`` its root error class; ``wire``
    names the protocol in messages. Anything unknown is returned unchanged.
    """
    where = f"{model} at {endpoint}"
    if isinstance(exc, sdk.APIStatusError):
        return status_error(exc.status_code, error_text(exc), exc.response.headers, model=model, where=where,
                            key_hint=key_hint, body=_read_body(exc.response))
    mapped = map_transport_error(exc, model=model, endpoint=endpoint, wire=wire, timeouts=(sdk.APITimeoutError,),
                                 connection_errors=(sdk.APIConnectionError,))
    if mapped is not exc:
        return mapped
    if isinstance(exc, sdk.APIError):  # an error event in the middle of a stream, or an invalid body
        return ModelUnavailable(f"{where} failed: {exc.message}; try again later", model=model)
    if isinstance(exc, base_error):
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
    status: int, detail: str, headers: Mapping[str, str], *, model: str, where: str, key_hint: str,
    body: bytes | None = None,
) -> ModelError:
    """Turn an HTTP error status into the jurist error for it (shared by the adapters);
    the error carries the status, the raw ``body`` and the headers, for a proxy to relay."""
    said = f": {detail}" if detail else ""
    kept = {k.lower(): v for k, v in headers.items() if k.lower() in RELAYED_HEADERS}
    common: dict[str, Any] = {"model": model, "status": status, "body": body, "headers": kept}
    if status == 429:
        retry_after = retry_after_seconds(headers)
        wait = f"retry after {retry_after:g} s, or " if retry_after is not None else ""
        return RateLimited(
            f"{where} is rate limiting (429){said}; {wait}lower max_in_flight / requests per minute for it",
            retry_after=retry_after,
            **common,
        )
    if status in (401, 403):
        return AuthFailed(f"{where} refused the credentials ({status}){said}; {key_hint}", **common)
    if status == 408:
        return ModelTimeout(f"{where} timed out the request (408){said}; try again", **common)
    if status >= 500 or status < 400:
        return ModelUnavailable(
            f"{where} failed on its side ({status}){said}; try again later or use another model",
            **common,
        )
    return RequestRejected(
        f"{where} rejected the request ({status}){said}; check the model name, the parameters and the "
        "prompt size",
        **common,
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


def _read_body(response: Any) -> bytes | None:
    """The body of an SDK's error response, if it was read (a stream's may not be)."""
    try:
        return bytes(response.content)
    except Exception:  # the HTTP library's "not read yet"
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
        message = err.get("message") if isinstance(err, dict) else None
        if isinstance(message, str):
            return message
        message = body.get("message")
        if isinstance(message, str):
            return message
    if isinstance(body, str):
        return body[:200]
    return ""
