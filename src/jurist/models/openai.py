"""Adapter for any OpenAI-compatible chat-completions endpoint.

One adapter covers OpenAI, vLLM, Ollama, LM Studio, llama.cpp server, Groq and
OpenRouter: only ``base_url`` and ``api_key`` differ. It turns a
:class:`~jurist.models.base.ChatRequest` into one ``chat.completions.create``
call through the official ``openai`` SDK and maps the SDK's errors onto
:mod:`jurist.errors` in :func:`map_openai_error`. It never retries
(``max_retries=0``; the ``Model`` wrapper retries), logs or caches.
"""

from __future__ import annotations

import functools
import json
import os
from typing import Any, AsyncIterator

import openai
from openai.types.chat import ChatCompletion

try:  # the SDK's faster transport, installed with openai[aiohttp]
    import aiohttp
except ImportError:  # pragma: no cover - the default transport still works
    aiohttp = None  # type: ignore[assignment]

from jurist.errors import ConfigError, ModelUnavailable
from jurist.models.base import ChatRequest, Completion
from jurist.models.sdk_errors import map_sdk_error
from jurist.models.sdk_errors import retry_after_seconds, status_error  # noqa: F401  (re-exported)

__all__ = ["OpenAIChat", "map_openai_error", "retry_after_seconds", "status_error"]

STRUCTURED_OUTPUT_MODES = ("auto", "json_schema", "prompt")
NO_KEY = "none"  # sent to self-hosted servers that take no key


class OpenAIChat:
    """``ChatModel`` for an OpenAI-compatible endpoint, through ``AsyncOpenAI``.

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
        self._client = openai.AsyncOpenAI(
            api_key=api_key, base_url=base_url, max_retries=0, http_client=_http_client()
        )
        self.endpoint = str(self._client.base_url).rstrip("/")
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
        """Close the HTTP client and its connections."""
        await self._client.close()

    # -- internals -----------------------------------------------------------

    async def _create(self, request: ChatRequest, timeout: float | None, *, stream: bool) -> Any:
        """One ``create`` call; in "auto" mode, one retry without the schema on a 400."""
        use_schema = request.response_schema is not None and self.schema_supported
        try:
            return await self._send(request, timeout, stream=stream, use_schema=use_schema)
        except (openai.BadRequestError, openai.UnprocessableEntityError):
            if not (use_schema and self.structured_output == "auto"):
                raise
        response = await self._send(request, timeout, stream=stream, use_schema=False)
        # Only now is it clear the schema, not the request, was what the endpoint refused.
        self.schema_supported = False
        return response

    async def _send(self, request: ChatRequest, timeout: float | None, *, stream: bool, use_schema: bool) -> Any:
        params: dict[str, Any] = {"model": self.model, "messages": _messages(request.messages)}
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
            params["stream"] = True
            return await self._client.chat.completions.create(
                **params, timeout=timeout if timeout is not None else openai.NOT_GIVEN
            )
        # The SDK's generic POST: same auth, base URL, timeouts and error types
        # as ``chat.completions.create``, without building typed request and
        # response objects or copying the body, which cost about 1 ms of CPU
        # per call; the body goes as ready JSON bytes.
        return await self._client.post(
            "/chat/completions",
            cast_to=object,
            content=json.dumps(params, ensure_ascii=False).encode(),
            options={"timeout": timeout} if timeout else {},
        )

    def _completion(self, response: Any) -> Completion:
        if isinstance(response, ChatCompletion):
            response = response.model_dump()
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


def _http_client() -> Any:
    """The SDK's aiohttp transport where it is installed (much less CPU per call
    than the default one under many requests in flight), else the default."""
    if aiohttp is None:
        return None
    return openai.DefaultAioHttpClient(verify=_tls_context())


@functools.lru_cache(maxsize=1)
def _tls_context() -> Any:
    """One TLS context (the HTTP library's default trust store) shared by every
    client: loading the certificates costs tens of milliseconds each time."""
    import httpx2

    return httpx2.create_ssl_context()


def _messages(messages: list[dict[str, str]]) -> list[dict[str, Any]]:
    """Our messages in OpenAI form; a ``tool`` turn without a call id becomes user text."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.get("role") == "tool" and "tool_call_id" not in m:
            out.append({"role": "user", "content": f"[tool result] {m.get('content') or ''}"})
        else:
            out.append(dict(m))
    return out


def map_openai_error(exc: BaseException, *, model: str, endpoint: str, key_hint: str) -> Exception:
    """``openai`` SDK errors as jurist errors (see :func:`map_sdk_error`)."""
    return map_sdk_error(exc, openai, openai.OpenAIError, model=model, endpoint=endpoint, key_hint=key_hint, wire="OpenAI")
