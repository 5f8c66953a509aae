"""Wire shapes of the gate proxy: OpenAI completions, chunks, errors and jurist's SSE events.

A stock ``openai`` client parses *every* SSE event of a chat stream as a
``chat.completion.chunk`` (it only special-cases ``thread.*`` names), so
jurist's named events (``event: jurist.thinking`` ...) carry a chunk-shaped
body with one choice and an empty delta, exactly like the standard finish
chunk without its ``finish_reason``: stock clients see nothing to print,
and jurist-aware readers take ``jurist_event`` ({type, data}) from it.
``jurist.error`` also carries a top-level ``error`` object, so a stock client
raises ``openai.APIError`` (its ``body`` holds ``continue_context``) instead
of silently ending with half an answer.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from pydantic import BaseModel, ConfigDict, JsonValue

from jurist.gate.records import CallEntry, GateRecord
from jurist.models.base import ToolCallDelta
from jurist.models.error_types import OPENAI_ERROR_TYPES

#: The fields of an error that let the caller resume (note 004's names, and jurist's ``continue_context``).
CONTINUE_FIELDS = ("continue_context", "showContinueButton", "continueContext")


@dataclass(frozen=True)
class Answered:
    """What the upstream's answer carried, passed to the client as the upstream sent it: the
    finish reason (``length``: cut at the token limit), the usage (with any details), the
    choice's ``logprobs``, ``system_fingerprint``, ``service_tier`` and the message's ``refusal``."""

    finish_reason: str | None = None
    usage: Any = None
    logprobs: Any = None
    system_fingerprint: Any = None
    refusal: Any = None
    service_tier: Any = None

    def top(self) -> dict[str, JsonValue]:
        """The completion's top-level fields (usage apart)."""
        return {k: v for k, v in (("system_fingerprint", self.system_fingerprint),
                                  ("service_tier", self.service_tier)) if v is not None}


class Usage(BaseModel):
    """An answer's token usage in OpenAI's shape (``total_tokens`` None: the endpoint reported none)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int | None


def error_object(status: int, message: str, *, param: str | None = None, code: str | None = None,
                 resume: Mapping[str, JsonValue] | None = None, **extra: JsonValue) -> dict[str, JsonValue]:
    """OpenAI's error object ``{message, type, param, code, ...}``; ``resume``: the fields that
    let the caller go on (:data:`CONTINUE_FIELDS`)."""
    kind = OPENAI_ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"message": message, "type": kind, "param": param, "code": code, **extra, **(resume or {})}


def openai_error(status: int, message: str, *, param: str | None = None, code: str | None = None,
                 resume: Mapping[str, JsonValue] | None = None, **extra: JsonValue) -> dict[str, JsonValue]:
    """An error body in OpenAI's shape: ``{"error": {message, type, param, code, ...}}``."""
    return {"error": error_object(status, message, param=param, code=code, resume=resume, **extra)}


def jurist_field(result: GateRecord | None, trace_id: str) -> dict[str, JsonValue]:
    """The extra top-level ``jurist`` field: what the gate did for this answer, its record
    (:meth:`GateRecord.to_json <jurist.gate.records.GateRecord.to_json>`, what the store keeps as
    the evaluation's payload); None (the gate ended with no record): the trace id and nothing done."""
    if result is not None:
        return result.to_json()
    return {"trace_id": trace_id, "evaluations": [], "llm_calls": [], "attempts": [], "accept_reason": None,
            "evaluation_skipped": False}


def tool_round_field(trace_id: str, calls: list[CallEntry], *, error: str | None = None) -> dict[str, JsonValue]:
    """The ``jurist`` field of an answer that calls tools, relayed unjudged (accept and skip reason
    ``tool_calls``: the gate judges the final text answer of the tool loop): its call records."""
    out: dict[str, JsonValue] = {"trace_id": trace_id, "evaluations": [], "llm_calls": [c.model_dump() for c in calls],
                           "attempts": [], "accept_reason": "tool_calls", "evaluation_skipped": True,
                           "skip_reason": "tool_calls"}
    if error is not None:
        out["error"] = error
    return out


class ChunkWriter:
    """Builds the SSE lines of one streamed answer (one id, model and creation time)."""

    def __init__(self, completion_id: str, model: str) -> None:
        self.base: dict[str, JsonValue] = {"id": completion_id, "object": "chat.completion.chunk", "created": int(time.time()),
                     "model": model}
        # A text delta's chunk, written around the text's JSON string: the same text as json.dumps of
        # the whole chunk (the same keys in the same order, the same separators), without building it.
        self._text_head = f"data: {json.dumps(self.base)[:-1]}, \"choices\": [{{\"index\": 0, \"delta\": {{\"content\": "
        self._text_tail = "}, \"finish_reason\": null, \"logprobs\": null}]}\n\n"
        self.started = False  # the role chunk went out
        self.sent_text = False  # some answer text went out
        self.sent_tool_call = False  # some piece of a tool call went out

    def _data(self, payload: Mapping[str, JsonValue], event: str | None = None) -> str:
        head = f"event: {event}\n" if event else ""
        return f"{head}data: {json.dumps(payload, default=str)}\n\n"

    def _chunk(self, delta: dict[str, JsonValue], finish: str | None = None,
               **extra: JsonValue) -> dict[str, JsonValue]:
        choice: dict[str, JsonValue] = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        return {**self.base, "choices": [choice], **extra}

    def role(self) -> str:
        if self.started:
            return ""
        self.started = True
        return self._data(self._chunk({"role": "assistant", "content": ""}))

    def delta(self, text: str) -> str:
        if not text:
            return ""
        self.sent_text = True
        return f"{self.role()}{self._text_head}{json.dumps(text)}{self._text_tail}"

    def tool_call(self, piece: ToolCallDelta) -> str:
        """One piece of a tool call, relayed as the upstream sent it."""
        self.sent_tool_call = True
        return self.role() + self._data(self._chunk({"tool_calls": [piece.openai()]}))

    def event(self, kind: str, data: dict[str, JsonValue]) -> str:
        """A named ``jurist.<kind>`` event (ignored by stock clients: an empty delta)."""
        payload = self._chunk({}, jurist_event={"type": kind, "data": data})
        return self.role() + self._data(payload, f"jurist.{kind}")

    def error(self, data: dict[str, JsonValue], *, status: int, message: str | None, code: str | None) -> str:
        """The ``jurist.error`` event: its ``data``, and OpenAI's error object (so that a stock client
        raises) with the fields of ``data`` that let the caller go on (:data:`CONTINUE_FIELDS`)."""
        payload = self._chunk({}, jurist_event={"type": "error", "data": data})
        resume = {k: data[k] for k in CONTINUE_FIELDS if k in data}
        payload["error"] = error_object(status or 502, message or "upstream failed", code=code, resume=resume)
        return self.role() + self._data(payload, "jurist.error")

    def finish(self, jurist: dict[str, JsonValue], usage: Usage | None = None, data: Answered | None = None) -> str:
        """The last chunk: the upstream's finish reason (``data``; without one, ``tool_calls`` after a
        tool call, else ``stop``), its usage (else ``usage``, from the call record), system fingerprint,
        and the answer's logprobs and refusal in its delta and choice."""
        data = data or Answered()
        extra: dict[str, JsonValue] = {"jurist": jurist, **data.top()}
        if data.usage is not None:
            extra["usage"] = data.usage
        elif usage:
            extra["usage"] = usage.model_dump()
        finish = data.finish_reason or ("tool_calls" if self.sent_tool_call else "stop")
        delta: dict[str, JsonValue] = {} if data.refusal is None else {"refusal": data.refusal}
        payload = self._chunk(delta, finish, **extra)
        if data.logprobs is not None:
            payload["choices"][0]["logprobs"] = data.logprobs  # type: ignore[index, call-overload]
        return self.role() + self._data(payload)

    @staticmethod
    def done() -> str:
        return "data: [DONE]\n\n"


def completion_body(completion_id: str, model: str, answer: str, jurist: dict[str, JsonValue],
                    usage: Usage | None, tool_calls: Sequence[JsonValue] | None = None, *,
                    data: Answered | None = None) -> dict[str, JsonValue]:
    """A standard ``chat.completion`` with the accepted answer and the ``jurist`` field; an
    answer that calls tools carries them (no content if it has no text). What the upstream's
    answer carried (``data``) is passed on as it came: finish reason (without one: ``tool_calls``
    or ``stop``), usage (else ``usage``, from the call record), logprobs, refusal, system fingerprint."""
    data = data or Answered()
    message: dict[str, JsonValue] = {"role": "assistant", "content": answer}
    if tool_calls:
        message = {"role": "assistant", "content": answer or None, "tool_calls": list(tool_calls)}
    if data.refusal is not None:
        message["refusal"] = data.refusal
    body: dict[str, JsonValue] = {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message,
                     "finish_reason": data.finish_reason or ("tool_calls" if tool_calls else "stop"),
                     "logprobs": data.logprobs}],
        **data.top(),
        "jurist": jurist,
    }
    if data.usage is not None:
        body["usage"] = data.usage
    elif usage:
        body["usage"] = usage.model_dump()
    return body
