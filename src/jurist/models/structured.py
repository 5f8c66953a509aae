"""Structured output: how an OpenAI-compatible endpoint is asked for JSON that follows a schema.

Servers read the schema from different request fields; each way is a mode:

``json_schema``
    ``response_format: {"type": "json_schema", "json_schema": {"name", "schema", "strict": false}}``:
    OpenAI, vLLM, LM Studio, llama.cpp's own server, Groq, OpenRouter, and
    Ollama's ``/v1`` (which hands the schema to its ``format``).
``json_object_schema``
    ``response_format: {"type": "json_object", "schema": {...}}``: both llama.cpp
    servers; the only one the Python server (``llama-cpp-python[server]``) takes.
``ollama_format``
    ``format: {...}``: Ollama's own field, for servers that read it on their
    OpenAI-compatible route.
``prompt``
    nothing is sent: the prompt asks for JSON and the parser copes.

``auto`` finds the mode per endpoint. It starts from the provider preset's
guess (:data:`jurist.models.registry.FIRST_GUESS`; ``json_schema`` for a server
of unknown kind). A refusal (a 400 or 422, or any error status whose body
names the field, as llama-cpp-python's 500 does) moves the call on: to the mode
the refusal names, else, when it names the field, to the mode a capability
probe finds honoured (:func:`detect_structured_output`), else to ``prompt``.
The mode that worked is kept per endpoint in a :class:`ModeMemory`: the
runtime's (each runtime has its own; an adapter built outside one keeps its own).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Protocol, Sequence, get_args

from pydantic import JsonValue

from jurist.config import StructuredOutput
from jurist.errors import ModelError
from jurist.models.base import ChatRequest, Completion
from jurist.models.messages import UserMessage

__all__ = ["CONSTRAINED", "STRUCTURED_OUTPUT_MODES", "ModeMemory", "ProbeResult",
           "detect_structured_output", "names_field", "next_mode", "probe_mode", "refuses", "request_fields"]

STRUCTURED_OUTPUT_MODES: tuple[str, ...] = get_args(StructuredOutput)
#: The modes that use a server's constrained decoding, in the order a probe tries them.
CONSTRAINED = ("json_schema", "json_object_schema", "ollama_format")

#: A word no model writes unasked: a reply holding it followed the probe's schema.
PROBE_WORD = "jurist-probe-ok"
PROBE_SCHEMA: dict[str, JsonValue] = {
    "type": "object",
    "properties": {"probe": {"type": "string", "enum": [PROBE_WORD]}},
    "required": ["probe"],
    "additionalProperties": False,
}
PROBE_MAX_TOKENS = 64  # room for the object; a reasoning model may spend some first


class Probed(Protocol):
    """What a probe needs of an adapter (an :class:`~jurist.models.openai.OpenAIChat`)."""

    endpoint: str
    guess: str | None
    modes: "ModeMemory"

    async def complete(self, request: ChatRequest, *, timeout: float | None = None,
                       structured_output: str | None = None) -> Completion: ...


def request_fields(mode: str, schema: dict[str, JsonValue], name: str, *, strict: bool = False) -> dict[str, JsonValue]:
    """The body fields that ask for ``schema`` in ``mode`` (none for ``prompt``); ``strict``: json_schema's own flag."""
    if mode == "json_schema":
        return {"response_format": {"type": "json_schema",
                                    "json_schema": {"name": name, "schema": schema, "strict": strict}}}
    if mode == "json_object_schema":
        return {"response_format": {"type": "json_object", "schema": schema}}
    if mode == "ollama_format":
        return {"format": schema}
    return {}


def _said(exc: ModelError) -> str:
    """What the endpoint said, lower case: its error body, else the message."""
    raw = exc.body[:4096].decode("utf-8", "replace") if exc.body else str(exc)
    return raw.lower()


def names_field(exc: ModelError, mode: str) -> bool:
    """Whether the endpoint's error names ``mode``'s field or type."""
    said = _said(exc)
    field = "format" if mode == "ollama_format" else "response_format"
    return field in said or mode in said


def refuses(exc: ModelError, mode: str) -> bool:
    """Whether ``exc`` may be the endpoint refusing ``mode``'s field: a 400 or 422, or
    any other client or server error that names the field (llama-cpp-python
    answers a ``json_schema`` it cannot read with a 500). The caller confirms it
    by the same request without the field going through."""
    if exc.status in (400, 422):
        return True
    if exc.status is None or exc.status < 400 or exc.status in (401, 403, 404, 408, 429):
        return False
    return names_field(exc, mode)


def next_mode(exc: ModelError, tried: list[str]) -> str | None:
    """The mode to try after a refusal: one the refusal names (llama-cpp-python's
    "Input should be 'text' or 'json_object'") not tried yet; else ``None`` when
    the refusal names the field (the server has a way of its own: probe for it);
    else ``prompt``."""
    said = _said(exc)
    for mode, word in (("json_object_schema", "json_object"), ("json_schema", "json_schema")):
        if mode not in tried and word in said:
            return mode
    return None if names_field(exc, tried[-1]) else "prompt"


class ModeMemory:
    """The structured-output mode found for each endpoint, kept for a runtime.

    Bounded: past ``size`` endpoints the least recently used is forgotten (and
    found again when it is next used)."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._modes: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()  # adapters on several threads' loops may share it

    def get(self, endpoint: str) -> str | None:
        with self._lock:
            mode = self._modes.get(endpoint)
            if mode is not None:
                self._modes.move_to_end(endpoint)
            return mode

    def set(self, endpoint: str, mode: str) -> None:
        with self._lock:
            self._modes[endpoint] = mode
            self._modes.move_to_end(endpoint)
            while len(self._modes) > self.size:
                self._modes.popitem(last=False)

    def forget(self, endpoint: str | None = None) -> None:
        """Forget one endpoint's mode, or every one."""
        with self._lock:
            if endpoint is None:
                self._modes.clear()
            else:
                self._modes.pop(endpoint, None)

    def __len__(self) -> int:
        return len(self._modes)



@dataclass
class ProbeResult:
    """What one mode did on an endpoint: ``honoured`` (the reply followed the
    probe's schema), ``ignored`` (accepted, but the reply did not) or ``refused``."""

    mode: str
    outcome: str
    reply: str | None = None
    error: str | None = None


def probe_request() -> ChatRequest:
    """A request whose schema admits one answer the prompt never mentions."""
    return ChatRequest(messages=(UserMessage(content="Reply with a JSON object."),),
                       temperature=0.0, max_tokens=PROBE_MAX_TOKENS, seed=0,
                       response_schema=PROBE_SCHEMA, schema_name="probe")


async def probe_mode(adapter: Probed, mode: str, *, timeout: float | None = None) -> ProbeResult:
    """Send the probe in ``mode``. A refusal is a result; any other failure raises."""
    try:
        completion = await adapter.complete(probe_request(), timeout=timeout, structured_output=mode)
    except ModelError as exc:
        if refuses(exc, mode):
            return ProbeResult(mode, "refused", error=str(exc))
        raise
    try:
        honoured = json.loads(completion.text) == {"probe": PROBE_WORD}
    except ValueError:
        honoured = False
    return ProbeResult(mode, "honoured" if honoured else "ignored", reply=completion.text)


async def detect_structured_output(adapter: Probed, *, timeout: float | None = None,
                                   remember: bool = True, skip: Sequence[str] = ()) -> str:
    """The mode of ``adapter``'s endpoint: the first whose probe is honoured (the
    adapter's first guess first, then :data:`CONSTRAINED` in order, less
    ``skip``), else ``prompt``; kept in the adapter's memory when ``remember``.
    Costs one short call per mode tried; an error other than a refusal (auth, a
    rate limit, an unreachable server) raises and nothing is kept."""
    order = [adapter.guess] if adapter.guess in CONSTRAINED else []
    order += [m for m in CONSTRAINED if m not in order]
    found = "prompt"
    for mode in order:
        if mode not in skip and (await probe_mode(adapter, mode, timeout=timeout)).outcome == "honoured":
            found = mode
            break
    if remember:
        adapter.modes.set(adapter.endpoint, found)
    return found
