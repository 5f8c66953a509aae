"""The gate's record: the LLM calls of a request, the result, store rows.

:class:`GateRecord` is what the gate returns for a request, what the store
keeps as the payload of its ``evaluations`` row (kind ``gate``) and what the
proxy returns as its ``jurist`` field: one frozen model, with its parts
:class:`Attempt`, :class:`Evaluation` and :class:`CallEntry`. Its JSON
(:meth:`GateRecord.to_json`) has the documented shape (``docs/gate.md``).
"""

from __future__ import annotations

import contextvars
from collections import OrderedDict
from typing import Annotated, Any, Literal

from pydantic import (BaseModel, ConfigDict, Field, JsonValue, Strict, SerializerFunctionWrapHandler, model_serializer,
                      model_validator)

from jurist.gate.types import (CALL_COMPREHENSIVE_RETRY, CALL_GENERATION, CALL_REGENERATION, AcceptReason,
                               AttemptKind, Strategy)
from jurist.judges.outcome import FAILED, OK, SKIPPED, Status, row_status
from jurist.models.base import CallRecord, CallStatus
from jurist.models.model import CachedReply, CallSink
from jurist.store.rows import EvaluationRow

GATE_RECORD_VERSION = "1.0"
#: The call types that produce an answer (the first, and each regeneration).
GENERATION_CALLS = frozenset({CALL_GENERATION, CALL_REGENERATION, CALL_COMPREHENSIVE_RETRY})
EARLY_TRACES = 256  # traces whose calls a collector keeps before the gate opens them

#: The attempt an LLM call belongs to; set on the tasks the gate creates.
ATTEMPT: contextvars.ContextVar[int] = contextvars.ContextVar("jurist_gate_attempt", default=0)
#: What the gate asks its generator for (generation | regeneration |
#: comprehensive_retry), set while it runs: a generator that makes its own
#: model calls records them under this purpose.
PURPOSE: contextvars.ContextVar[str] = contextvars.ContextVar("jurist_gate_purpose", default=CALL_GENERATION)

# A verdict's numbers and flags: true and false are not scores, "yes" is not true.
Score = Annotated[float, Strict()]
Flag = Annotated[bool, Strict()]


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CallEntry(_Record):
    """One LLM call of a request (note 004's ``llmApiCalls`` entry): a view of its call record,
    or of a user's function (which has no tokens: those keys are absent, not null). The tokens
    are None when the endpoint reported none (a stream from a server that sends no usage).

    Where the endpoint answered over HTTP: ``http_status`` and ``http_headers`` (note 004's
    ``httpStatus`` and ``httpHeaders``: names lower-cased, credentials and cookies never kept,
    at most 40, each value cut to 512 characters), and the answer's ``finish_reason``
    (``length``: the answer was cut at its token limit); absent where unknown."""

    type: str  # the call's purpose: generation, regeneration, quality_evaluation ...
    iteration: int
    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    tokens: int | None = None
    latency_ms: float = 0.0
    status: CallStatus = "ok"
    call_id: str | None = None
    error: str | None = None
    finish_reason: str | None = None
    http_status: int | None = None
    http_headers: dict[str, str] | None = None

    @model_serializer(mode="wrap")
    def _as_recorded(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        return {k: v for k, v in data.items() if k in self.model_fields_set}  # absent stays absent

    @property
    def failed(self) -> bool:
        return self.status != "ok"


def call_entry(record: CallRecord, iteration: int) -> CallEntry:
    """One entry of :attr:`GateRecord.llm_calls` for a call record."""
    known = record.usage_known
    reply = record.reply
    more: dict[str, Any] = {}
    if reply is not None:
        if reply.finish_reason is not None:
            more["finish_reason"] = reply.finish_reason
        if reply.http_status is not None:
            more.update(http_status=reply.http_status, http_headers=dict(reply.http_headers))
    return CallEntry(
        **more,
        type=record.purpose,
        iteration=iteration,
        model=record.model,
        input_tokens=record.input_tokens if known else None,
        output_tokens=record.output_tokens if known else None,
        tokens=record.input_tokens + record.output_tokens if known else None,
        latency_ms=round(record.latency_ms, 3),
        status=record.status,
        call_id=record.id,
        error=record.error,
    )


class CallCollector:
    """A call sink in front of the store: forwards every record and keeps, per
    trace id, the entries the gate returns with its result (its ``llm_calls``
    are this view of the trace's call records, nothing built by hand)."""

    def __init__(self, inner: CallSink | None, *, early_traces: int = EARLY_TRACES) -> None:
        self.inner = inner
        self.by_trace: dict[str, list[CallEntry]] = {}
        # Calls that ended on a trace before the gate opened it (the proxy's first upstream
        # call, failed before the gate started), kept for the last ``early_traces`` traces.
        self._early: OrderedDict[str, list[CallEntry]] = OrderedDict()
        self._early_traces = early_traces

    def sharing(self, inner: CallSink | None) -> "CallCollector":
        """A collector over the same traces that forwards to ``inner`` (a wrapped model's own sink)."""
        other = CallCollector(inner, early_traces=self._early_traces)
        other.by_trace, other._early = self.by_trace, self._early
        return other

    def open(self, trace_id: str) -> list[CallEntry]:
        """Start collecting for ``trace_id`` (with the calls that ended on it before); the
        returned list fills as calls end."""
        calls = self.by_trace.setdefault(trace_id, [])
        calls[:0] = self._early.pop(trace_id, [])
        return calls

    def close(self, trace_id: str) -> list[CallEntry]:
        """Stop collecting for ``trace_id``; return what was collected."""
        return self.by_trace.pop(trace_id, [])

    def record_call(self, record: CallRecord) -> None:
        calls = self.by_trace.get(record.trace_id or "")
        if calls is not None:
            calls.append(call_entry(record, ATTEMPT.get()))
        elif record.trace_id:  # a call before the gate opened the trace: its first attempt's
            self._early.setdefault(record.trace_id, []).append(call_entry(record, 1))
            self._early.move_to_end(record.trace_id)
            while len(self._early) > self._early_traces:
                self._early.popitem(last=False)
        if self.inner is not None:
            self.inner.record_call(record)

    async def cached_reply(self, request_hash: str) -> CachedReply | None:
        return None if self.inner is None else await self.inner.cached_reply(request_hash)


class Evaluation(_Record):
    """One evaluation of one attempt (note 004's evaluations list entry); ``passed`` None: the
    evaluator gave no verdict (``skipped_reason`` says why) and the answer was accepted unjudged."""

    attempt: int
    passed: Flag | None = None
    quality_score: Score | None = None
    confidence_score: Score | None = None
    issues: list[str] = Field(default_factory=list)
    improvement_hint: str | None = None
    comprehensive: Flag | None = None
    reason: str | None = None
    latency_ms: float = 0.0
    skipped_reason: str | None = None  # set when the evaluation was skipped
    coverage: float | None = None  # parallel strategy: share of the final answer the judge saw (None: all)
    template_hash: str | None = None  # the judge prompt's text that gave the verdict (None: no prompt, a function)

    @property
    def status(self) -> Status:
        """``ok`` with a verdict, ``skipped`` without one (the documented ``evaluation_skipped``)."""
        return SKIPPED if self.passed is None else OK

    @property
    def score(self) -> float | None:
        """The quality score, else the comprehensiveness verdict as 1.0 or 0.0."""
        if self.quality_score is not None:
            return self.quality_score
        return None if self.comprehensive is None else float(self.comprehensive)


class Attempt(_Record):
    """One answer the gate produced: ``number`` 1 is the first, then each regeneration."""

    number: int
    kind: AttemptKind
    text: str = ""
    latency_ms: float | None = None
    evaluation: Evaluation | None = None


def evaluations_list(evaluations: list[Evaluation]) -> list[dict[str, JsonValue]]:
    """Note 004's ``evaluations``: ``[{attempt, comprehensive|quality_score, reason|issues}]``."""
    out = []
    for ev in evaluations:
        item: dict[str, JsonValue] = {"attempt": ev.attempt, "passed": ev.passed}
        if ev.comprehensive is not None:
            item.update(comprehensive=ev.comprehensive, reason=ev.reason or "")
        if ev.quality_score is not None:
            item.update(quality_score=ev.quality_score, issues=list[JsonValue](ev.issues))
        if ev.skipped_reason:
            item.update(skipped=True, reason=ev.skipped_reason)
        out.append(item)
    return out


class GateRecord(_Record):
    """The record of one gated request: what :meth:`Gate.run <jurist.gate.Gate.run>` returns,
    the stored payload and the proxy's ``jurist`` field.

    ``accept_reason`` says why this answer was released (:data:`~jurist.gate.types.AcceptReason`);
    ``evaluation_skipped`` and ``skip_reason``: the evaluator gave no verdict; ``error``: the first
    generation failed and there is no answer (``continue_context`` resumes it). ``evaluations_list``
    is note 004's short view of ``evaluations``. ``evaluation_pending``: only at ``done`` with
    feedback off, while the answer is still being judged (a settled record never has it).
    """

    kind: Literal["gate"] = "gate"
    version: str = GATE_RECORD_VERSION
    answer: str = ""
    accepted_attempt: int = 0
    accept_reason: AcceptReason | None = None  # None: a record stored by hand without one
    attempts: list[Attempt] = Field(default_factory=list)
    evaluations: list[Evaluation] = Field(default_factory=list)
    llm_calls: list[CallEntry] = Field(default_factory=list)
    trace_id: str | None = None
    evaluation_skipped: bool = False
    skip_reason: str | None = None
    error: str | None = None
    continue_context: list[dict[str, JsonValue]] | None = None  # the request's messages, as sent
    strategy: Strategy | None = None  # the gate's configured strategy and evaluator
    evaluator: str | None = None
    question: str | None = None  # the last user message's text (older records have none)
    evaluations_list: list[dict[str, JsonValue]] = Field(default_factory=list)
    evaluation_pending: bool = False
    # The released answer was cut at the upstream's token limit (its generation call's
    # finish_reason is ``length``): never passed as complete without saying so.
    truncated: bool = False

    @model_validator(mode="before")
    @classmethod
    def _cut_answer(cls, data: Any) -> Any:
        """``truncated`` from the call entries, where it is not given."""
        if isinstance(data, dict) and "truncated" not in data and data.get("accepted_attempt"):
            number = data["accepted_attempt"]
            cut = any(_field(c, "finish_reason") == "length" and _field(c, "iteration") == number
                      and _field(c, "type") in GENERATION_CALLS for c in data.get("llm_calls") or ())
            if cut:
                data = {**data, "truncated": True}
        return data

    @property
    def status(self) -> Status:
        """``failed`` (no answer), ``skipped`` (released unjudged) or ``ok``."""
        return FAILED if self.error else SKIPPED if self.evaluation_skipped else OK

    @property
    def accepted(self) -> Attempt | None:
        """The attempt whose answer was released (None after an error)."""
        return next((a for a in self.attempts if a.number == self.accepted_attempt), None)

    def evaluation_of(self, attempt: Attempt) -> Evaluation | None:
        """The attempt's evaluation (older records kept it only in ``evaluations``)."""
        if attempt.evaluation is not None:
            return attempt.evaluation
        return next((e for e in self.evaluations if e.attempt == attempt.number), None)

    def to_json(self) -> dict[str, JsonValue]:
        """The record as JSON data: the stored payload, the ``jurist`` field. ``question`` only when
        known (a record stored before records kept it reads back as it was stored),
        ``evaluation_pending`` only while true."""
        exclude = {name for name, absent in (("question", self.question is None),
                                              ("evaluation_pending", not self.evaluation_pending),
                                              ("truncated", not self.truncated)) if absent}
        return self.model_dump(mode="json", exclude=exclude or None)


def _field(entry: object, name: str) -> object:
    return entry.get(name) if isinstance(entry, dict) else getattr(entry, name, None)


def gate_payload(record: GateRecord) -> dict[str, JsonValue]:
    """The record of one gated request as JSON: the stored payload, and the ``jurist`` field
    the proxy returns over HTTP (the same dict)."""
    return record.to_json()


def evaluation_row(record: GateRecord, *, evaluation_id: str, subject_id: str, judge_model: str | None,
                   strategy: Strategy, evaluator: str) -> EvaluationRow:
    """The ``evaluations`` row (kind ``gate``) for one gated request; its payload is the record."""
    accepted = record.accepted
    ev = accepted.evaluation if accepted else None
    score = None if ev is None else ev.score
    if record.strategy is None or record.evaluator is None:
        record = record.model_copy(update={"strategy": record.strategy or strategy,
                                           "evaluator": record.evaluator or evaluator})
    return EvaluationRow(
        id=evaluation_id, subject_id=subject_id, trace_id=record.trace_id, status=row_status(record.status),
        score=score, max_score=1.0 if score is not None else None,
        percentage=None if score is None else round(score * 100.0, 2), judge_model=judge_model,
        payload=record, passed=None if ev is None or ev.passed is None else bool(ev.passed), escalated=False,
        iterations=max(1, len(record.attempts)),
        max_attempts_hit=record.accept_reason == "max_regenerations" and len(record.attempts) > 1,
        failure=("error" if record.error else "evaluation_skipped" if record.evaluation_skipped
                 else None if ev is not None and ev.passed else "below_threshold"),
    )


def score_rows(record: GateRecord, *, judge_model: str | None) -> list[dict[str, Any]]:
    """One ``scores`` row per evaluated attempt (key ``attempt.<n>``), with the hash of the judge
    prompt that scored it."""
    rows = []
    for a in record.attempts:
        ev = a.evaluation
        if ev is None:
            continue
        rows.append({
            "key": f"attempt.{a.number}", "name": a.kind, "score": ev.score, "max_score": 1.0, "weight": None,
            "status": "evaluation_failed" if ev.passed is None else "scored",
            "reason": ev.skipped_reason or ev.reason or ("; ".join(ev.issues) or None),
            "judge_model": judge_model, "template_hash": ev.template_hash, "input_tokens": 0, "output_tokens": 0,
            "latency_ms": round(ev.latency_ms, 3), "call_id": None,
        })
    return rows
