"""The gate proxy: an OpenAI-compatible ``/v1/chat/completions`` that judges before it answers.

The upstream (any OpenAI-compatible endpoint) is the generator: every
attempt streams from it with the ``openai`` SDK, and :class:`jurist.gate.Gate`
evaluates, regenerates and accepts. A stock OpenAI client works unchanged:

* non-streaming: a ``chat.completion`` with the accepted answer, plus a
  top-level ``jurist`` field (trace id, evaluations, every LLM call, attempts,
  accept reason, whether evaluation was skipped);
* streaming: ``chat.completion.chunk`` SSE carrying the answer deltas, with
  jurist's own events as named SSE events (``event: jurist.evaluation``; see
  :mod:`jurist.server.proxy_sse`) and ``jurist`` on the final chunk.

Upstream errors keep their status and body. An upstream failure once the
answer is under way ends the stream with ``jurist.error`` carrying
``continue_context`` (the messages to resend with ``"is_continuation": true``).

The gate is built by ``ProxyState.gate_factory`` (default :func:`default_gate`,
which is ``jurist.gate.Gate``): the injection point for tests and embedders.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Any, Callable, Protocol

import httpx
import openai
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from jurist.config import Settings
from jurist.errors import JuristError
from jurist.gate.policy import current_cycle
from jurist.gate.types import (
    CALL_COMPREHENSIVE_RETRY,
    CALL_GENERATION,
    CALL_REGENERATION,
    REVISION_MESSAGE,
    GateEvent,
    GateResult,
)
from jurist.ids import new_id
from jurist.server.proxy_sse import ChunkWriter, completion_body, jurist_field, openai_error

log = logging.getLogger("jurist.server.proxy")

ROLES = {"system", "developer", "user", "assistant", "tool", "function"}
# Body fields that are the proxy's own business, never forwarded upstream.
OWN_FIELDS = {"model", "messages", "stream", "is_continuation", "jurist"}
GENERATION_TYPES = {CALL_GENERATION, CALL_REGENERATION, CALL_COMPREHENSIVE_RETRY}


class GateLike(Protocol):
    """What the proxy needs of a gate (``jurist.gate.Gate``)."""

    async def run(self, messages: list[dict[str, Any]], generate: Any, *, is_continuation: bool = False,
                  trace_id: str | None = None) -> GateResult: ...

    def stream(self, messages: list[dict[str, Any]], generate: Any, *, is_continuation: bool = False,
               trace_id: str | None = None) -> AsyncIterator[GateEvent]: ...

    async def aclose(self) -> None: ...


GateFactory = Callable[[Any, Settings, Any], GateLike]  # (gate_config, settings, store) -> gate


def default_gate(config: Any, settings: Settings, store: Any) -> GateLike:
    """``jurist.gate.Gate`` on the configured GateConfig (a dict is validated into one)."""
    from jurist.gate.config import GateConfig
    from jurist.gate.gate import Gate

    if isinstance(config, dict):
        config = GateConfig(**config)
    return Gate(config, settings=settings, store=store)  # type: ignore[no-any-return]


class ChatBody(BaseModel):
    """The part of a chat completion request the proxy reads; the rest is forwarded as is."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1)
    messages: list[dict[str, Any]] = Field(min_length=1)
    stream: bool = False
    n: int | None = Field(default=None, ge=1, le=1)  # one answer per request: the gated one
    is_continuation: bool = False


class ProxyState:
    """The proxy's shared pieces: upstream clients (one per API key) and the gate."""

    def __init__(self, upstream: str, gate_config: Any, settings: Settings, store: Callable[[], Any],
                 api_key: str | None = None, gate_factory: GateFactory | None = None) -> None:
        self.upstream = upstream.rstrip("/")
        self.gate_config = gate_config
        self.settings = settings
        self.store = store
        self.api_key = api_key
        self.gate_factory: GateFactory = gate_factory or default_gate  # the injection point
        self._gate: GateLike | None = None
        self._clients: dict[str, openai.AsyncOpenAI] = {}

    @property
    def gate(self) -> GateLike:
        if self._gate is None:
            self._gate = self.gate_factory(self.gate_config, self.settings, self.store())
        return self._gate

    def client(self, request: Request) -> openai.AsyncOpenAI:
        """An SDK client for the caller's key (``Authorization: Bearer``), else the configured one."""
        auth = request.headers.get("authorization", "")
        key = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
        key = key or self.api_key or "none"
        if key not in self._clients:
            # No SDK retries: the caller's own client retries, and sees the upstream's 429 / Retry-After.
            self._clients[key] = openai.AsyncOpenAI(base_url=self.upstream, api_key=key, max_retries=0,
                                                    timeout=self.settings.timeout)
        return self._clients[key]

    async def aclose(self) -> None:
        gate, self._gate = self._gate, None
        if gate is not None:
            await gate.aclose()
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.close()


class UpstreamStreamEnded(openai.APIError):
    """The upstream stream stopped before its finish_reason (a dropped or truncated stream)."""


class Upstream:
    """One request's generator: each call streams one attempt's deltas from the upstream.

    The first stream is opened before the gate starts (:meth:`prime`, on the
    messages the gate will pass: :func:`jurist.gate.policy.current_cycle`), so
    an upstream 4xx/5xx becomes the proxy's own status rather than a gate event.
    """

    def __init__(self, client: openai.AsyncOpenAI, model: str, params: dict[str, Any]) -> None:
        self.client = client
        self.model = model
        self.params = params
        self.calls: list[dict[str, Any]] = []  # one per upstream call: {type, iteration, model, tokens, latency_ms, status}
        self.error: Exception | None = None
        self._primed: Any = None
        self._primed_for: list[dict[str, Any]] | None = None
        self.__qualname__ = f"upstream:{model}"  # the gate names function generators by their qualname

    async def _open(self, messages: list[dict[str, Any]]) -> Any:
        call = {"type": CALL_GENERATION if not self.calls else CALL_REGENERATION, "iteration": len(self.calls) + 1,
                "model": self.model, "input_tokens": None, "output_tokens": None, "tokens": None, "usage": None,
                "latency_ms": None, "status": "running", "call_id": new_id()}
        self.calls.append(call)
        call["_start"] = time.perf_counter()
        try:
            return await self.client.chat.completions.create(
                model=self.model, messages=messages, stream=True, extra_body=self.params or None)  # type: ignore[arg-type]
        except Exception as exc:
            self._failed(call, exc)
            raise

    def _failed(self, call: dict[str, Any], exc: Exception) -> None:
        self.error = exc
        call["status"] = f"error:{getattr(exc, 'status_code', None) or type(exc).__name__}"
        call["latency_ms"] = round((time.perf_counter() - call.pop("_start", time.perf_counter())) * 1000, 1)

    async def prime(self, messages: list[dict[str, Any]]) -> None:
        self._primed = await self._open(messages)
        self._primed_for = messages

    async def __call__(self, messages: list[dict[str, Any]]) -> AsyncIterator[str]:
        stream, self._primed = self._primed, None
        if stream is not None and messages != self._primed_for:  # the gate asked for something else
            await stream.close()
            self.calls.pop()
            stream = None
        if stream is None:
            stream = await self._open(messages)
        return self._deltas(stream, self.calls[-1])

    async def _deltas(self, stream: Any, call: dict[str, Any]) -> AsyncIterator[str]:
        finished = False
        try:
            async for chunk in stream:
                if chunk.usage is not None:
                    usage = chunk.usage
                    call.update(usage=usage.model_dump(exclude_none=True), input_tokens=usage.prompt_tokens,
                                output_tokens=usage.completion_tokens, tokens=usage.total_tokens)
                for choice in chunk.choices or []:
                    if choice.delta is not None and choice.delta.content:
                        yield choice.delta.content
                    if choice.finish_reason:
                        finished = True
            if not finished:
                raise UpstreamStreamEnded("the upstream stream ended before its finish_reason",
                                          request=stream.response.request, body=None)
        except Exception as exc:
            self._failed(call, exc)
            raise
        finally:
            await stream.close()
        call["status"] = "ok"
        call["latency_ms"] = round((time.perf_counter() - call.pop("_start")) * 1000, 1)

    def usage(self, attempt: int | None) -> dict[str, Any] | None:
        calls = self.calls
        if attempt is not None and 1 <= attempt <= len(calls):
            return calls[attempt - 1]["usage"]  # type: ignore[no-any-return]
        return calls[-1]["usage"] if calls else None

    def public_calls(self) -> list[dict[str, Any]]:
        return [{k: v for k, v in c.items() if not k.startswith("_") and k != "usage"} for c in self.calls]

    def enrich(self, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The gate's call list with the upstream's model, tokens and status on its generation calls (in order)."""
        mine = iter(self.public_calls())
        out = []
        for call in calls:
            call = dict(call) if isinstance(call, dict) else call
            if isinstance(call, dict) and call.get("type") in GENERATION_TYPES:
                up = next(mine, None)
                if up is not None:
                    call["model"] = up["model"]
                    for key in ("input_tokens", "output_tokens", "tokens"):
                        call[key] = call.get(key) or up[key]
                    if up["status"] != "ok":
                        call["upstream_status"] = up["status"]
            out.append(call)
        return out


def _error(status: int, message: str, **kw: Any) -> JSONResponse:
    return JSONResponse(openai_error(status, message, **kw), status_code=status)


def passthrough(exc: Exception) -> Response:
    """The upstream's own status and body (and Retry-After); a connection failure is a 502."""
    if isinstance(exc, openai.APIStatusError):
        resp = exc.response
        headers = {k: v for k, v in resp.headers.items() if k.lower() in ("retry-after", "x-request-id")}
        return Response(resp.content, status_code=resp.status_code, headers=headers,
                        media_type=resp.headers.get("content-type", "application/json"))
    if isinstance(exc, openai.APITimeoutError):
        return _error(504, "the upstream did not answer in time", code="upstream_timeout")
    return _error(502, f"the upstream failed: {exc}", code="upstream_unavailable")


async def _parse(request: Request) -> ChatBody | JSONResponse:
    try:
        raw = await request.json()
    except ValueError:
        return _error(400, "the request body is not valid JSON")
    if not isinstance(raw, dict):
        return _error(400, "the request body must be a JSON object")
    try:
        body = ChatBody.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        param = ".".join(str(p) for p in first.get("loc", ()))
        detail = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        return _error(422, f"invalid request: {detail}", param=param or None)
    for i, message in enumerate(body.messages):
        if message.get("role") not in ROLES:
            return _error(422, f"invalid request: messages.{i}.role must be one of {', '.join(sorted(ROLES))}",
                          param=f"messages.{i}.role")
    return body


def _params(body: ChatBody) -> dict[str, Any]:
    """The fields forwarded upstream as they are; usage is asked for so every call's tokens are on record."""
    params = {k: v for k, v in (body.model_extra or {}).items() if k not in OWN_FIELDS}
    if body.n is not None:
        params["n"] = body.n
    params["stream_options"] = {**(params.get("stream_options") or {}), "include_usage": True}
    return params


def _error_data(exc: BaseException, messages: list[dict[str, Any]], context: Any = None) -> dict[str, Any]:
    status = getattr(exc, "status_code", None) or 502
    return {"error": str(exc) or type(exc).__name__, "code": "upstream_error", "status": status,
            "continue_context": context if context is not None else messages}


def build_router(proxy: ProxyState) -> APIRouter:
    router = APIRouter(tags=["proxy"])

    @router.get("/v1/models")
    async def models(request: Request) -> Response:
        """The upstream's model list, passed through; an empty list if the upstream has none."""
        client = proxy.client(request)
        try:
            resp = await client.get("/models", cast_to=httpx.Response)
            return Response(resp.content, status_code=resp.status_code, media_type="application/json")
        except openai.APIStatusError as exc:
            if exc.status_code in (401, 403):
                return passthrough(exc)
        except openai.APIError:
            pass
        return JSONResponse({"object": "list", "data": []})

    @router.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        parsed = await _parse(request)
        if isinstance(parsed, JSONResponse):
            return parsed
        body = parsed
        try:
            proxy.gate  # built on first use: a missing judge says so in OpenAI's error shape
        except JuristError as exc:
            return _error(500, f"the gate is not configured: {exc}", code="gate_not_configured")
        trace_id = request.headers.get("x-jurist-trace-id") or new_id()
        upstream = Upstream(proxy.client(request), body.model, _params(body))
        try:
            await upstream.prime(current_cycle(body.messages, body.is_continuation))
        except openai.APIError as exc:
            return passthrough(exc)
        completion_id = f"chatcmpl-jurist-{trace_id[:24]}"
        if body.stream:
            return StreamingResponse(_stream(proxy, body, upstream, trace_id, completion_id),
                                     media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache", "X-Jurist-Trace-Id": trace_id})
        return await _complete(proxy, body, upstream, trace_id, completion_id)

    return router


async def _complete(proxy: ProxyState, body: ChatBody, upstream: Upstream, trace_id: str,
                    completion_id: str) -> Response:
    try:
        result = await proxy.gate.run(body.messages, generate=upstream, is_continuation=body.is_continuation,
                                      trace_id=trace_id)
    except openai.APIStatusError as exc:
        return passthrough(exc)
    except (openai.APIError, httpx.HTTPError) as exc:
        data = _error_data(exc, body.messages)
        return JSONResponse(openai_error(502, data["error"], code="upstream_error",
                                         continue_context=data["continue_context"]), status_code=502)
    jurist = _with_calls(jurist_field(result, trace_id), upstream)
    if result.error is not None:
        status = upstream.error.status_code if isinstance(upstream.error, openai.APIStatusError) else 502
        context = result.continue_context if result.continue_context is not None else body.messages
        payload = openai_error(status, result.error, code="upstream_error", continue_context=context)
        payload["jurist"] = jurist
        return JSONResponse(payload, status_code=status)
    return JSONResponse(completion_body(completion_id, body.model, result.answer, jurist,
                                        upstream.usage(result.accepted_attempt)))


def _with_calls(jurist: dict[str, Any], upstream: Upstream) -> dict[str, Any]:
    """Every LLM call: the gate's list, plus the upstream calls if the gate did not list its generations."""
    kinds = {c.get("type") for c in jurist["llm_calls"] if isinstance(c, dict)}
    if kinds & GENERATION_TYPES:
        jurist["llm_calls"] = upstream.enrich(jurist["llm_calls"])
    else:
        jurist["llm_calls"] = [*upstream.public_calls(), *jurist["llm_calls"]]
    return jurist


async def _stream(proxy: ProxyState, body: ChatBody, upstream: Upstream, trace_id: str,
                  completion_id: str) -> AsyncIterator[str]:
    out = ChunkWriter(completion_id, body.model)
    yield out.role()
    events = proxy.gate.stream(body.messages, generate=upstream, is_continuation=body.is_continuation,
                               trace_id=trace_id)
    try:
        async with contextlib.aclosing(events):  # type: ignore[type-var]
            async for ev in events:
                data = ev.data if isinstance(ev.data, dict) else {"value": ev.data}
                if ev.type == "delta":
                    yield out.delta(str(data.get("text") or data.get("delta") or data.get("content") or ""))
                elif ev.type == "revision":
                    # The gate replaces an answer already shown. A stock client cannot unprint it, so
                    # it gets the revision note and then the accepted text (data["text"]) as more deltas.
                    yield out.event("revision", data)
                    text = str(data.get("text") or "")
                    if text:
                        if out.sent_text:
                            yield out.delta(f"\n\n{data.get('message') or REVISION_MESSAGE}\n\n")
                        yield out.delta(text)
                elif ev.type == "done":
                    result = getattr(ev, "result", None)
                    jurist = _with_calls(jurist_field(result if result is not None else data, trace_id), upstream)
                    yield out.event("done", jurist)
                    accepted = getattr(result, "accepted_attempt", None) or data.get("accepted_attempt")
                    yield out.finish(jurist, upstream.usage(accepted))
                    yield out.done()
                    return
                elif ev.type == "error":
                    err = dict(data)
                    err.setdefault("continue_context", body.messages)
                    if err.get("status") is None:
                        err["status"] = getattr(upstream.error, "status_code", None) or 502
                    err.setdefault("code", "upstream_error")
                    yield out.event("error", err)
                    yield out.done()
                    return
                else:
                    yield out.event(ev.type, data)
    except Exception as exc:  # the gate itself raised (an upstream failure it did not turn into an event)
        log.warning("gate stream failed: %s", exc)
        yield out.event("error", _error_data(exc, body.messages))
        yield out.done()
        return
    # The gate ended without done: still close the answer properly.
    yield out.finish(_with_calls(jurist_field(None, trace_id), upstream))
    yield out.done()


def install(app: FastAPI, upstream: str, gate_config: Any, settings: Settings, store: Callable[[], Any], *,
            api_key: str | None = None, gate_factory: GateFactory | None = None) -> ProxyState:
    """Serve the proxy on ``app``; the state is ``app.state.proxy`` (closed by :meth:`ProxyState.aclose`)."""
    proxy = ProxyState(upstream, gate_config, settings, store, api_key=api_key, gate_factory=gate_factory)
    app.state.proxy = proxy
    app.include_router(build_router(proxy))
    return proxy
