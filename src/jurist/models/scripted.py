"""A scripted provider: queued replies and recorded requests, in process.

Registered as ``scripted/<name>`` like any other provider, for logic tests
and example apps. Script it with :func:`script`::

    script("demo", "SCORE: 4\\nREASONING: clear", RateLimited("slow down"))
    model = resolve_model("scripted/demo", settings)
"""

from __future__ import annotations

import asyncio
from typing import AsyncIterator, Callable, Union

from jurist.errors import ConfigError
from jurist.models.base import ChatRequest, Completion

ScriptedReply = Union[str, Exception, Callable[[ChatRequest], str]]


class ScriptedChat:
    """Answers from a queue; when the queue is empty, from ``default``."""

    def __init__(self, name: str, default: ScriptedReply | None = None, delay: float = 0.0) -> None:
        self.name = f"scripted/{name}"
        self.endpoint = f"scripted:{name}"
        self.default = default
        self.delay = delay
        self.queue: list[ScriptedReply] = []
        self.requests: list[ChatRequest] = []

    def push(self, *replies: ScriptedReply) -> None:
        self.queue.extend(replies)

    def _next(self, request: ChatRequest) -> str:
        reply = self.queue.pop(0) if self.queue else self.default
        if reply is None:
            raise ConfigError(f"{self.name} has no scripted reply left; push more with jurist.models.script()")
        if isinstance(reply, Exception):
            raise reply
        if callable(reply):
            return reply(request)
        return reply

    async def complete(self, request: ChatRequest, *, timeout: float | None = None) -> Completion:
        self.requests.append(request)
        if self.delay:
            await asyncio.sleep(self.delay)
        text = self._next(request)
        chars = sum(len(m.text) for m in request.messages)
        return Completion(text=text, model=self.name, input_tokens=chars // 4, output_tokens=len(text) // 4)

    async def stream(self, request: ChatRequest, *, timeout: float | None = None,
                     into: Completion | None = None) -> AsyncIterator[str]:
        completion = await self.complete(request, timeout=timeout)
        if into is not None:
            into.input_tokens, into.output_tokens = completion.input_tokens, completion.output_tokens
        for word in completion.text.split(" "):
            yield word + " "

    async def aclose(self) -> None:
        return None


_SCRIPTED: dict[str, ScriptedChat] = {}


def scripted(name: str) -> ScriptedChat:
    """The shared scripted adapter called ``name`` (created empty on first use)."""
    if name not in _SCRIPTED:
        _SCRIPTED[name] = ScriptedChat(name)
    return _SCRIPTED[name]


def forget_scripted() -> None:
    """Forget every scripted adapter (a test starts with none)."""
    _SCRIPTED.clear()


def script(name: str, *replies: ScriptedReply, default: ScriptedReply | None = None) -> ScriptedChat:
    """Queue replies for ``scripted/<name>`` (and optionally set its default)."""
    adapter = scripted(name)
    adapter.push(*replies)
    if default is not None:
        adapter.default = default
    return adapter
