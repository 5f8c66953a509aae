"""Adapter for Anthropic's messages API, through the official ``anthropic`` SDK.

System messages go into the ``system`` parameter, consecutive turns of the same
role are merged, and ``tool`` turns become user text prefixed ``[tool result]``.
A request's images become image blocks of its first user turn (:func:`anthropic_turn`).
There is no native schema mode here: the judge prompt asks for JSON and the
parser reads it. Errors are mapped in :func:`map_anthropic_error`. The adapter
never retries (``max_retries=0``; the ``Model`` wrapper retries), logs or caches.
The SDK client is given the key and the address (default: Anthropic's), so it
looks up neither ``ANTHROPIC_API_KEY`` nor ``ANTHROPIC_BASE_URL``: the registry
passes them as the settings read them.
"""

from __future__ import annotations

from typing import Any, AsyncIterator, Sequence, Union

import anthropic
from anthropic.types import Message as AnthropicMessage
from pydantic import JsonValue

from jurist.errors import ConfigError, ModelUnavailable, Unsupported
from jurist.models.base import ChatRequest, Completion
from jurist.models.images import attach
from jurist.models.messages import (AssistantMessage, AssistantPart, ImagePart, Message, SystemMessage, TextPart, UserMessage,
                                    UserPart)
from jurist.models.sdk_errors import map_sdk_error

__all__ = ["AnthropicChat", "map_anthropic_error"]

DEFAULT_BASE_URL = "https://api.anthropic.com"  # the SDK's default
DEFAULT_MAX_TOKENS = 1024  # the messages API requires max_tokens
NO_KEY = "none"  # sent to a self-hosted compatible server that takes no key
KEY_HINT = "set ANTHROPIC_API_KEY (or providers.anthropic.api_key in jurist.yaml) to a valid key"


class AnthropicChat:
    """``ChatModel`` for the Anthropic messages API, through ``AsyncAnthropic``."""

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None) -> None:
        if not api_key:
            if base_url is None:
                raise ConfigError(
                    f"anthropic/{model} needs an API key: pass api_key, or resolve the model through settings "
                    "built with ANTHROPIC_API_KEY set or providers.anthropic.api_key in jurist.yaml"
                )
            api_key = NO_KEY  # a self-hosted compatible server
        self.model = model
        self.name = f"anthropic/{model}"
        self._client = anthropic.AsyncAnthropic(api_key=api_key, base_url=base_url or DEFAULT_BASE_URL, max_retries=0)
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

    def _params(self, request: ChatRequest) -> dict[str, Any]:  # the SDK call's keyword arguments
        # The messages API in this SDK takes no temperature or seed; the
        # ChatRequest's sampling fields other than max_tokens are not sent.
        system, turns = split_messages(request.messages)
        params: dict[str, Any] = {
            "model": self.model,
            "messages": [anthropic_turn(m) for m in (attach(turns, request.images) if request.images else turns)],
            "max_tokens": request.max_tokens if request.max_tokens is not None else DEFAULT_MAX_TOKENS,
        }
        if system:
            params["system"] = system
        return params

    def _completion(self, response: Any) -> Completion:
        if not isinstance(response, AnthropicMessage) or not isinstance(getattr(response, "content", None), list):
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


Turn = Union[UserMessage, AssistantMessage]


def split_messages(messages: Sequence[Message]) -> tuple[str, list[Turn]]:
    """Pull system text out; merge consecutive same-role turns; tool turns become user text
    (an assistant turn's tool calls are not sent: the messages API takes them only with tools)."""
    system: list[str] = []
    turns: list[Turn] = []
    for m in messages:
        if isinstance(m, SystemMessage):
            system.append(m.text)
            continue
        turn: Turn
        if isinstance(m, AssistantMessage):
            turn = AssistantMessage(content=m.text)
        elif isinstance(m, UserMessage):
            turn = UserMessage(content=m.content)
        else:  # a tool's (or function's) result
            turn = UserMessage(content=f"[tool result] {m.text}")
        if turns and turns[-1].role == turn.role:
            turn = _merged(turns.pop(), turn)
        turns.append(turn)
    return "\n\n".join(system), turns


def _merged(first: Turn, second: Turn) -> Turn:
    """Two turns of one role as one: texts joined by a blank line, parts one after the other."""
    if isinstance(first.content, str) and isinstance(second.content, str):
        return first.model_copy(update={"content": f"{first.content}\n\n{second.content}"})
    assert isinstance(first, UserMessage) and isinstance(second, UserMessage)  # assistant turns are text here
    return first.model_copy(update={"content": (*_parts(first.content), *_parts(second.content))})


def _parts(content: str | tuple[UserPart, ...]) -> tuple[UserPart, ...]:
    return (TextPart(text=content),) if isinstance(content, str) else content


def anthropic_turn(message: Message) -> dict[str, JsonValue]:
    """A turn in the messages API's form: its text, or its parts as text and image blocks."""
    content = message.content
    if content is None or isinstance(content, str):
        return {"role": message.role, "content": content or ""}
    return {"role": message.role, "content": [anthropic_block(part) for part in content]}


def anthropic_block(part: UserPart | AssistantPart) -> dict[str, JsonValue]:
    """A content part as Anthropic's block: text, or an image (a data URL as a ``base64``
    source, an http(s) URL as a ``url`` source, which the API fetches)."""
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, ImagePart):
        url = part.image_url.url
        if not url.startswith("data:"):
            return {"type": "image", "source": {"type": "url", "url": url}}
        head, _, data = url.partition(",")
        return {"type": "image", "source": {"type": "base64", "media_type": head[5:].partition(";")[0],
                                            "data": data}}
    raise Unsupported(f"a {part.type} part cannot be sent to the Anthropic messages API (text and images only)")


def map_anthropic_error(exc: Exception, *, model: str, endpoint: str) -> Exception:
    """``anthropic`` SDK errors as jurist errors (see :func:`map_sdk_error`);
    529 (overloaded) is a 5xx and so ``ModelUnavailable``."""
    return map_sdk_error(exc, anthropic, anthropic.AnthropicError, model=model, endpoint=endpoint, key_hint=KEY_HINT, wire="Anthropic")


def _timeout(timeout: float | None) -> Any:
    return timeout if timeout is not None else anthropic.NOT_GIVEN
