"""The gate's events: one frozen model per event type, :data:`GateEvent` their union on ``type``.

Every event has ``type``, ``data`` (its JSON data: what the proxy sends as
the SSE event ``jurist.<type>``, the documented shape) and ``result`` (the
whole :class:`~jurist.gate.records.GateRecord` on ``done``, ``error`` and the
evaluation that follows ``done`` with feedback off; None on the others)::

    delta       {text, attempt}
    thinking    {message, strategy, retry_count, ts, feedback}
    revision    {text, attempt, replaces}
    evaluation  {<the Evaluation's fields>, accepted[, accepted_attempt, accept_reason][, after_done]}
    done        {trace_id, accepted_attempt, accept_reason, evaluations, llm_calls[, evaluation_pending]}
    error       {error, code, show_continue_button, continue_context, partial_answer,
                 last_user_message, trace_id}

Read them with ``isinstance`` or ``match``; ``done`` and ``error`` carry their
fields on the record (``event.result``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from jurist.gate.records import Evaluation, GateRecord
from jurist.gate.types import AcceptReason, ErrorCode


class _Event(BaseModel, ABC):
    model_config = ConfigDict(frozen=True, extra="forbid")

    result: GateRecord | None = None

    @property
    @abstractmethod
    def data(self) -> dict[str, JsonValue]:
        """The event's JSON data (the SSE event's ``data``): each event type gives its own."""


class DeltaEvent(_Event):
    """A piece of the answer's text, as it streams (``attempt``: whose text)."""

    type: Literal["delta"] = "delta"
    text: str
    attempt: int

    @property
    def data(self) -> dict[str, JsonValue]:
        return {"text": self.text, "attempt": self.attempt}


class ThinkingEvent(_Event):
    """An attempt was rejected: the gate regenerates (``retry_count``: the attempt rejected)."""

    type: Literal["thinking"] = "thinking"
    message: str
    strategy: Literal["regenerate"] = "regenerate"
    retry_count: int
    ts: float
    feedback: str | None = None

    @property
    def data(self) -> dict[str, JsonValue]:
        return {"message": self.message, "strategy": self.strategy, "retry_count": self.retry_count, "ts": self.ts,
                "feedback": self.feedback}


class RevisionEvent(_Event):
    """The accepted answer replaces the one already shown (attempt ``replaces``)."""

    type: Literal["revision"] = "revision"
    text: str
    attempt: int
    replaces: int

    @property
    def data(self) -> dict[str, JsonValue]:
        return {"text": self.text, "attempt": self.attempt, "replaces": self.replaces}


class EvaluationEvent(_Event):
    """An attempt's evaluation: rejected (``accepted`` false), or the accepted answer's, with why it
    was accepted; ``after_done``: with feedback off, the evaluation made after ``done``."""

    type: Literal["evaluation"] = "evaluation"
    evaluation: Evaluation
    accepted: bool
    accepted_attempt: int | None = None
    accept_reason: AcceptReason | None = None
    after_done: bool = False

    @property
    def data(self) -> dict[str, JsonValue]:
        data: dict[str, JsonValue] = {**self.evaluation.model_dump(), "accepted": self.accepted}
        if self.accepted_attempt is not None:
            data.update(accepted_attempt=self.accepted_attempt, accept_reason=self.accept_reason)
        if self.after_done:
            data["after_done"] = True
        return data


class DoneEvent(_Event):
    """The answer is released: ``result`` is its record (with feedback off, ``evaluation_pending``)."""

    type: Literal["done"] = "done"
    result: GateRecord

    @property
    def data(self) -> dict[str, JsonValue]:
        r = self.result
        data: dict[str, JsonValue] = {"trace_id": r.trace_id, "accepted_attempt": r.accepted_attempt,
                                "accept_reason": r.accept_reason, "evaluations": list[JsonValue](r.evaluations_list),
                                "llm_calls": [c.model_dump() for c in r.llm_calls]}
        if r.evaluation_pending:
            data["evaluation_pending"] = True
        return data


class ErrorEvent(_Event):
    """The first generation failed: no answer. ``result`` is the record (its ``error``, the
    partial ``answer``, the ``continue_context`` to resend with ``is_continuation``)."""

    type: Literal["error"] = "error"
    code: ErrorCode
    last_user_message: dict[str, JsonValue] | None = None
    result: GateRecord

    @property
    def data(self) -> dict[str, JsonValue]:
        r = self.result
        return {"error": r.error, "code": self.code, "show_continue_button": True,
                "continue_context": None if r.continue_context is None else list[JsonValue](r.continue_context),
                "partial_answer": r.answer,
                "last_user_message": self.last_user_message, "trace_id": r.trace_id}


GateEvent = Annotated[Union[DeltaEvent, ThinkingEvent, RevisionEvent, EvaluationEvent, DoneEvent, ErrorEvent],
                      Field(discriminator="type")]

__all__ = ["DeltaEvent", "DoneEvent", "ErrorEvent", "EvaluationEvent", "GateEvent", "RevisionEvent",
           "ThinkingEvent"]
