"""Adapter for any OpenAI-compatible chat-completions endpoint.

One adapter covers OpenAI, vLLM, Ollama, LM Studio, llama.cpp server, Groq and
OpenRouter: only ``base_url`` and ``api_key`` differ. It turns a
:class:`~jurist.models.base.ChatRequest` into one chat-completions call and
maps errors onto :mod:`jurist.errors` in :func:`map_openai_error`. It never
retries (``max_retries=0``; the ``Model`` wrapper retries), logs or caches.

Streams go through the official ``openai`` SDK (over its aiohttp transport).
A non-streaming call is one JSON POST to ``<base_url>/chat/completions``, with
the headers the SDK sends (bearer key, ``OpenAI-Organization`` and
``OpenAI-Project`` from ``OPENAI_ORG_ID`` / ``OPENAI_PROJECT_ID``), over
aiohttp, the HTTP library of the SDK's own ``openai[aiohttp]`` transport,
without the SDK's per-request machinery: that machinery costs more CPU than
the request itself (``benchmarks/adapter_overhead.py``), which decides how
many calls a second one process makes. The SDK (over a second to import) is
imported on the first stream.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import sys
from typing import Any, AsyncIterator

import aiohttp

from jurist import __version__
from jurist.errors import ConfigError, ModelUnavailable, RequestRejected
from jurist.models.base import ChatRequest, Completion
from jurist.models.sdk_errors import error_detail, map_sdk_error, retry_after_seconds, status_error

__all__ = ["OpenAIChat", "map_openai_error", "retry_after_seconds", "status_error"]

STRUCTURED_OUTPUT_MODES = ("auto", "json_schema", "prompt")
NO_KEY = "none"  # sent to self-hosted servers that take no key
DEFAULT_BASE_URL = "https://api.openai.com/v1"  # the SDK's default


class OpenAIChat:
    """``ChatModel`` for an OpenAI-compatible endpoint.

    ``structured_output``: ``"json_schema"`` always sends the request's schema
    as ``response_format``; ``"prompt"`` never does (the prompt asks for JSON);
    ``"auto"`` sends it until the endpoint refuses it with a 400, then retries
    that call without it and leaves it out for this adapter from then on.
    """

    def __init__(
        self,
        model: str,
        *,
        provider: str = "openai",
        base_url: str | None = None,
        api_key: str | None = None,
        structured_output: str = "auto",
    ) -> None:
        if structured_output not in STRUCTURED_OUTPUT_MODES:
            raise ConfigError(
                f"structured_output={structured_output!r} for {provider}/{model}: "
                f"use one of {', '.join(STRUCTURED_OUTPUT_MODES)}"
            )
        base_url = base_url if base_url is not None else os.environ.get("OPENAI_BASE_URL")
        api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        if not api_key:
            if base_url is None:
                raise ConfigError(
                    f"{provider}/{model} needs an API key: set OPENAI_API_KEY, pass api_key, "
                    f"or set providers.{provider}.api_key in jurist.yaml"
                )
            api_key = NO_KEY
        self.model = model
        self.provider = provider
        self.name = f"{provider}/{model}"
        self.structured_output = structured_output
        self._api_key = api_key
        self.endpoint = (base_url or DEFAULT_BASE_URL).rstrip("/")
        self._url = f"{self.endpoint}/chat/completions"
        self._headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json",
                         "Accept": "application/json", "User-Agent": f"jurist/{__version__}"}
        for header, variable in (("OpenAI-Organization", "OPENAI_ORG_ID"), ("OpenAI-Project", "OPENAI_PROJECT_ID")):
            if os.environ.get(variable):
                self._headers[header] = os.environ[variable]
        self._client: Any = None  # the SDK's AsyncOpenAI, made for the first stream
        self._session: aiohttp.ClientSession | None = None  # for non-streaming calls, made in the running loop
        self._session_loop: asyncio.AbstractEventLoop | None = None
        # False once an "auto" endpoint has refused response_format=json_schema.
        self.schema_supported = structured_output != "prompt"

    # -- the ChatModel protocol ---------------------------------------------

    async def complete(self, request: ChatRequest, *, timeout: float | None = None) -> Completion:
        """Send one request and return its completion (text "" when empty)."""
        try:
            response = await self._create(request, timeout, stream=False)
            return self._completion(response)
        except Exception as exc:
            mapped = self._map(exc)
            if mapped is exc:
                raise
            raise mapped from exc

    async def stream(self, request: ChatRequest, *, timeout: float | None = None) -> AsyncIterator[str]:
        """Yield the reply's text deltas as they arrive."""
        try:
            response = await self._create(request, timeout, stream=True)
            async with response:
                async for chunk in response:
                    for choice in chunk.choices or []:
                        delta = choice.delta.content if choice.delta is not None else None
                        if delta:
                            yield delta
        except Exception as exc:
            mapped = self._map(exc)
            if mapped is exc:
                raise
            raise mapped from exc

    async def aclose(self) -> None:
        """Close the HTTP clients and their connections."""
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None
        if self._client is not None:
            await self._client.close()

    # -- internals -----------------------------------------------------------

    async def _create(self, request: ChatRequest, timeout: float | None, *, stream: bool) -> Any:
        """One ``create`` call; in "auto" mode, one retry without the schema on a 400."""
        use_schema = request.response_schema is not None and self.schema_supported
        try:
            return await self._send(request, timeout, stream=stream, use_schema=use_schema)
        except RequestRejected as exc:
            if not (exc.status in (400, 422) and use_schema and self.structured_output == "auto"):
                raise
        response = await self._send(request, timeout, stream=stream, use_schema=False)
        # Only now is it clear the schema, not the request, was what the endpoint refused.
        self.schema_supported = False
        return response

    async def _send(self, request: ChatRequest, timeout: float | None, *, stream: bool, use_schema: bool) -> Any:
        params: dict[str, Any] = {"model": self.model}
        if request.temperature is not None:
            params["temperature"] = request.temperature
        if request.max_tokens is not None:
            params["max_tokens"] = request.max_tokens
        if request.seed is not None:
            params["seed"] = request.seed
        if use_schema:
            params["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": request.schema_name, "schema": request.response_schema, "strict": False},
            }
        if stream:
            params["messages"] = _messages(request.messages)
            params["stream"] = True
            try:
                return await self._sdk().chat.completions.create(**params, **({"timeout": timeout} if timeout else {}))
            except Exception as exc:  # as ours here, so a refused schema is a RequestRejected on both paths
                mapped = self._map(exc)
                if mapped is exc:
                    raise
                raise mapped from exc
        if any(_bare_tool_turn(m) for m in request.messages):
            messages = json.dumps(_messages(request.messages), ensure_ascii=False)
        else:
            messages = request.messages_json  # serialised once, for the cache key too
        rest = json.dumps(params, ensure_ascii=False)  # an object with at least "model"
        return await self._post(('{"messages": ' + messages + ", " + rest[1:]).encode(), timeout)

    async def _post(self, body: bytes, timeout: float | None) -> Any:
        """One chat-completions POST with the SDK's headers; the parsed JSON reply.

        An HTTP error status raises its jurist error here; transport errors,
        timeouts and invalid JSON propagate to :meth:`_map`.
        """
        async with self._http().post(
            self._url, data=body, headers=self._headers, allow_redirects=False,
            timeout=aiohttp.ClientTimeout(total=timeout),
        ) as response:
            raw = await response.read()
            if not 200 <= response.status < 300:
                raise status_error(response.status, error_detail(raw), response.headers, model=self.name,
                                   where=f"{self.name} at {self.endpoint}", key_hint=self._key_hint())
        return json.loads(raw)

    def _sdk(self) -> Any:
        """The SDK client for streams, made (and the SDK imported) on first use."""
        if self._client is None:
            import openai

            self._client = openai.AsyncOpenAI(
                api_key=self._api_key, base_url=self.endpoint, max_retries=0,
                http_client=openai.DefaultAioHttpClient(verify=_tls_context()))
        return self._client

    def _http(self) -> aiohttp.ClientSession:
        """The aiohttp session of the running event loop (a new one for a new loop)."""
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._session_loop is not loop:
            # No connection cap of its own: the Model's limiter bounds the requests in flight.
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0, ssl=_tls_context()))
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
            text = (choice.get("message") or {}).get("content") or ""
            usage = response.get("usage") or {}
            return Completion(
                text=text if isinstance(text, str) else str(text),
                model=self.name,
                input_tokens=int(usage.get("prompt_tokens") or 0),
                output_tokens=int(usage.get("completion_tokens") or 0),
                finish_reason=choice.get("finish_reason"),
            )
        except (AttributeError, IndexError, TypeError, KeyError, ValueError) as exc:
            raise ModelUnavailable(
                f"{self.name} at {self.endpoint} sent a chat completion without the expected fields "
                f"({type(exc).__name__}: {exc}); the server may not be OpenAI-compatible",
                model=self.name,
            ) from exc

    def _map(self, exc: Exception) -> Exception:
        """Our error for ``exc`` (``exc`` itself when it is ours already or unknown)."""
        return map_openai_error(exc, model=self.name, endpoint=self.endpoint, key_hint=self._key_hint())

    def _key_hint(self) -> str:
        if self.provider == "openai":
            return "set OPENAI_API_KEY (or api_key in jurist.yaml) to a valid key"
        return f"set providers.{self.provider}.api_key in jurist.yaml (or its API-key env var) to a valid key"


@functools.lru_cache(maxsize=1)
def _tls_context() -> Any:
    """One TLS context (certifi's trust store, as the SDK's HTTP library uses)
    shared by every client: loading the certificates costs tens of milliseconds."""
    import ssl

    import certifi

    return ssl.create_default_context(cafile=certifi.where())


def _bare_tool_turn(message: dict[str, str]) -> bool:
    return message.get("role") == "tool" and "tool_call_id" not in message


def _messages(messages: list[dict[str, str]]) -> list[dict[str, Any]]:
    """Our messages in OpenAI form; a ``tool`` turn without a call id becomes user text."""
    return [{"role": "user", "content": f"[tool result] {m.get('content') or ''}"} if _bare_tool_turn(m) else dict(m)
            for m in messages]


def map_openai_error(exc: BaseException, *, model: str, endpoint: str, key_hint: str) -> Exception:
    """Errors of an OpenAI-protocol call as jurist errors (see :func:`map_sdk_error`);
    the SDK's own errors only once it is imported (only it raises them)."""
    sdk = sys.modules.get("openai")
    return map_sdk_error(exc, sdk, sdk.OpenAIError if sdk else None, model=model, endpoint=endpoint,
                         key_hint=key_hint, wire="OpenAI")
