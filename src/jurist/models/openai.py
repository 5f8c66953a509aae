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
from typing import Any, AsyncIterator, Mapping

import aiohttp

from jurist.version import __version__
from jurist.errors import ConfigError, ModelError, ModelUnavailable, RequestRejected
from jurist.models.base import (ChatRequest, Completion, StreamItem, TokenLogprob, ToolCallDelta, add_tool_call,
                                StreamedToolCall, holds_digit, message_tool_calls)
from jurist.models.images import attach
from jurist.models.messages import Message, SystemMessage, UserMessage, openai_messages, prepend_text
from jurist.models.sdk_errors import error_detail, map_transport_error, retry_after_seconds, status_error
from jurist.models.structured import (CONSTRAINED, STRUCTURED_OUTPUT_MODES, ModeMemory,
                                      detect_structured_output, next_mode, refuses, request_fields)

__all__ = ["OpenAIChat", "map_openai_error", "retry_after_seconds", "status_error", "tls_context"]

NO_KEY = "none"  # sent to self-hosted servers that take no key
DEFAULT_BASE_URL = "https://api.openai.com/v1"  # the SDK's default


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
    closes it), instead of the adapter's own one per event loop.
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
        self._session: aiohttp.ClientSession | None = None  # made in the running loop
        self._session_loop: asyncio.AbstractEventLoop | None = None
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
                raw = await response.read()
            completion = self._completion(json.loads(raw))
            completion.structured_output = mode
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
        calls: list[StreamedToolCall] = []
        try:
            response, mode = await self._open(
                request, aiohttp.ClientTimeout(sock_connect=timeout, sock_read=timeout), stream=True)
            if into is not None:
                into.structured_output = mode
            async with response:
                async for event in _sse_data(response.content):
                    if event == "[DONE]":
                        finished = True
                        break
                    chunk = json.loads(event)
                    if not isinstance(chunk, dict):
                        continue
                    if chunk.get("error") is not None:
                        raise ModelUnavailable(
                            f"{self.name} at {self.endpoint} failed mid-stream: {_error_message(chunk)}; "
                            "try again later", model=self.name)
                    items, finish, tokens = self._chunk(chunk)
                    if into is not None and tokens is not None:
                        usage = True
                        into.input_tokens, into.output_tokens = tokens
                    for item in items:
                        if isinstance(item, ToolCallDelta):
                            add_tool_call(calls, item)
                        yield item
                    if finish:
                        finished = True
                        if into is not None:
                            into.finish_reason = finish
            if into is not None and calls:
                into.tool_calls = message_tool_calls(calls)
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

    def _chunk(self, chunk: dict[str, Any]) -> tuple[list[StreamItem], str | None, tuple[int, int] | None]:
        """A stream chunk's text deltas and tool call pieces, its finish reason and its usage (input
        and output tokens); a chunk not in OpenAI's shape is ModelUnavailable, as a reply not read."""
        items: list[StreamItem] = []
        finish: str | None = None
        try:
            given = chunk.get("usage")
            tokens = ((int(given.get("prompt_tokens") or 0), int(given.get("completion_tokens") or 0))
                      if isinstance(given, dict) else None)
            for choice in chunk.get("choices") or ():
                delta = choice.get("delta") or {}
                content = delta.get("content")
                if content:
                    if not isinstance(content, str):
                        raise TypeError(f"a delta's content is {type(content).__name__}, not text")
                    items.append(content)
                items += [ToolCallDelta.from_openai(entry, position)
                          for position, entry in enumerate(delta.get("tool_calls") or ())]
                if choice.get("finish_reason"):
                    finish = str(choice["finish_reason"])
        except (AttributeError, TypeError, ValueError) as exc:
            raise ModelUnavailable(f"{self.name} at {self.endpoint} sent a stream chunk not in OpenAI's shape "
                                   f"({exc}); the server may not be OpenAI-compatible", model=self.name) from None
        return items, finish, tokens

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
        """Close the adapter's own HTTP session and its connections."""
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None

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
            params.update(request_fields(mode, request.response_schema, request.schema_name))
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
        """The given session, else the adapter's own one for the running event loop."""
        if self._given_session is not None:
            return self._given_session
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._session_loop is not loop:
            # No connection cap of its own: the Model's limiter bounds the requests in flight.
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0, ssl=tls_context()))
            self._session_loop = loop
        return self._session

    def _completion(self, response: Any) -> Completion:
        if not isinstance(response, dict) or "choices" not in response:
            raise ModelUnavailable(
                f"{self.name} at {self.endpoint} answered with something that is not a chat completion; "
                "check that base_url points at an OpenAI-compatible /v1 endpoint",
                model=self.name,
            )
        try:
            choice = response["choices"][0]
            message = choice.get("message") or {}
            text = message.get("content") or ""
            usage = response.get("usage") or {}
            return Completion(
                text=text if isinstance(text, str) else str(text),
                model=self.name,
                input_tokens=int(usage.get("prompt_tokens") or 0),
                output_tokens=int(usage.get("completion_tokens") or 0),
                finish_reason=choice.get("finish_reason"),
                logprobs=_token_logprobs(choice.get("logprobs")),
                tool_calls=message.get("tool_calls") or None,
            )
        except (AttributeError, IndexError, TypeError, KeyError, ValueError) as exc:
            raise ModelUnavailable(
                f"{self.name} at {self.endpoint} sent a chat completion without the expected fields "
                f"({type(exc).__name__}: {exc}); the server may not be OpenAI-compatible",
                model=self.name,
            ) from exc

    def _map(self, exc: Exception) -> Exception:
        """Our error for ``exc`` (``exc`` itself when it is ours already or unknown)."""
        return map_openai_error(exc, model=self.name, endpoint=self.endpoint)

    def _key_hint(self) -> str:
        if self.provider == "openai":
            return "set OPENAI_API_KEY (or api_key in jurist.yaml) to a valid key"
        return f"set providers.{self.provider}.api_key in jurist.yaml (or its API-key env var) to a valid key"


async def _sse_data(content: aiohttp.StreamReader) -> AsyncIterator[str]:
    """The ``data`` of each server-sent event (its ``data:`` lines joined), in order."""
    data: list[str] = []
    async for raw in content:
        line = raw.decode("utf-8").rstrip("\r\n")
        if not line:
            if data:
                yield "\n".join(data)
                data = []
        elif line.startswith("data:"):
            data.append(line[6:] if line.startswith("data: ") else line[5:])
    if data:
        yield "\n".join(data)


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
