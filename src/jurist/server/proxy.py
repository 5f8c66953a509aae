"""The gate proxy: an OpenAI-compatible ``/v1/chat/completions`` that judges before it answers.

The upstream (any OpenAI-compatible endpoint) is the generator: a
:class:`~jurist.models.openai.OpenAIChat` adapter inside a
:class:`~jurist.models.model.Model` (:func:`upstream_model`), so every
attempt passes the endpoint's limiter and is a call record (purpose
``generation``, ``regeneration`` ..., with tokens and latency, failed ones
too) in ``llm_calls``; :class:`jurist.gate.Gate` evaluates, regenerates and
accepts. Without an API token (a loopback-only server) the caller's
``Authorization`` key goes upstream with each request (never recorded), else
``--api-key``; with a token, the caller's ``Authorization`` is the token
(checked by :mod:`jurist.server.guard`) and the upstream key is always
``--api-key``. Nothing is cached and nothing retried: the caller's own
client sees the upstream's status, body and ``Retry-After``. A stock OpenAI
client works unchanged:

* non-streaming: a ``chat.completion`` with the accepted answer, plus a
  top-level ``jurist`` field: the gate's record of the request, the same
  dict that is stored as the evaluation's payload (trace id, evaluations,
  every LLM call, attempts, accept reason, whether evaluation was skipped);
  with feedback off, the record at ``done`` (``evaluation_pending``: the judge
  scores the answer after it is sent, and the stored record has that evaluation);
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

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, JsonValue, ValidationError

from jurist.config import UPSTREAM_PROVIDER, Settings
from jurist.errors import InputError, JuristError, ModelError, ModelTimeout
from jurist.gate.policy import current_cycle, last_user_index
from jurist.gate.events import DeltaEvent, DoneEvent, ErrorEvent, GateEvent, RevisionEvent
from jurist.gate.records import PURPOSE, CallCollector, CallEntry, GateRecord
from jurist.gate.types import CALL_COMPREHENSIVE_RETRY, CALL_GENERATION, CALL_REGENERATION, REVISION_MESSAGE
from jurist.ids import new_id
from jurist.gate.records import ATTEMPT
from jurist.models.base import ChatRequest, Completion, StreamItem, ToolCallAssembly, ToolCallDelta
from jurist.models.messages import AssistantMessage, Message, messages_from_openai
from jurist.models.limiter_pool import LimiterPool
from jurist.models.model import CallSink, Model, RetryPolicy
from jurist.models.registry import model_for
from jurist.models.openai import NO_KEY, OpenAIChat, strict_loads
from jurist.runtime import Runtime
from jurist.server.auth import bearer
from jurist.server.proxy_sse import (Answered, ChunkWriter, Usage, completion_body, jurist_field, openai_error,
                                     tool_round_field)

log = logging.getLogger("jurist.server.proxy")

# Body fields that are the proxy's own business, never forwarded upstream.
OWN_FIELDS = {"model", "messages", "stream", "is_continuation", "isContinuation", "jurist", "extractedContent",
              "extracted_content"}
#: The longest trace id and model name the store keeps (its ``trace_id`` and ``model`` columns):
#: a longer one is refused with a 400, never a record lost.
MAX_TRACE_ID, MAX_MODEL_NAME = 64, 200
#: Error codes (note 004's names): the answer failed / the caller's tool loop hit its limit / the time budget ran out.
GENERATION_FAILED, MAX_ITERATIONS = "GENERATION_FAILED", "MAX_ITERATIONS"
#: The rounds of tools a caller's loop may run for one user turn (note 004's MAX_ITERATIONS); 0: no limit.
DEFAULT_MAX_ITERATIONS = 25


def tool_rounds(messages: Sequence[Message]) -> int:
    """The rounds of the current tool loop: assistant turns that call tools after the last user turn."""
    return sum(1 for m in messages[last_user_index(messages) + 1:] if isinstance(m, AssistantMessage) and m.tool_calls)
GENERATION_TYPES = {CALL_GENERATION, CALL_REGENERATION, CALL_COMPREHENSIVE_RETRY}


class GateLike(Protocol):
    """What the proxy needs of a gate (``jurist.gate.Gate``)."""

    async def run(self, messages: Iterable[Message | Mapping[str, Any]], generate: Any, *,
                  is_continuation: bool = False, trace_id: str | None = None,
                  structured: bool = False) -> GateRecord: ...

    def stream(self, messages: Iterable[Message | Mapping[str, Any]], generate: Any, *, is_continuation: bool = False,
               trace_id: str | None = None, structured: bool = False) -> AsyncGenerator[GateEvent, None]: ...

    def wrap(self, model: Model) -> Model: ...

    async def settle(self, trace_id: str, timeout: float | None = None) -> GateRecord | None: ...

    async def aclose(self) -> None: ...


GateFactory = Callable[[Any, Runtime], GateLike]  # (gate_config, the server's runtime) -> gate


def default_gate(config: Any, runtime: Runtime) -> GateLike:
    """``jurist.gate.Gate`` on the configured GateConfig (a dict is validated into one)."""
    from jurist.gate.config import GateConfig
    from jurist.gate.gate import Gate

    if isinstance(config, dict):
        config = GateConfig(**config)
    return Gate(config, runtime=runtime)


def upstream_model(base_url: str, model: str, settings: Settings, *, sink: CallSink | None = None,
                   api_key: str | None = None, limiters: LimiterPool | None = None) -> Model:
    """The upstream ``model`` at ``base_url`` as a :class:`Model`: an OpenAI-compatible
    adapter, recorded under the model name the caller asked for, behind the
    endpoint's generations' limiter (its lane of ``limiters``, apart from the judges':
    the ``max_in_flight`` of a configured provider with that ``base_url``, else
    ``upstream_max_concurrency``; never the judges' ``max_concurrency``). One answer is read up to
    ``upstream_max_reply_bytes``. No cache, no retries: the caller's own client retries, and sees
    the upstream's 429 and ``Retry-After``."""
    endpoint = base_url.rstrip("/")
    adapter = OpenAIChat(model, provider=UPSTREAM_PROVIDER, base_url=endpoint, api_key=api_key or NO_KEY, name=model,
                         organization=settings.variable("OPENAI_ORG_ID"),
                         project=settings.variable("OPENAI_PROJECT_ID"),
                         max_reply_bytes=settings.upstream_max_reply_bytes)
    return model_for(adapter, settings, limiters if limiters is not None else LimiterPool(settings),
                     provider=UPSTREAM_PROVIDER, sink=sink, cache=False, retry=RetryPolicy(max_retries=0))


class ChatBody(BaseModel):
    """The part of a chat completion request the proxy reads; the rest is forwarded as is."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1)
    messages: list[dict[str, Any]] = Field(min_length=1)
    stream: bool = False
    n: int | None = Field(default=None, ge=1, le=1)  # one answer per request: the gated one
    # The sampling options the proxy sets on the upstream request; every other field is forwarded as it came.
    temperature: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    # Note 004 spells it isContinuation: both are accepted.
    is_continuation: bool = Field(default=False, validation_alias=AliasChoices("is_continuation", "isContinuation"))
    # Note 004's extracted content (what the client's tools found), given back in continueContext; not forwarded.
    extracted_content: JsonValue = Field(default=None,
                                         validation_alias=AliasChoices("extractedContent", "extracted_content"))


class ProxyState:
    """The proxy's shared pieces: the gate and the upstream Models (one per model name)."""

    def __init__(self, upstream: str, gate_config: Any, runtime: Runtime,
                 api_key: str | None = None, gate_factory: GateFactory | None = None,
                 max_iterations: int = DEFAULT_MAX_ITERATIONS) -> None:
        self.upstream = upstream.rstrip("/")
        self.max_iterations = max_iterations
        self.gate_config = gate_config
        self.runtime = runtime
        self.settings = runtime.settings
        self.api_key = api_key
        self.gate_factory: GateFactory = gate_factory or default_gate  # the injection point
        self._gate: GateLike | None = None
        self._models: dict[str, Model] = {}
        self._lister: OpenAIChat | None = None  # GET /v1/models: the upstream's list, one adapter for every request
        # The upstream calls, on their way to the store: the record of a tool-call answer
        # (which the gate never sees) is read from here by its trace id.
        self.calls = CallCollector(runtime.sink)

    @property
    def gate(self) -> GateLike:
        if self._gate is None:
            self._gate = self.gate_factory(self.gate_config, self.runtime)
        return self._gate

    def model(self, name: str) -> Model:
        """The upstream Model for ``name``, its calls stored and in the gate's ``llm_calls``."""
        if name not in self._models:
            self._models[name] = self.gate.wrap(
                upstream_model(self.upstream, name, self.settings, sink=self.calls, api_key=self.api_key,
                               limiters=self.runtime.limiters))
        return self._models[name]

    @property
    def lister(self) -> OpenAIChat:
        """The adapter that reads the upstream's model list (made once, closed with the proxy)."""
        if self._lister is None:
            self._lister = OpenAIChat("models", provider="upstream", base_url=self.upstream,
                                      api_key=self.api_key or NO_KEY,
                                      organization=self.settings.variable("OPENAI_ORG_ID"),
                                      project=self.settings.variable("OPENAI_PROJECT_ID"))
        return self._lister

    def caller_key(self, request: Request) -> str | None:
        """The caller's key (``Authorization: Bearer``), passed upstream with its request; None when
        the server has an API token: the caller's ``Authorization`` is then that token (checked by
        the guard, never sent upstream) and the upstream key is ``api_key`` (``--api-key``)."""
        if self.settings.api_token:
            return None
        return bearer(request.headers.get("authorization"))

    async def settle(self, trace_id: str, timeout: float) -> None:
        """Wait (at most ``timeout`` s) for the gate's evaluation of ``trace_id`` still running
        after ``done`` (feedback off), if there is one."""
        if self._gate is not None:
            await self._gate.settle(trace_id, timeout)

    async def aclose(self) -> None:
        gate, self._gate = self._gate, None
        if gate is not None:
            await gate.aclose()
        models, self._models = list(self._models.values()), {}
        for model in models:
            await model.aclose()
        lister, self._lister = self._lister, None
        if lister is not None:
            await lister.aclose()


@dataclass(frozen=True)
class Forwarded:
    """What a request asks of the upstream besides its messages: the sampling options, and the
    fields the proxy does not read, forwarded as they came (``tools``, ``tool_choice`` ...)."""

    temperature: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    fields: dict[str, JsonValue] = field(default_factory=dict)
    # A ``response_format`` of type ``json_schema``: its schema, name and strictness, sent in the
    # upstream's own dialect (:mod:`jurist.models.structured`, as judge calls are).
    schema: dict[str, Any] | None = None
    schema_name: str = "response"
    schema_strict: bool = False

    @property
    def tools(self) -> bool:
        """The request offers tools."""
        return bool(self.fields.get("tools"))

    @property
    def structured(self) -> bool:
        """The answer is usable only whole: JSON asked with ``response_format`` (a schema, or
        ``json_object``). The gate then never shows it before it is accepted, nor splices a notice into it."""
        fmt = self.fields.get("response_format")
        return self.schema is not None or (isinstance(fmt, dict) and fmt.get("type") in ("json_object", "json_schema"))


class Upstream:
    """One request's generator: each call is one attempt through the upstream Model, on the
    request's trace, with the purpose the gate asks for (generation, regeneration ...), asked the
    way the client asked (streamed, or not: a non-streamed request gets the upstream's whole
    reply, its usage included).

    The upstream receives the client's messages exactly as they came (``wire``: every message,
    tool call, tool result, image and unknown field), with what the gate adds for a regeneration
    after them; the gate (and its judge) works on its own filtered view (``cycle``,
    :func:`jurist.gate.policy.current_cycle`). The first attempt is opened before the gate starts
    (:meth:`prime`), so an upstream 4xx/5xx becomes the proxy's own status rather than a gate
    event, and an answer that calls tools (``tool_answer``) is relayed as it is (:meth:`relay`)
    instead of being judged. A streamed request that offers tools is read until it is clear which
    kind of answer comes (a tool call, or the end of a text answer); one without tools only until
    its first text. ``completions`` holds each attempt's completion by attempt number (finish
    reason, usage, what the reply carried), for the answer the client gets.
    """

    def __init__(self, model: Model, params: Forwarded, *, api_key: str | None, trace_id: str,
                 stream: bool = True, received: Sequence[Message] = (),
                 wire: Sequence[dict[str, JsonValue]] | None = None, cycle: Sequence[Message] = ()) -> None:
        self.model = model
        self.params = params
        self.api_key = api_key
        self.trace_id = trace_id
        self.stream = stream
        self.received = tuple(received)  # the client's messages, typed (the record's view)
        self.wire = tuple(wire) if wire is not None else None  # the same, as sent
        self.cycle = list(cycle)  # what the gate passes for the first attempt
        self.tools = params.tools
        self.tool_answer = False  # the first answer calls tools: relayed, not judged
        self.error: ModelError | None = None  # the last upstream failure
        self.completions: dict[int, Completion] = {}
        self._refused: ModelError | None = None  # the first call's failure (before the gate ran)
        self._primed: AsyncGenerator[StreamItem, None] | None = None
        self._first: list[StreamItem] = []
        self._primed_for: list[Message] | None = None
        self.__qualname__ = f"upstream:{model.name}"  # the gate names function generators by their qualname

    def _request(self, messages: Sequence[Message], purpose: str) -> ChatRequest:
        """The upstream request for the messages the gate asks with: the client's own, as sent,
        then what the gate added after its view of them."""
        p = self.params
        fields = p.fields
        if self.tools and purpose != CALL_GENERATION:
            # The gate asks for a better answer, not for another round of tools (the caller runs those).
            fields = {**fields, "tool_choice": "none"}
        sent: tuple[Message, ...] = tuple(messages)
        wire: tuple[dict[str, JsonValue], ...] | None = None
        n = len(self.cycle)
        if self.wire is not None and list(messages[:n]) == self.cycle:
            added = tuple(messages[n:])
            sent = (*self.received, *added)
            wire = (*self.wire, *(m.openai() for m in added))
        return ChatRequest(messages=sent, wire_messages=wire, temperature=p.temperature, max_tokens=p.max_tokens,
                           seed=p.seed, extra_body=fields or None, api_key=self.api_key,
                           response_schema=p.schema, schema_name=p.schema_name, schema_strict=p.schema_strict)

    def _open(self, messages: Sequence[Message], purpose: str, attempt: int) -> AsyncGenerator[StreamItem, None]:
        request = self._request(messages, purpose)
        if not self.stream:
            return self._whole(request, purpose, attempt)
        done = self.completions[attempt] = Completion(text="", model=self.model.name)
        return self.model.stream(request, purpose=purpose, trace_id=self.trace_id, into=done)

    async def _whole(self, request: ChatRequest, purpose: str, attempt: int) -> AsyncGenerator[StreamItem, None]:
        """One attempt asked not streamed: its text, then its tool calls as pieces."""
        completion = await self.model.complete(request, purpose=purpose, trace_id=self.trace_id)
        self.completions[attempt] = completion
        if completion.text:
            yield completion.text
        for index, call in enumerate(completion.tool_calls or ()):
            function = call.get("function")
            fn = function if isinstance(function, dict) else {}
            yield ToolCallDelta(index=index, id=_text(call.get("id")), type=_text(call.get("type")),
                                name=_text(fn.get("name")), arguments=_text(fn.get("arguments")))

    async def prime(self, messages: list[Message]) -> None:
        """Open the first attempt and read until its kind is known: an error status raises here."""
        stream = self._open(messages, CALL_GENERATION, 1)
        try:
            while (item := await anext(stream, None)) is not None:
                self._first.append(item)
                if isinstance(item, ToolCallDelta):
                    self.tool_answer = True
                    break
                if not self.tools and self.stream:
                    break
        except ModelError as exc:
            self.error = self._refused = exc
            raise
        self._primed, self._primed_for = stream, messages

    async def __call__(self, asked: list[dict[str, Any]]) -> AsyncIterator[str]:
        """The gate's generator: ``asked`` is what the gate passes a generator function (OpenAI-style dicts)."""
        if self._refused is not None:  # the first call failed: the gate records that failure, no new call
            raise self._refused
        messages = list(messages_from_openai(asked))
        stream, first, self._primed = self._primed, self._first, None
        if stream is not None and messages != self._primed_for:  # the gate asked for something else
            await stream.aclose()
            stream = None
        if stream is None:
            stream, first = self._open(messages, PURPOSE.get(), max(ATTEMPT.get(), 1)), []
        return self._items(stream, first, texts_only=True)

    def completion(self, attempt: int) -> Completion | None:
        """The completion of attempt number ``attempt`` (None: no such attempt)."""
        return self.completions.get(attempt)

    async def relay(self) -> AsyncIterator[StreamItem]:
        """The primed answer's items as they come (a tool-call answer, passed through)."""
        stream, self._primed = self._primed, None
        assert stream is not None, "relay() follows prime()"
        async for item in self._items(stream, self._first):
            yield item

    async def _items(self, stream: AsyncGenerator[StreamItem, None], first: list[StreamItem], *,
                     texts_only: bool = False) -> AsyncIterator[Any]:
        """The buffered items, then the rest of the stream; ``texts_only``: the text of an attempt
        for the gate (the pieces of a tool call a judged attempt still makes are no answer text)."""
        try:
            for item in first:
                if not texts_only or isinstance(item, str):
                    yield item
            async for item in stream:
                if not texts_only or isinstance(item, str):
                    yield item
        except ModelError as exc:
            self.error = exc
            raise
        finally:
            await stream.aclose()

    async def aclose(self) -> None:
        """Close a primed stream the gate never took (it is recorded as closed early)."""
        stream, self._primed = self._primed, None
        if stream is not None:
            await stream.aclose()


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _error(status: int, message: str, *, param: str | None = None, code: str | None = None,
           resume: Mapping[str, JsonValue] | None = None, **extra: JsonValue) -> JSONResponse:
    return JSONResponse(openai_error(status, message, param=param, code=code, resume=resume, **extra),
                        status_code=status)


def continuation(messages: list[dict[str, JsonValue]], model: str | None = None, *, provider: str | None = None,
                 extracted: JsonValue = None) -> dict[str, JsonValue]:
    """What a failed request offers to resume it (note 004): ``showContinueButton`` and
    ``continueContext`` ({messages, lastUserMessage, provider, model, extractedContent}; resend its
    messages with ``"isContinuation": true``), and jurist's own ``continue_context`` (the messages,
    as sent). ``provider`` is the upstream's address; ``extractedContent`` only when the request had any."""
    last_user = last_user_index(messages_from_openai(messages))
    sent = list[JsonValue](messages)
    context: dict[str, JsonValue] = {"messages": sent, "lastUserMessage": sent[last_user] if last_user >= 0 else None}
    if provider is not None:
        context["provider"] = provider
    if model is not None:
        context["model"] = model
    if extracted is not None:
        context["extractedContent"] = extracted
    return {"continue_context": sent, "showContinueButton": True, "continueContext": context}


def _resume(proxy: ProxyState, body: ChatBody, messages: list[dict[str, JsonValue]] | None = None
            ) -> dict[str, JsonValue]:
    """:func:`continuation` for this request (its messages unless given)."""
    return continuation(body.messages if messages is None else messages, body.model, provider=proxy.upstream,
                        extracted=body.extracted_content)


def passthrough(exc: ModelError, messages: list[dict[str, JsonValue]] | None = None,
                model: str | None = None, *, resume: dict[str, JsonValue] | None = None) -> Response:
    """The upstream's own status and body (and Retry-After); no answer at all is a 502 (504 on a timeout).
    With ``messages`` (or ``resume``), an OpenAI-shaped error body also gets the :func:`continuation` fields."""
    more = resume if resume is not None else continuation(messages, model) if messages is not None else None
    if exc.status is not None and exc.body is not None:
        headers = {k: v for k, v in exc.headers.items() if k in ("retry-after", "x-request-id")}
        return Response(_with_fields(exc.body, more or {}), status_code=exc.status, headers=headers,
                        media_type=exc.headers.get("content-type", "application/json"))
    if isinstance(exc, ModelTimeout):
        return _error(504, "the upstream did not answer in time", code="upstream_timeout", resume=more)
    return _error(502, f"the upstream failed: {exc}", code="upstream_unavailable", resume=more)


def upstream_down(upstream: str, exc: ModelError) -> JSONResponse:
    """The upstream did not list its models: 502 (504 on a timeout) with its address and status
    (``null``: no answer at all)."""
    timeout = isinstance(exc, ModelTimeout)
    what = (f"answered GET /models with HTTP {exc.status}" if exc.status is not None
            else "did not answer in time" if timeout else "is down (no answer)")
    return _error(504 if timeout else 502, f"the upstream at {upstream} {what}: {exc}",
                  code="upstream_timeout" if timeout else "upstream_unavailable", upstream=upstream,
                  upstream_status=exc.status)


def _with_fields(body: bytes, fields: Mapping[str, JsonValue]) -> bytes:
    """An upstream error body with ``fields`` added to its ``error`` object (other bodies as they are)."""
    if not fields:
        return body
    try:
        data = json.loads(body)
    except ValueError:
        return body
    if not isinstance(data, dict) or not isinstance(data.get("error"), dict):
        return body
    data["error"].update(fields)
    return json.dumps(data).encode()


async def read_json(request: Request) -> dict[str, Any] | JSONResponse:
    """The request's body as a JSON object, strictly read; else the 400 that says what is wrong."""
    try:  # strict JSON: no NaN nor infinity, which neither the upstream nor the record takes
        raw = strict_loads(await request.body())
    except json.JSONDecodeError:
        return _error(400, "the request body is not valid JSON")
    except ValueError as exc:  # NaN, Infinity, 1e400, an integer of more than 4,300 digits
        return _error(400, f"the request body is not valid JSON: {exc}")
    except RecursionError:
        return _error(400, "the request body is nested too deep to read")
    if not isinstance(raw, dict):
        return _error(400, "the request body must be a JSON object")
    return raw


def _parse(raw: dict[str, Any]) -> tuple[ChatBody, list[Message]] | JSONResponse:
    try:
        body = ChatBody.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        param = ".".join(str(p) for p in first.get("loc", ()))
        detail = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        return _error(422, f"invalid request: {detail}", param=param or None)
    if len(body.model) > MAX_MODEL_NAME:
        return _error(400, f"the model name is {len(body.model)} characters; jurist records at most "
                           f"{MAX_MODEL_NAME}: use a shorter name (an alias on the upstream)", param="model",
                      code="model_name_too_long")
    try:
        messages = messages_from_openai(body.messages)  # strictly: an unknown field is named, with the closest one
    except InputError as exc:
        return _error(422, f"invalid request: {exc}", param=str(exc).partition(":")[0])
    return body, list(messages)


def _params(body: ChatBody) -> Forwarded:
    """What is forwarded upstream: the sampling options, the other fields as they are (the adapter
    asks for the usage of every stream)."""
    fields: dict[str, JsonValue] = {k: v for k, v in (body.model_extra or {}).items() if k not in OWN_FIELDS}
    if body.n is not None:
        fields["n"] = body.n
    fmt = fields.get("response_format")
    spec = fmt.get("json_schema") if isinstance(fmt, dict) and fmt.get("type") == "json_schema" else None
    schema = spec.get("schema") if isinstance(spec, dict) else None
    if isinstance(spec, dict) and isinstance(schema, dict):
        # Sent the way this upstream reads a schema (llama.cpp: json_object with a schema ...),
        # found and kept as for the judge's own calls.
        del fields["response_format"]
        name = spec.get("name")
        return Forwarded(temperature=body.temperature, max_tokens=body.max_tokens, seed=body.seed, fields=fields,
                         schema=schema, schema_name=name if isinstance(name, str) and name else "response",
                         schema_strict=spec.get("strict") is True)
    return Forwarded(temperature=body.temperature, max_tokens=body.max_tokens, seed=body.seed, fields=fields)


def _status(upstream: Upstream) -> int:
    return (upstream.error.status if upstream.error is not None else None) or 502


def _failure(exc: BaseException) -> tuple[str, int]:
    """A failure's message and HTTP status (502 when it has none)."""
    status = exc.status if isinstance(exc, ModelError) else None
    return str(exc) or type(exc).__name__, status or 502


def _error_event(out: ChunkWriter, exc: BaseException, resume: dict[str, JsonValue], **more: JsonValue) -> str:
    """The ``jurist.error`` event of a failure of the proxy's own (no gate event)."""
    message, status = _failure(exc)
    data: dict[str, JsonValue] = {"error": message, "code": GENERATION_FAILED, "status": status,
                                  **resume, **more}
    return out.error(data, status=status, message=message, code=GENERATION_FAILED)


def _code(record: GateRecord) -> str:
    """The note's error code of a failed gated request (its record says why it failed)."""
    return MAX_ITERATIONS if (record.error or "").startswith("IterationLimit") else GENERATION_FAILED


def _openai_usage(call: CallEntry) -> Usage:
    return Usage(prompt_tokens=call.input_tokens or 0, completion_tokens=call.output_tokens or 0,
                 total_tokens=call.tokens)


def _usage(record: GateRecord) -> Usage | None:
    """The upstream's usage for the accepted attempt, from its call record."""
    for call in record.llm_calls:
        if (call.type in GENERATION_TYPES and call.iteration == record.accepted_attempt and call.status == "ok"
                and call.tokens):
            return _openai_usage(call)
    return None


def build_router(proxy: ProxyState) -> APIRouter:
    router = APIRouter(tags=["proxy"])

    @router.get("/v1/models")
    async def models(request: Request) -> Response:
        """The upstream's model list, passed through; an empty list if the upstream serves none
        (404, 405); its 401 and 403 as they are; a 502 (504 on a timeout) naming the upstream
        and its status when it is down or fails."""
        try:
            body = await proxy.lister.list_models(api_key=proxy.caller_key(request), timeout=proxy.settings.timeout)
            return Response(body, media_type="application/json")
        except ModelError as exc:
            if exc.status in (401, 403):
                return passthrough(exc)
            if exc.status in (404, 405):
                return JSONResponse({"object": "list", "data": []})
            return upstream_down(proxy.upstream, exc)

    @router.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        raw = await read_json(request)
        if isinstance(raw, JSONResponse):
            return raw
        return await gated_chat(proxy, request, raw)

    return router


async def gated_chat(proxy: ProxyState, request: Request, raw: dict[str, Any]) -> Response:
    """The whole of ``POST /v1/chat/completions`` for a request body already read as a JSON object:
    validated, generated upstream, gated; a ``chat.completion`` (JSON) or its SSE stream, or an
    error in OpenAI's shape. The other APIs the proxy serves translate to and from this."""
    parsed = _parse(raw)
    if isinstance(parsed, JSONResponse):
        return parsed
    body, messages = parsed
    trace_id = request.headers.get("x-jurist-trace-id") or new_id()
    if len(trace_id) > MAX_TRACE_ID:
        return _error(400, f"the X-Jurist-Trace-Id header is {len(trace_id)} characters; jurist records at most "
                           f"{MAX_TRACE_ID}", param="X-Jurist-Trace-Id", code="trace_id_too_long")
    try:
        proxy.gate  # built on first use: a missing judge says so in OpenAI's error shape
    except JuristError as exc:
        return _error(500, f"the gate is not configured: {exc}", code="gate_not_configured")
    cycle = current_cycle(messages, body.is_continuation)
    params = _params(body)
    upstream = Upstream(proxy.model(body.model), params, api_key=proxy.caller_key(request),
                        trace_id=trace_id, stream=body.stream, received=messages, wire=body.messages, cycle=cycle)
    try:
        await upstream.prime(cycle)
    except ModelError as exc:
        # The gate records the failed request (its error and the failed call); the caller
        # gets the upstream's own status, body and Retry-After.
        await proxy.gate.run(body.messages, generate=upstream, is_continuation=body.is_continuation,
                             trace_id=trace_id, **_gate_options(params))
        return passthrough(exc, resume=_resume(proxy, body))
    completion_id = f"chatcmpl-jurist-{trace_id[:24]}"
    if upstream.tool_answer:  # a round of the caller's tool loop: relayed as it is, not judged
        if proxy.max_iterations and not body.is_continuation and tool_rounds(messages) >= proxy.max_iterations:
            await upstream.aclose()
            return _iteration_limit(proxy, body, trace_id)
        if body.stream:
            return StreamingResponse(_relay_stream(proxy, body, upstream, trace_id, completion_id),
                                     media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache", "X-Jurist-Trace-Id": trace_id})
        return await _relay_complete(proxy, body, upstream, trace_id, completion_id)
    if body.stream:
        return StreamingResponse(coalesced(_stream(proxy, body, upstream, trace_id, completion_id)),
                                 media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Jurist-Trace-Id": trace_id})
    try:
        return await _complete(proxy, body, upstream, trace_id, completion_id)
    finally:
        await upstream.aclose()


def _gate_options(params: Forwarded) -> dict[str, Any]:
    """The gate's options for a request: ``structured`` for an answer usable only whole (JSON)."""
    return {"structured": True} if params.structured else {}


def _tool_round(proxy: ProxyState, trace_id: str) -> list[CallEntry]:
    """The call records of a tool-call answer (relayed unjudged: :func:`tool_round_field`)."""
    proxy.calls.open(trace_id)
    return proxy.calls.close(trace_id)


def _iteration_limit(proxy: ProxyState, body: ChatBody, trace_id: str) -> JSONResponse:
    """The caller's tool loop ran ``max_iterations`` rounds and the upstream asks for another:
    a 422 with note 004's ``MAX_ITERATIONS`` and what to resend to go on (``isContinuation``)."""
    payload = openai_error(422, f"Maximum tool execution iterations reached ({proxy.max_iterations} rounds "
                                "since the last user message); resend continueContext.messages with "
                                "\"isContinuation\": true to go on", code=MAX_ITERATIONS,
                           resume=_resume(proxy, body))
    payload["jurist"] = tool_round_field(trace_id, _tool_round(proxy, trace_id), error=MAX_ITERATIONS)
    return JSONResponse(payload, status_code=422)


def _call_usage(calls: list[CallEntry]) -> Usage | None:
    call = next((c for c in calls if c.status == "ok" and c.tokens), None)
    return None if call is None else _openai_usage(call)


def _answered(upstream: Upstream, attempt: int) -> Answered:
    """What the upstream's answer for ``attempt`` carried, for the client: its finish reason,
    usage, logprobs, system fingerprint and refusal, as the upstream sent them."""
    completion = upstream.completion(attempt)
    if completion is None:
        return Answered()
    fields = completion.reply.fields if completion.reply is not None else {}
    return Answered(finish_reason=completion.finish_reason, usage=fields.get("usage"),
                    logprobs=fields.get("logprobs"), system_fingerprint=fields.get("system_fingerprint"),
                    refusal=fields.get("refusal"), service_tier=fields.get("service_tier"))


async def _relay_complete(proxy: ProxyState, body: ChatBody, upstream: Upstream, trace_id: str,
                          completion_id: str) -> Response:
    text: list[str] = []
    calls = ToolCallAssembly()
    try:
        async for item in upstream.relay():
            if isinstance(item, ToolCallDelta):
                calls.add(item)
            else:
                text.append(item)
    except ModelError as exc:
        message, status = _failure(exc)
        payload = openai_error(status, message, code=GENERATION_FAILED, resume=_resume(proxy, body))
        payload["jurist"] = tool_round_field(trace_id, _tool_round(proxy, trace_id))
        return JSONResponse(payload, status_code=status)
    entries = _tool_round(proxy, trace_id)
    whole = upstream.completion(1)
    tool_calls = whole.tool_calls if whole is not None and whole.tool_calls else calls.calls()
    return JSONResponse(completion_body(completion_id, body.model, "".join(text), tool_round_field(trace_id, entries),
                                        _call_usage(entries), tool_calls=tool_calls, data=_answered(upstream, 1)))


async def _relay_stream(proxy: ProxyState, body: ChatBody, upstream: Upstream, trace_id: str,
                        completion_id: str) -> AsyncIterator[str]:
    out = ChunkWriter(completion_id, body.model)
    yield out.role()
    try:
        async for item in upstream.relay():
            yield out.tool_call(item) if isinstance(item, ToolCallDelta) else out.delta(item)
    except ModelError as exc:
        log.warning("upstream failed while relaying a tool call: %s", exc)
        yield _error_event(out, exc, _resume(proxy, body), trace_id=trace_id)
        yield out.done()
        return
    entries = _tool_round(proxy, trace_id)
    jurist = tool_round_field(trace_id, entries)
    yield out.event("done", jurist)
    yield out.finish(jurist, _call_usage(entries), _answered(upstream, 1))
    yield out.done()


async def _complete(proxy: ProxyState, body: ChatBody, upstream: Upstream, trace_id: str,
                    completion_id: str) -> Response:
    try:
        result = await proxy.gate.run(body.messages, generate=upstream, is_continuation=body.is_continuation,
                                      trace_id=trace_id, **_gate_options(upstream.params))
    except ModelError as exc:  # the gate turns generator failures into its result: this is a failure of its own
        if exc.body is not None:
            return passthrough(exc, resume=_resume(proxy, body))
        message, _ = _failure(exc)  # no answer at all from the gate: a bad gateway
        return JSONResponse(openai_error(502, message, code=GENERATION_FAILED, resume=_resume(proxy, body)),
                            status_code=502)
    jurist = jurist_field(result, trace_id)
    if result.error is not None:
        status = _status(upstream)
        context = result.continue_context if result.continue_context is not None else body.messages
        payload = openai_error(status, result.error, code=_code(result), resume=_resume(proxy, body, context))
        payload["jurist"] = jurist
        return JSONResponse(payload, status_code=status)
    return JSONResponse(completion_body(completion_id, body.model, result.answer, jurist, _usage(result),
                                        data=_answered(upstream, result.accepted_attempt)))


#: Pieces of a stream written ahead of the client before the producer waits for it to read them.
COALESCE_AHEAD = 64


async def coalesced(pieces: AsyncGenerator[str, None]) -> AsyncIterator[str]:
    """``pieces``, the pieces that are ready together joined into one: one write to the client,
    not one a piece. A held answer's deltas, its evaluation, ``done``, the finish chunk and
    ``[DONE]`` are ready at once, as are the pieces of one read of the upstream's stream; a piece
    still goes out as soon as the producer waits for anything. The producer runs in a task of
    its own, at most ``COALESCE_AHEAD`` pieces ahead of the client; closing this iterator (the
    client went away) cancels it, which closes ``pieces``."""
    queue: asyncio.Queue[str | _End] = asyncio.Queue(COALESCE_AHEAD)

    async def produce() -> None:
        try:
            async with contextlib.aclosing(pieces):
                async for piece in pieces:
                    await queue.put(piece)
        except Exception as exc:  # handed to the consumer, raised there
            await queue.put(_End(exc))
        else:
            await queue.put(_End(None))

    task = asyncio.create_task(produce())
    try:
        while True:
            item = await queue.get()
            batch: list[str] = []
            while isinstance(item, str):
                batch.append(item)
                if queue.empty():
                    break
                item = queue.get_nowait()
            if batch:
                yield "".join(batch)
            if isinstance(item, _End):
                if item.error is not None:
                    raise item.error
                return
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


@dataclass(frozen=True)
class _End:
    """The end of a producer's pieces: ``error`` when they ended with one."""

    error: Exception | None


async def _stream(proxy: ProxyState, body: ChatBody, upstream: Upstream, trace_id: str,
                  completion_id: str) -> AsyncGenerator[str, None]:
    out = ChunkWriter(completion_id, body.model)
    yield out.role()
    events = proxy.gate.stream(body.messages, generate=upstream, is_continuation=body.is_continuation,
                               trace_id=trace_id, **_gate_options(upstream.params))
    try:
        async with contextlib.aclosing(events):
            async for ev in events:
                match ev:
                    case DeltaEvent():
                        yield out.delta(ev.text)
                    case RevisionEvent():
                        # The gate replaces an answer already shown. A stock client cannot unprint it, so
                        # it gets the revision note and then the accepted text as more deltas.
                        yield out.event("revision", ev.data)
                        if ev.text:
                            if out.sent_text:
                                yield out.delta(f"\n\n{REVISION_MESSAGE}\n\n")
                            yield out.delta(ev.text)
                    case DoneEvent():
                        jurist = jurist_field(ev.result, trace_id)
                        accepted = ev.result.accepted_attempt if ev.result is not None else 1
                        # One write for the last three events: they are ready together.
                        yield (out.event("done", jurist)
                               + out.finish(jurist, _usage(ev.result), _answered(upstream, accepted)) + out.done())
                        return
                    case ErrorEvent():
                        context = ev.result.continue_context or body.messages
                        status = _status(upstream)
                        yield out.error({**_resume(proxy, body, context), **ev.data, "status": status},
                                        status=status, message=ev.result.error, code=ev.code) + out.done()
                        return
                    case _:
                        yield out.event(ev.type, ev.data)
    except Exception as exc:  # the gate itself raised (an upstream failure it did not turn into an event)
        log.warning("gate stream failed: %s", exc)
        yield _error_event(out, exc, _resume(proxy, body))
        yield out.done()
        return
    finally:
        await upstream.aclose()
    # The gate ended without done: still close the answer properly.
    yield out.finish(jurist_field(None, trace_id))
    yield out.done()


def install(app: FastAPI, upstream: str, gate_config: Any, runtime: Runtime, *,
            api_key: str | None = None, gate_factory: GateFactory | None = None,
            max_iterations: int = DEFAULT_MAX_ITERATIONS) -> ProxyState:
    """Serve the proxy on ``app``; the state is ``app.state.proxy`` (closed by :meth:`ProxyState.aclose`)."""
    proxy = ProxyState(upstream, gate_config, runtime, api_key=api_key, gate_factory=gate_factory,
                       max_iterations=max_iterations)
    app.state.proxy = proxy
    app.include_router(build_router(proxy))
    return proxy


def routes_first(app: FastAPI, prefix: str = "/v1/") -> None:
    """Move the routes under ``prefix`` to the front of ``app``'s routes. The proxy's routes (chat
    completions and the translations over it) are the hot path, every generation: matched first, not
    after every page and API route of the app (no other route is under /v1/). A router included
    whole under ``prefix`` (no prefix nor dependencies of its own) is replaced by its routes: the
    app matches them itself, once, rather than through the included router's own matching."""
    ours: list[Any] = []
    rest: list[Any] = []
    for route in app.router.routes:
        if getattr(route, "path", "").startswith(prefix):
            ours.append(route)
        elif (inner := _included_under(route, prefix)) is not None:
            ours.extend(inner)
        else:
            rest.append(route)
    app.router.routes[:] = ours + rest


def _included_under(route: Any, prefix: str) -> list[Any] | None:
    """The routes of an included router (FastAPI keeps it as one entry) when every one of them is an
    ``APIRoute`` under ``prefix`` and the inclusion adds nothing to them; else None."""
    from fastapi.routing import APIRoute

    inner: Any = getattr(route, "original_router", None)
    context: Any = getattr(route, "include_context", None)
    if inner is None or context is None:
        return None
    if getattr(context, "prefix", None) or getattr(context, "dependencies", None):
        return None
    routes = list(inner.routes)
    if routes and all(isinstance(r, APIRoute) and r.path.startswith(prefix) for r in routes):
        return routes
    return None
