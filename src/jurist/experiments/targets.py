"""What an experiment runs over its dataset: a model, or the user's own Python function.

``TARGET`` is a model reference (``openai/gpt-4o-mini``, an alias, ``scripted/...``, any
OpenAI-compatible server through ``providers:`` in jurist.yaml) or
``python:module:function`` (``python:myapp.bot:answer``; a dotted name after the colon
reaches a class attribute). A function, sync or async, takes the item's input (its text,
or its list of chat messages) and returns the answer text, or the messages of its turn
(tool calls and their results, say) ending with the assistant's final answer.

Both are called through :class:`~jurist.models.model.Model`: a model with its endpoint's
limiter, retries and time-out; a function as an in-process backend (the settings'
time-out per call, no retries: a function that raises fails its item). Every generation is
a recorded call of purpose ``generation``, never answered from the call cache (each run
generates afresh; a rerun of the same experiment keeps the answers it stored).

A function target is imported by :func:`load_target`, before any call: a module or a
function that cannot be found is an InputError.
"""

from __future__ import annotations

import asyncio
import contextvars
import importlib
import inspect
import json
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

from pydantic import JsonValue

from jurist.errors import ConfigError, InputError, ModelError, RequestRejected
from jurist.experiments.records import DatasetItem
from jurist.models.base import ChatRequest, Completion
from jurist.models.model import Model, RetryPolicy
from jurist.models.registry import model_for
from jurist.runtime import Runtime

PYTHON = "python:"
PURPOSE = "generation"

Messages = list[dict[str, JsonValue]]


@dataclass
class Generation:
    """A target's answer to one item: its text, the turns it added after the input (the last
    one the assistant's answer), the recorded call and how long it took."""

    answer: str
    turns: Messages
    call_id: str | None = None
    latency_ms: float = 0.0

    def to_json(self) -> dict[str, JsonValue]:
        return {"answer": self.answer, "turns": list(self.turns), "call_id": self.call_id,
                "latency_ms": self.latency_ms}

    @classmethod
    def from_json(cls, data: dict[str, JsonValue]) -> "Generation":
        turns = data.get("turns")
        call_id = data.get("call_id")
        latency = data.get("latency_ms")
        return cls(answer=str(data.get("answer") or ""),
                   turns=[t for t in turns if isinstance(t, dict)] if isinstance(turns, list) else [],
                   call_id=call_id if isinstance(call_id, str) else None,
                   latency_ms=float(latency) if isinstance(latency, (int, float)) else 0.0)


def input_messages(item: DatasetItem) -> Messages:
    """The item's input as chat messages (a text input is one user turn)."""
    if isinstance(item.input, str):
        return [{"role": "user", "content": item.input}]
    return [dict(m) for m in item.input]


@dataclass
class _FunctionCall:
    """One call of a function target: the item's input, and the turns it returned."""

    given: str | Messages
    turns: Messages = field(default_factory=list)


_CALL: contextvars.ContextVar[_FunctionCall | None] = contextvars.ContextVar("jurist_function_target", default=None)


def import_function(ref: str) -> Callable[..., Any]:
    """The function ``python:module:function`` names, imported (the current folder first on the
    import path, as ``python -m`` has it); an InputError says what could not be found."""
    spec = ref[len(PYTHON):]
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise InputError(f"target {ref!r}: write python:module:function (python:myapp.bot:answer)")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            raise InputError(f"target {ref!r}: no module {exc.name!r} (looked in the current folder and the "
                             "import path)") from None
        raise InputError(f"target {ref!r}: importing {module_name} failed: {type(exc).__name__}: {exc}") from None
    except Exception as exc:  # the module's own code failed
        raise InputError(f"target {ref!r}: importing {module_name} failed: {type(exc).__name__}: {exc}") from None
    found: Any = module
    for part in attr.split("."):
        if not hasattr(found, part):
            raise InputError(f"target {ref!r}: {module_name} has no {attr!r}")
        found = getattr(found, part)
    if not callable(found):
        raise InputError(f"target {ref!r}: {attr} is a {type(found).__name__}, not a function")
    return found  # type: ignore[no-any-return]


def _answer_of(name: str, out: object) -> tuple[str, Messages]:
    """What a function target returned, as the answer text and the turns it adds."""
    if isinstance(out, str):
        return out, [{"role": "assistant", "content": out}]
    if isinstance(out, list) and out and all(isinstance(m, dict) for m in out):
        last = out[-1]
        content = last.get("content")
        if last.get("role") != "assistant" or not isinstance(content, str):
            raise RequestRejected(f"{name} returned messages whose last one is not the assistant's answer "
                                  "({\"role\": \"assistant\", \"content\": \"...\"})", model=name)
        try:
            turns = json.loads(json.dumps(out, ensure_ascii=False))
        except (TypeError, ValueError) as exc:
            raise RequestRejected(f"{name} returned messages that are not JSON data: {exc}", model=name) from None
        return content, turns
    raise RequestRejected(f"{name} returned {type(out).__name__}; a target returns the answer text, or a list of "
                          "messages ending with the assistant's answer", model=name)


class FunctionBackend:
    """A user's function as an in-process backend behind :class:`Model`."""

    chats = True
    endpoint = "python"

    def __init__(self, ref: str, fn: Callable[..., Any]) -> None:
        self.name = ref
        self.fn = fn
        self._async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))

    async def complete(self, request: ChatRequest, *, timeout: float | None = None) -> Completion:
        call = _CALL.get()
        given: str | Messages = call.given if call is not None else [m.openai() for m in request.messages]
        try:
            out = await self.fn(given) if self._async else await asyncio.to_thread(self.fn, given)
            if inspect.isawaitable(out):
                out = await out
        except ModelError:
            raise
        except Exception as exc:
            message = str(exc)
            raise RequestRejected(f"{self.name} raised {type(exc).__name__}" + (f": {message}" if message else ""),
                                  model=self.name) from exc
        text, turns = _answer_of(self.name, out)
        if call is not None:
            call.turns = turns
        return Completion(text=text, model=self.name, usage_reported=False)

    def stream(self, request: ChatRequest, *, timeout: float | None = None, into: Completion | None = None) -> Any:
        raise ConfigError(f"{self.name} is a function target: it is called, not streamed")

    async def aclose(self) -> None:
        return None


class Target:
    """A target ready to answer items: a :class:`Model` and how to ask it."""

    def __init__(self, ref: str, model: Model, *, function: bool, max_tokens: int | None) -> None:
        self.ref = ref
        self.model = model
        self.function = function
        self.max_tokens = max_tokens

    def request(self, item: DatasetItem) -> ChatRequest:
        """The request an item's input makes (the model's own temperature)."""
        return ChatRequest(messages=tuple(input_messages(item)),  # type: ignore[arg-type]
                           temperature=None, max_tokens=None if self.function else self.max_tokens)

    async def generate(self, item: DatasetItem, trace_id: str) -> Generation:
        """The target's answer to ``item``; a ModelError when it failed (recorded either way)."""
        token = _CALL.set(_FunctionCall(item.input if isinstance(item.input, str) else input_messages(item)))
        try:
            completion = await self.model.complete(self.request(item), purpose=PURPOSE, trace_id=trace_id,
                                                   use_cache=False)
            call = _CALL.get()
            turns: Messages = call.turns if call is not None and call.turns else [
                {"role": "assistant", "content": completion.text}]
        finally:
            _CALL.reset(token)
        return Generation(completion.text, turns, completion.call_id, round(completion.latency_ms, 1))

    async def aclose(self) -> None:
        await self.model.aclose()


def load_target(ref: str, runtime: Runtime) -> Target:
    """The target ``ref`` names: a function imported now, or a model resolved (ConfigError for an
    unknown one; the offline judge writes no answers). Blocking (an import): call it before the run."""
    settings = runtime.settings
    if ref.startswith(PYTHON):
        fn = import_function(ref)
        model = model_for(FunctionBackend(ref, fn), settings, runtime.limiters, sink=runtime.sink, cache=False,
                          retry=RetryPolicy(max_retries=0), shared=False)
        return Target(ref, model, function=True, max_tokens=None)
    model = runtime.model(ref, cache=False)
    if not model.chats:
        raise ConfigError(f"target {ref}: the offline judge matches meaning only, it writes no answers; "
                          "give a model that writes text, or python:module:function")
    return Target(ref, model, function=False, max_tokens=settings.max_tokens)
