"""Adapter for any OpenAI-compatible chat-completions endpoint.

One adapter covers OpenAI, vLLM, Ollama, LM Studio, llama.cpp server, Groq and
OpenRouter: only ``base_url`` and ``api_key`` differ. It turns a
:class:`~jurist.models.base.ChatRequest` into one chat-completions call and
maps errors onto :mod:`jurist.errors` (:func:`map_openai_error`, over
:mod:`jurist.models.sdk_errors`). It never retries (the ``Model`` wrapper
retries), logs or caches.

One transport for both kinds of call: a JSON POST to
``<base_url>/chat/completions`` over aiohttp, with the headers OpenAI's SDK
sends (bearer key, ``OpenAI-Organization`` and ``OpenAI-Project`` when
``organization`` / ``project`` are given: the registry passes ``OPENAI_ORG_ID`` /
``OPENAI_PROJECT_ID`` as the settings read them). The adapter reads no
environment: its key and address are the ones it is given. A non-streaming call reads one
JSON reply; a stream posts ``"stream": true`` (asking for the usage in the
last chunk) and reads the server-sent events as they come. No SDK machinery
on the way: it costs more CPU than the request itself
(``benchmarks/adapter_overhead.py``), which decides how many calls a second
one process makes. Tests and embedders may hand in their own aiohttp
``ClientSession`` (``session=``), e.g. on a custom connector.
"""

from __future__ import annotations

import asyncio
import functools
import json
import math
from typing import Any, AsyncIterator, Callable, Mapping

import aiohttp

from jurist.version import __version__
from jurist.errors import ConfigError, ModelError, ModelUnavailable, RequestRejected
from jurist.models.base import (ChatRequest, Completion, ReplyMeta, StreamItem, TokenLogprob, ToolCallAssembly,
                                ToolCallDelta, holds_digit, kept_headers)
from jurist.models.images import attach
from jurist.models.messages import Message, SystemMessage, UserMessage, openai_messages, prepend_text
from jurist.models.sdk_errors import error_detail, map_transport_error, retry_after_seconds, status_error
from jurist.models.structured import (CONSTRAINED, STRUCTURED_OUTPUT_MODES, ModeMemory,
                                      detect_structured_output, next_mode, refuses, request_fields)

__all__ = ["OpenAIChat", "map_openai_error", "retry_after_seconds", "status_error", "tls_context"]

NO_KEY = "none"  # sent to self-hosted servers that take no key
DEFAULT_BASE_URL = "https://api.openai.com/v1"  # the SDK's default
#: The most bytes one answer (a reply, or a whole stream) may take; past it the call fails.
DEFAULT_MAX_REPLY_BYTES = 16 * 1024 * 1024
#: A stream gives the event loop a turn after this many events (a long answer in the buffer blocks nobody).
YIELD_EVERY = 64
#: The reply fields a proxy passes on as the endpoint sent them (top level, then the choice, then its message).
REPLY_FIELDS, CHOICE_FIELDS, MESSAGE_FIELDS = ("system_fingerprint", "usage", "service_tier"), ("logprobs",), ("refusal",)


class OpenAIChat:
    """``ChatModel`` for an OpenAI-compatible endpoint.

    ``structured_output`` is how a request's schema is sent (the modes of
    :mod:`jurist.models.structured`): a named mode always that way, ``"prompt"``
    never; ``"auto"`` uses the mode ``modes`` (the runtime's; default: its own)
    holds for the endpoint, else ``guess`` (a preset's; ``None``: probe the
    endpoint with :func:`~jurist.models.structured.detect_structured_output`
    on the first schema request). When the endpoint refuses a mode, the call
    moves on to the mode the refusal names, else (if it names the field) to
    the one a probe finds, else to ``"prompt"``; the mode that worked is kept
    for the endpoint.

    A request with ``top_logprobs`` asks for ``logprobs: true`` and that many
    alternatives per token; the completion carries the tokens the endpoint sent
    (:attr:`~jurist.models.base.Completion.logprobs`), or ``None``.

    ``base_url`` (default: OpenAI's) and ``api_key`` are used as given, never
    looked up in the environment; a server at a ``base_url`` may take no key
    (``"none"`` is sent). ``name`` is the reference calls are recorded under
    (``provider/model`` by default); ``session`` an aiohttp session to send through (the caller
    closes it), instead of the one the adapters of the same endpoint share per event loop
    (:class:`_SharedSessions`: many model names on one server are one connection pool).

    ``max_reply_bytes`` bounds one answer (a reply or a whole stream, default 16 MiB): past it the
    call fails with ``ModelUnavailable`` naming the bound, having read no more.
    Every completion carries what the answer said besides its text
    (:class:`~jurist.models.base.ReplyMeta`: HTTP status and headers, finish reason,
    ``system_fingerprint``, ``logprobs`` and ``refusal`` as sent, ``usage``); a reply or stream
    chunk not in OpenAI's shape (a content that is not text, a tool call whose name is not text
    ...) is ``ModelUnavailable`` saying what was wrong, never a guess.
    """

    def __init__(
        self,
        model: str,
        *,
        provider: str = "openai",
        base_url: str | None = None,
        api_key: str | None = None,
        structured_output: str = "auto",
        guess: str | None = "json_schema",
        modes: ModeMemory | None = None,
        name: str | None = None,
        session: aiohttp.ClientSession | None = None,
        system_role: bool = True,
        organization: str | None = None,
        project: str | None = None,
        max_reply_bytes: int | None = DEFAULT_MAX_REPLY_BYTES,
    ) -> None:
        if structured_output not in STRUCTURED_OUTPUT_MODES:
            raise ConfigError(
                f"structured_output={structured_output!r} for {provider}/{model}: "
                f"use one of {', '.join(STRUCTURED_OUTPUT_MODES)}"
            )
        if guess is not None and guess not in (*CONSTRAINED, "prompt"):
            raise ConfigError(f"guess={guess!r} for {provider}/{model}: use one of {', '.join(CONSTRAINED)}, prompt")
        if not api_key:
            if base_url is None:
                raise ConfigError(
                    f"{provider}/{model} needs an API key: pass api_key, or resolve the model through settings "
                    f"built with OPENAI_API_KEY set or providers.{provider}.api_key in jurist.yaml"
                )
            api_key = NO_KEY
        self.model = model
        self.provider = provider
        self.name = name or f"{provider}/{model}"
        self.structured_output = structured_output
        self.system_role = system_role  # False: system messages go to the server inside the first user turn
        self.endpoint = (base_url or DEFAULT_BASE_URL).rstrip("/")
        self._url = f"{self.endpoint}/chat/completions"
        self._headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json",
                         "Accept": "application/json", "User-Agent": f"jurist/{__version__}"}
        for header, value in (("OpenAI-Organization", organization), ("OpenAI-Project", project)):
            if value:
                self._headers[header] = value
        self._given_session = session
        self._session: aiohttp.ClientSession | None = None  # the shared one of the running loop
        self._session_loop: asyncio.AbstractEventLoop | None = None
        self.max_reply_bytes = max_reply_bytes
        self.guess = guess
        self.modes = modes if modes is not None else ModeMemory()
        self._probing: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None

    @property
    def schema_mode(self) -> str | None:
        """The mode a schema request goes out in now (``None``: "auto" has yet to probe the endpoint)."""
        if self.structured_output != "auto":
            return self.structured_output
        return self.modes.get(self.endpoint) or self.guess

    @property
    def schema_supported(self) -> bool:
        """Whether a request's schema is sent to the endpoint at all (not ``prompt``)."""
        return self.schema_mode != "prompt"

    # -- the ChatModel protocol ---------------------------------------------

    async def complete(self, request: ChatRequest, *, timeout: float | None = None,
                       structured_output: str | None = None) -> Completion:
        """Send one request and return its completion (text "" when empty);
        ``structured_output`` names the mode for this call alone (no fallback, nothing kept)."""
        try:
            response, mode = await self._open(request, aiohttp.ClientTimeout(total=timeout), stream=False,
                                              only=structured_output)
            async with response:
                raw = await self._read(response)
            completion = self._completion(_strict_json(raw, self._not_shaped))
            completion.structured_output = mode
            assert completion.reply is not None
            completion.reply.http_status = response.status
            completion.reply.http_headers = kept_headers(response.headers)
            return completion
        except Exception as exc:
            mapped = self._map(exc)
            if mapped is exc:
                raise
            raise mapped from exc

    async def stream(self, request: ChatRequest, *, timeout: float | None = None,
                     into: Completion | None = None) -> AsyncIterator[StreamItem]:
        """Yield the reply's text deltas as they arrive, and the pieces of its tool
        calls (:class:`ToolCallDelta`) where it calls tools; ``into`` gets the usage,
        finish reason and assembled tool calls. ``timeout`` bounds the connection and each wait for
        more of the stream, not the whole answer. A stream that ends before its
        finish reason (or ``[DONE]``), or sends an error event, raises
        ``ModelUnavailable``."""
        finished = usage = False
        calls = ToolCallAssembly()
        reply = ReplyMeta()
        logprobs: list[Any] = []
        refusal: list[str] = []
        try:
            response, mode = await self._open(
                request, aiohttp.ClientTimeout(sock_connect=timeout, sock_read=timeout), stream=True)
            reply.http_status, reply.http_headers = response.status, kept_headers(response.headers)
            if into is not None:
                into.structured_output = mode
                into.reply = reply
            async with response:
                events = 0
                async for event in _sse_data(response.content, self.max_reply_bytes, self._too_big):
                    events += 1
                    if not events % YIELD_EVERY:  # buffered events are read without a pause: let others run
                        await asyncio.sleep(0)
                    if event == "[DONE]":
                        finished = True
                        break
                    chunk = _strict_json(event, self._not_shaped)
                    if not isinstance(chunk, dict):
                        raise self._not_shaped(f"a stream chunk is {type(chunk).__name__}, not an object")
                    if chunk.get("error") is not None:
                        raise ModelUnavailable(
                            f"{self.name} at {self.endpoint} failed mid-stream: {_error_message(chunk)}; "
                            "try again later", model=self.name)
                    items, finish, tokens = self._chunk(chunk, reply, logprobs, refusal)
                    if tokens is not None:
                        usage = True
                        if into is not None:
                            into.input_tokens, into.output_tokens = tokens
                    for item in items:
                        if isinstance(item, ToolCallDelta):
                            item = calls.add(item)
                        yield item
                    if finish:
                        finished = True
                        reply.finish_reason = finish
                        if into is not None:
                            into.finish_reason = finish
            if logprobs:
                reply.fields["logprobs"] = {"content": logprobs}
            if refusal:
                reply.fields["refusal"] = "".join(refusal)
            if into is not None and calls:
                into.tool_calls = calls.calls()
            if not finished:
                raise ModelUnavailable(
                    f"{self.name} at {self.endpoint} ended the stream before its finish_reason; "
                    "the connection may have dropped, try again", model=self.name)
            if into is not None and not usage:  # asked for (include_usage), but some servers never send it
                into.usage_reported = False
        except Exception as exc:
            mapped = self._map(exc)
            if mapped is exc:
                raise
            raise mapped from exc

    def _chunk(self, chunk: dict[str, Any], reply: ReplyMeta, logprobs: list[Any],
               refusal: list[str]) -> tuple[list[StreamItem], str | None, tuple[int, int] | None]:
        """A stream chunk's text deltas and tool call pieces, its finish reason and its usage (input
        and output tokens); the fields a proxy passes on go into ``reply`` (``logprobs`` content and
        ``refusal`` pieces into their lists). A chunk not in OpenAI's shape is ModelUnavailable
        naming what was wrong."""
        items: list[StreamItem] = []
        finish: str | None = None
        given = chunk.get("usage")
        tokens = _usage(given, self._not_shaped) if given is not None else None
        if given is not None:
            reply.fields["usage"] = given
        for name in REPLY_FIELDS[:1] + REPLY_FIELDS[2:]:
            if chunk.get(name) is not None:
                reply.fields[name] = chunk[name]
        choices = chunk.get("choices")
        if choices is None:
            choices = []
        if not isinstance(choices, list):
            raise self._not_shaped(f"a chunk's choices are {type(choices).__name__}, not a list")
        for choice in choices:
            if not isinstance(choice, dict):
                raise self._not_shaped(f"a chunk's choice is {type(choice).__name__}, not an object")
            delta = choice.get("delta")
            if delta is None:
                delta = {}
            if not isinstance(delta, dict):
                raise self._not_shaped(f"a choice's delta is {type(delta).__name__}, not an object")
            content = delta.get("content")
            if content is not None and not isinstance(content, str):
                raise self._not_shaped(f"a delta's content is {type(content).__name__}, not text")
            if content:
                items.append(content)
            if isinstance(delta.get("refusal"), str):
                refusal.append(delta["refusal"])
            entries = delta.get("tool_calls")
            if entries is not None:
                if not isinstance(entries, list):
                    raise self._not_shaped(f"a delta's tool_calls are {type(entries).__name__}, not a list")
                items += [self._tool_piece(entry, position) for position, entry in enumerate(entries)]
            given_logprobs = choice.get("logprobs")
            if isinstance(given_logprobs, dict) and isinstance(given_logprobs.get("content"), list):
                logprobs.extend(given_logprobs["content"])
            reason = choice.get("finish_reason")
            if reason is not None and not isinstance(reason, str):
                raise self._not_shaped(f"a choice's finish_reason is {type(reason).__name__}, not text")
            if reason:
                finish = reason
        return items, finish, tokens

    def _tool_piece(self, entry: object, position: int) -> ToolCallDelta:
        """One entry of a delta's ``tool_calls``, checked: an object whose ``index`` is a number,
        ``id``, ``type`` text, ``function`` an object whose ``name`` and ``arguments`` are text."""
        if not isinstance(entry, dict):
            raise self._not_shaped(f"a tool call piece is {type(entry).__name__}, not an object")
        index = entry.get("index", position)
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise self._not_shaped(f"a tool call piece's index is {index!r}, not a number")
        function = entry.get("function")
        if function is not None and not isinstance(function, dict):
            raise self._not_shaped(f"a tool call piece's function is {type(function).__name__}, not an object")
        for where, value in (("id", entry.get("id")), ("type", entry.get("type")),
                             ("function.name", (function or {}).get("name")),
                             ("function.arguments", (function or {}).get("arguments"))):
            if value is not None and not isinstance(value, str):
                raise self._not_shaped(f"a tool call piece's {where} is {type(value).__name__}, not text")
        return ToolCallDelta.from_openai(entry, position)

    def _not_shaped(self, what: str) -> ModelUnavailable:
        return ModelUnavailable(f"{self.name} at {self.endpoint} sent an answer not in OpenAI's shape: {what}; "
                                "the server may not be OpenAI-compatible", model=self.name)

    def _too_big(self) -> ModelUnavailable:
        return ModelUnavailable(
            f"{self.name} at {self.endpoint} sent an answer over {_size(self.max_reply_bytes or 0)}, the most one "
            "answer may take (max_reply_bytes; for the proxy's upstream the setting upstream_max_reply_bytes); "
            "it was not read further", model=self.name)

    async def _read(self, response: aiohttp.ClientResponse) -> bytes:
        """A reply's body, at most ``max_reply_bytes`` (more: ModelUnavailable, nothing more read)."""
        cap = self.max_reply_bytes
        if cap is None:
            return await response.read()
        if response.content_length is not None and response.content_length > cap:
            raise self._too_big()
        parts: list[bytes] = []
        size = 0
        async for part in response.content.iter_chunked(1 << 16):
            size += len(part)
            if size > cap:
                raise self._too_big()
            parts.append(part)
        return b"".join(parts)

    async def list_models(self, *, api_key: str | None = None, timeout: float | None = None) -> bytes:
        """The endpoint's ``GET /models`` body as it is; an error status raises its jurist error."""
        headers = self._headers if not api_key else {**self._headers, "Authorization": f"Bearer {api_key}"}
        try:
            async with self._http().get(f"{self.endpoint}/models", headers=headers, allow_redirects=False,
                                        timeout=aiohttp.ClientTimeout(total=timeout)) as response:
                raw = await response.read()
                if not 200 <= response.status < 300:
                    raise status_error(response.status, error_detail(raw), response.headers, model=self.name,
                                       where=f"{self.name} at {self.endpoint}", key_hint=self._key_hint(), body=raw)
            return raw
        except Exception as exc:
            mapped = self._map(exc)
            if mapped is exc:
                raise
            raise mapped from exc

    async def aclose(self) -> None:
        """Let go of the shared HTTP session (closed, with its connections, by the last adapter of
        its endpoint and loop to let go)."""
        session, self._session = self._session, None
        last = None if session is None else _SESSIONS.let_go(self.endpoint, self._session_loop, session)
        if last is not None and not last.closed:
            await last.close()

    # -- internals -----------------------------------------------------------

    async def _open(self, request: ChatRequest, timeout: aiohttp.ClientTimeout, *, stream: bool,
                    only: str | None = None) -> tuple[aiohttp.ClientResponse, str | None]:
        """The POST's response, its status 2xx, and the structured-output mode it went out in
        (``None`` without a schema). In "auto" mode a refusal moves the call on to the next
        mode (:func:`~jurist.models.structured.next_mode`); the mode that worked is kept."""
        if request.response_schema is None:
            return await self._post(request, timeout, stream=stream, mode="prompt"), None
        auto = only is None and self.structured_output == "auto"
        confirmed = self.modes.get(self.endpoint) if auto else None
        mode = only or self.schema_mode or await self._detect(timeout, [])
        tried: list[str] = []
        while True:
            try:
                response = await self._post(request, timeout, stream=stream, mode=mode)
                break
            except ModelError as exc:
                if not auto or mode == "prompt" or not refuses(exc, mode):
                    raise
                tried.append(mode)
                mode = next_mode(exc, tried) or await self._detect(timeout, tried)
        if auto and (confirmed is None or not tried):
            # Only now is it clear the mode, not the request, was what the endpoint refused.
            # A mode that has worked before stays: one request it refused (a schema too big
            # for the server, say) does not take it from the rest.
            self.modes.set(self.endpoint, mode)
        return response, mode

    async def _detect(self, timeout: aiohttp.ClientTimeout, tried: list[str]) -> str:
        """The endpoint's mode from a probe of the modes not ``tried`` (one probe at a time
        per adapter and event loop; one a concurrent call found is taken as it is)."""
        loop = asyncio.get_running_loop()
        if self._probing is None or self._probing[0] is not loop:
            self._probing = (loop, asyncio.Lock())
        async with self._probing[1]:
            known = self.modes.get(self.endpoint)
            if known is not None and known not in tried:
                return known
            return await detect_structured_output(self, timeout=timeout.total, skip=tried)

    async def _post(self, request: ChatRequest, timeout: aiohttp.ClientTimeout, *, stream: bool,
                    mode: str) -> aiohttp.ClientResponse:
        """One chat-completions POST; an HTTP error status raises its jurist error
        (with the endpoint's body and headers) here."""
        headers = self._headers
        if request.api_key:
            headers = {**headers, "Authorization": f"Bearer {request.api_key}"}
        if stream:
            headers = {**headers, "Accept": "text/event-stream"}
        response = await self._http().post(self._url, data=self._body(request, stream, mode),
                                           headers=headers, allow_redirects=False, timeout=timeout)
        if not 200 <= response.status < 300:
            try:
                raw = await response.read()
            finally:
                response.release()
            raise status_error(response.status, error_detail(raw), response.headers, model=self.name,
                               where=f"{self.name} at {self.endpoint}", key_hint=self._key_hint(), body=raw)
        return response

    def _body(self, request: ChatRequest, stream: bool, mode: str) -> bytes:
        """The JSON body; the messages' JSON text is the request's own (made once, for the cache key too)."""
        params: dict[str, Any] = {"model": self.model}
        if request.extra_body:
            params.update(request.extra_body)
            params["model"] = self.model
        if request.temperature is not None:
            params["temperature"] = request.temperature
        if request.max_tokens is not None:
            params["max_tokens"] = request.max_tokens
        if request.seed is not None:
            params["seed"] = request.seed
        if request.response_schema is not None:
            params.update(request_fields(mode, request.response_schema, request.schema_name,
                                         strict=request.schema_strict))
        if request.top_logprobs:
            params["logprobs"] = True
            params["top_logprobs"] = request.top_logprobs
        if stream:
            params["stream"] = True
            params["stream_options"] = {**(params.get("stream_options") or {}), "include_usage": True}
        sent = request.messages
        if not self.system_role and any(isinstance(m, SystemMessage) for m in sent):
            sent = fold_system(sent)
        if request.images:
            sent = attach(sent, request.images)
        messages = request.messages_json if sent is request.messages else json.dumps(openai_messages(sent),
                                                                                   ensure_ascii=False)
        rest = json.dumps(params, ensure_ascii=False)  # an object with at least "model"
        return ('{"messages": ' + messages + ", " + rest[1:]).encode()

    def _http(self) -> aiohttp.ClientSession:
        """The given session, else the one the endpoint's adapters share in the running event loop."""
        if self._given_session is not None:
            return self._given_session
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._session_loop is not loop:
            if self._session is not None:  # another loop's (or closed): let go of it there
                _SESSIONS.let_go(self.endpoint, self._session_loop, self._session)
            self._session = _SESSIONS.acquire(self.endpoint, loop)
            self._session_loop = loop
        return self._session

    def _completion(self, response: Any) -> Completion:
        if not isinstance(response, dict) or "choices" not in response:
            raise ModelUnavailable(
                f"{self.name} at {self.endpoint} answered with something that is not a chat completion; "
                "check that base_url points at an OpenAI-compatible /v1 endpoint",
                model=self.name,
            )
        choices = response["choices"]
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise self._not_shaped("its choices are not a list of objects")
        choice = choices[0]
        message = choice.get("message")
        if message is None:
            message = {}
        if not isinstance(message, dict):
            raise self._not_shaped(f"the choice's message is {type(message).__name__}, not an object")
        text = message.get("content")
        if text is not None and not isinstance(text, str):
            raise self._not_shaped(f"the message's content is {type(text).__name__}, not text")
        finish = choice.get("finish_reason")
        if finish is not None and not isinstance(finish, str):
            raise self._not_shaped(f"the choice's finish_reason is {type(finish).__name__}, not text")
        calls = message.get("tool_calls")
        if calls is not None:
            calls = self._tool_calls(calls)
        given = response.get("usage")
        tokens = _usage(given, self._not_shaped) if given is not None else (0, 0)
        fields = {k: response[k] for k in REPLY_FIELDS if response.get(k) is not None}
        fields.update({k: choice[k] for k in CHOICE_FIELDS if choice.get(k) is not None})
        fields.update({k: message[k] for k in MESSAGE_FIELDS if message.get(k) is not None})
        return Completion(
            text=text or "",
            model=self.name,
            input_tokens=tokens[0],
            output_tokens=tokens[1],
            finish_reason=finish,
            logprobs=_token_logprobs(choice.get("logprobs")),
            tool_calls=calls or None,
            usage_reported=given is not None,
            reply=ReplyMeta(finish_reason=finish, fields=fields),
        )

    def _tool_calls(self, calls: object) -> list[dict[str, Any]]:
        """A message's ``tool_calls``, checked as :meth:`_tool_piece` checks a piece (and each whole)."""
        if not isinstance(calls, list):
            raise self._not_shaped(f"the message's tool_calls are {type(calls).__name__}, not a list")
        for position, call in enumerate(calls):
            piece = self._tool_piece(call, position)
            if piece.name is None or not isinstance(call.get("function"), dict):
                raise self._not_shaped("a tool call has no function name")
        return calls

    def _map(self, exc: Exception) -> Exception:
        """Our error for ``exc`` (``exc`` itself when it is ours already or unknown)."""
        return map_openai_error(exc, model=self.name, endpoint=self.endpoint)

    def _key_hint(self) -> str:
        if self.provider == "openai":
            return "set OPENAI_API_KEY (or api_key in jurist.yaml) to a valid key"
        return f"set providers.{self.provider}.api_key in jurist.yaml (or its API-key env var) to a valid key"


async def _sse_data(content: aiohttp.StreamReader, cap: int | None = None,
                    too_big: Callable[[], Exception] | None = None) -> AsyncIterator[str]:
    """The ``data`` of each server-sent event (its ``data:`` lines joined), in order; past ``cap``
    bytes in all, ``too_big()`` is raised. Lines of any length (up to the cap), read in linear time."""
    data: list[str] = []
    size = 0
    pending: list[bytes] = []  # the start of a line not ended yet
    async for block in content.iter_any():
        size += len(block)
        if cap is not None and size > cap:
            raise too_big() if too_big is not None else ValueError(f"the stream is over {cap} bytes")
        lines = block.split(b"\n")
        if len(lines) == 1:
            pending.append(block)
            continue
        if pending:
            pending.append(lines[0])
            lines[0] = b"".join(pending)
            pending = []
        if lines[-1]:
            pending.append(lines[-1])
        for raw in lines[:-1]:
            line = raw.decode("utf-8").rstrip("\r")
            if not line:
                if data:
                    yield "\n".join(data)
                    data = []
            elif line.startswith("data:"):
                data.append(line[6:] if line.startswith("data: ") else line[5:])
    if pending:
        line = b"".join(pending).decode("utf-8").rstrip("\r")
        if line.startswith("data:"):
            data.append(line[6:] if line.startswith("data: ") else line[5:])
    if data:
        yield "\n".join(data)


def _strict_json(raw: str | bytes, not_shaped: Callable[[str], Exception]) -> Any:
    """JSON as an endpoint sent it, strictly: a number beyond any float or NaN is an error."""
    try:
        return strict_loads(raw)
    except (ValueError, RecursionError) as exc:
        raise not_shaped(f"not valid JSON ({str(exc)[:200]})") from None


def strict_loads(raw: str | bytes) -> Any:
    """JSON read strictly: NaN, Infinity and a number beyond any float are a ``ValueError``, as
    invalid JSON is (a ``json.JSONDecodeError``); nesting too deep, a ``RecursionError``."""
    return json.loads(raw, parse_float=_finite, parse_constant=_constant)


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:20]} is beyond any float")
    return value


def _constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON value")


def _usage(given: object, not_shaped: Callable[[str], Exception]) -> tuple[int, int]:
    """A reply's ``usage`` as (prompt tokens, completion tokens), checked: an object of whole numbers."""
    if not isinstance(given, dict):
        raise not_shaped(f"its usage is {type(given).__name__}, not an object")
    out = []
    for name in ("prompt_tokens", "completion_tokens"):
        value = given.get(name)
        if value is None:
            value = 0
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise not_shaped(f"its usage.{name} is {str(value)[:40]!r}, not a count")
        out.append(value)
    return out[0], out[1]


def _size(n: int) -> str:
    return f"{n / (1 << 20):g} MiB" if n >= 1 << 20 else f"{n:,} bytes"


class _SharedSessions:
    """One aiohttp session per endpoint and event loop, shared by the adapters that talk to it
    (a proxy makes one adapter per model name: a thousand names on one server are one pool of
    connections, not a thousand), closed when the last adapter lets go. No connection cap of its
    own: the Models' limiter bounds the requests in flight."""

    def __init__(self) -> None:
        # (endpoint, id(loop)) -> (the loop, its session, the adapters holding it)
        self._open: dict[tuple[str, int], tuple[asyncio.AbstractEventLoop, aiohttp.ClientSession, int]] = {}

    def acquire(self, endpoint: str, loop: asyncio.AbstractEventLoop) -> aiohttp.ClientSession:
        key = (endpoint, id(loop))
        held = self._open.get(key)
        if held is None or held[0] is not loop or held[1].closed:
            session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0, ssl=tls_context()))
            self._open[key] = (loop, session, 1)
            return session
        self._open[key] = (loop, held[1], held[2] + 1)
        return held[1]

    def let_go(self, endpoint: str, loop: asyncio.AbstractEventLoop | None,
               session: aiohttp.ClientSession) -> aiohttp.ClientSession | None:
        """One adapter lets go of ``session``; returns it when that was the last holder (to close)."""
        key = (endpoint, id(loop))
        held = self._open.get(key)
        if held is None or held[1] is not session:
            return None  # no longer the shared one (its loop ended): nothing to do
        if held[2] > 1:
            self._open[key] = (held[0], session, held[2] - 1)
            return None
        del self._open[key]
        return session


_SESSIONS = _SharedSessions()


def _token_logprobs(data: Any) -> list[TokenLogprob] | None:
    """A choice's ``logprobs.content`` as tokens (``None`` when the endpoint sent none, or
    nothing readable); alternatives kept only at tokens that hold a digit."""
    content = data.get("content") if isinstance(data, dict) else None
    if not isinstance(content, list) or not content:
        return None
    tokens = []
    try:
        for entry in content:
            token = str(entry.get("token") or "")
            top: tuple[tuple[str, float], ...] = ()
            if holds_digit(token):
                top = tuple((str(alt.get("token") or ""), float(alt["logprob"]))
                            for alt in entry.get("top_logprobs") or () if alt.get("logprob") is not None)
            tokens.append(TokenLogprob(token, float(entry.get("logprob") or 0.0), top))
    except (AttributeError, TypeError, ValueError):  # the reply stands; only its logprobs are unreadable
        return None
    return tokens


def _error_message(chunk: Mapping[str, object]) -> str:
    error = chunk.get("error")
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    return str(error)


@functools.lru_cache(maxsize=1)
def tls_context() -> Any:
    """One TLS context (certifi's trust store, as the SDK's HTTP library uses)
    shared by every client: loading the certificates costs tens of milliseconds."""
    import ssl

    import certifi

    return ssl.create_default_context(cafile=certifi.where())


def fold_system(messages: tuple[Message, ...]) -> tuple[Message, ...]:
    """For a server that takes no system role: the system messages' text leads the
    first user turn (or becomes one), separated by a blank line."""
    system = "\n\n".join(m.text for m in messages if isinstance(m, SystemMessage))
    rest = [m for m in messages if not isinstance(m, SystemMessage)]
    for i, m in enumerate(rest):
        if isinstance(m, UserMessage):
            return (*rest[:i], prepend_text(m, system), *rest[i + 1:])
    return (UserMessage(content=system), *rest)


def map_openai_error(exc: Exception, *, model: str, endpoint: str) -> Exception:
    """Errors of an OpenAI-protocol call as jurist errors (see :func:`map_transport_error`)."""
    return map_transport_error(exc, model=model, endpoint=endpoint, wire="OpenAI")
