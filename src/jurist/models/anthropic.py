"""Adapter for Anthropic's messages API, through the official ``anthropic`` SDK.

System messages go into the ``system`` parameter, consecutive turns of the same
role are merged, and ``tool`` turns become user text prefixed ``[tool result]``.
A request's images become image blocks of its first user turn (:func:`image_block`).
There is no native schema mode here: the judge prompt asks for JSON and the
parser reads it. Errors are mapped in :func:`map_anthropic_error`. The adapter
never retries (``max_retries=0``; the ``Model`` wrapper retries), logs or caches.
"""

from __future__ import annotations

import os
from typing import Any, AsyncIterator

import anthropic
from anthropic.types import Message

from jurist.errors import ConfigError, ModelUnavailable
from jurist.models.base import ChatRequest, Completion
from jurist.models.images import Image, attach
from jurist.models.sdk_errors import map_sdk_error

__all__ = ["AnthropicChat", "map_anthropic_error"]

DEFAULT_MAX_TOKENS = 1024  # the messages API requires max_tokens
NO_KEY = "none"  # sent to a self-hosted compatible server that takes no key
KEY_HINT = "set ANTHROPIC_API_KEY (or providers.anthropic.api_key in jurist.yaml) to a valid key"


class AnthropicChat:
    """``ChatModel`` for the Anthropic messages API, through ``AsyncAnthropic``."""

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None) -> None:
        if api_key is None and not (os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN")):
            if base_url is None and not os.environ.get("ANTHROPIC_BASE_URL"):
                raise ConfigError(
                    f"anthropic/{model} needs an API key: set ANTHROPIC_API_KEY, pass api_key, "
                    "or set providers.anthropic.api_key in jurist.yaml"
                )
            api_key = NO_KEY
        self.model = model
        self.name = f"anthropic/{model}"
        self._client = anthropic.AsyncAnthropic(api_key=api_key, base_url=base_url, max_retries=0)
        self.endpoint = str(self._client.base_url).rstrip("/")

    async def complete(self, request: ChatRequest, *, timeout: float | None = None) -> Completion:
        """Send one request and return its completion (text "" when empty)."""
        try:
            response = await self._client.messages.create(**self._params(request), timeout=_timeout(timeout))
            return self._completion(response)
        except Exception as exc:
            mapped = map_anthropic_error(exc, model=self.name, endpoint=self.endpoint)
            if mapped is exc:
                raise
            raise mapped from exc

    async def stream(self, request: ChatRequest, *, timeout: float | None = None,
                     into: Completion | None = None) -> AsyncIterator[str]:
        """Yield the reply's text deltas as they arrive; ``into`` gets the usage and stop reason."""
        try:
            response = await self._client.messages.create(
                **self._params(request), stream=True, timeout=_timeout(timeout)
            )
            async with response:
                async for event in response:
                    if event.type == "content_block_delta" and event.delta.type == "text_delta":
                        if event.delta.text:
                            yield event.delta.text
                    elif into is not None and event.type == "message_start" and event.message.usage:
                        into.input_tokens = event.message.usage.input_tokens or 0
                    elif into is not None and event.type == "message_delta":
                        into.output_tokens = (event.usage.output_tokens or 0) if event.usage else into.output_tokens
                        into.finish_reason = event.delta.stop_reason or into.finish_reason
        except Exception as exc:
            mapped = map_anthropic_error(exc, model=self.name, endpoint=self.endpoint)
            if mapped is exc:
                raise
            raise mapped from exc

    async def aclose(self) -> None:
        """Close the HTTP client and its connections."""
        await self._client.close()

    def _params(self, request: ChatRequest) -> dict[str, Any]:
        # The messages API in this SDK takes no temperature or seed; the
        # ChatRequest's sampling fields other than max_tokens are not sent.
        system, turns = split_messages(request.messages)
        params: dict[str, Any] = {
            "model": self.model,
            "messages": attach(turns, request.images, image_block) if request.images else turns,
            "max_tokens": request.max_tokens if request.max_tokens is not None else DEFAULT_MAX_TOKENS,
        }
        if system:
            params["system"] = system
        return params

    def _completion(self, response: Any) -> Completion:
        if not isinstance(response, Message) or not isinstance(getattr(response, "content", None), list):
            raise ModelUnavailable(
                f"{self.name} at {self.endpoint} answered with something that is not a message; "
                "check that base_url points at an Anthropic-compatible endpoint (without /v1)",
                model=self.name,
            )
        try:
            text = "".join(block.text or "" for block in response.content if block.type == "text")
            usage = response.usage
            return Completion(
                text=text,
                model=self.name,
                input_tokens=(usage.input_tokens or 0) if usage else 0,
                output_tokens=(usage.output_tokens or 0) if usage else 0,
                finish_reason=response.stop_reason,
            )
        except (AttributeError, TypeError, KeyError) as exc:
            raise ModelUnavailable(
                f"{self.name} at {self.endpoint} sent a message without the expected fields "
                f"({type(exc).__name__}: {exc}); the server may not be Anthropic-compatible",
                model=self.name,
            ) from exc


def split_messages(messages: list[dict[str, str]]) -> tuple[str, list[dict[str, str]]]:
    """Pull system text out; merge consecutive same-role turns; tool turns become user text."""
    system: list[str] = []
    turns: list[dict[str, str]] = []
    for m in messages:
        role, content = m.get("role", "user"), m.get("content") or ""
        if role == "system":
            system.append(content)
            continue
        if role == "tool":
            role, content = "user", f"[tool result] {content}"
        elif role != "assistant":
            role = "user"
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"] += "\n\n" + content
        else:
            turns.append({"role": role, "content": content})
    return "\n\n".join(system), turns


def image_block(image: Image) -> dict[str, Any]:
    """An image as Anthropic's content block: a ``base64`` source for its bytes, a ``url``
    source for an http(s) URL (the API fetches it)."""
    if image.remote:
        return {"type": "image", "source": {"type": "url", "url": image.url}}
    return {"type": "image", "source": {"type": "base64", "media_type": image.media_type,
                                        "data": image.base64_data}}


def map_anthropic_error(exc: Exception, *, model: str, endpoint: str) -> Exception:
    """``anthropic`` SDK errors as jurist errors (see :func:`map_sdk_error`);
    529 (overloaded) is a 5xx and so ``ModelUnavailable``."""
    return map_sdk_error(exc, anthropic, anthropic.AnthropicError, model=model, endpoint=endpoint, key_hint=KEY_HINT, wire="Anthropic")


def _timeout(timeout: float | None) -> Any:
    return timeout if timeout is not None else anthropic.NOT_GIVEN
