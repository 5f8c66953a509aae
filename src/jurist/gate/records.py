"""The gate's record: the LLM calls of a request, the result as JSON, store rows.

:class:`GateRecord` is the stored payload of a gated request (kind ``gate``):
the :class:`~jurist.gate.types.GateResult` with the strategy, the evaluator
and note 004's ``evaluations`` list.
"""

from __future__ import annotations

import contextvars
import dataclasses
from collections import OrderedDict
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from jurist.gate.types import CALL_GENERATION, GateResult
from jurist.models.base import CallRecord
from jurist.models.model import CallSink
from jurist.store.rows import EvaluationRow

GATE_RECORD_VERSION = "1.0"
EARLY_TRACES = 256  # traces whose calls a collector keeps before the gate opens them

#: The attempt an LLM call belongs to; set on the tasks the gate creates.
ATTEMPT: contextvars.ContextVar[int] = contextvars.ContextVar("jurist_gate_attempt", default=0)
#: What the gate asks its generator for (generation | regeneration |
#: comprehensive_retry), set while it runs: a generator that makes its own
#: model calls records them under this purpose.
PURPOSE: contextvars.ContextVar[str] = contextvars.ContextVar("jurist_gate_purpose", default=CALL_GENERATION)


def call_entry(record: CallRecord, iteration: int) -> dict[str, Any]:
    """One entry of ``GateResult.llm_calls`` (note 004's ``llmApiCalls``); the tokens are
    ``None`` when the endpoint reported none (a stream from a server that sends no usage)."""
    known = record.params.get("usage") != "not reported"
    return {
        "type": record.purpose,
        "iteration": iteration,
        "model": record.model,
        "input_tokens": record.input_tokens if known else None,
        "output_tokens": record.output_tokens if known else None,
        "tokens": record.input_tokens + record.output_tokens if known else None,
        "latency_ms": round(record.latency_ms, 3),
        "status": record.status,
        "call_id": record.id,
        "error": record.error,
    }


class CallCollector:
    """A call sink in front of the store: forwards every record and keeps, per
    trace id, the entries the gate returns with its result (its ``llm_calls``
    are this view of the trace's call records, nothing built by hand)."""

    def __init__(self, inner: CallSink | None, *, early_traces: int = EARLY_TRACES) -> None:
        self.inner = inner
        self.by_trace: dict[str, list[dict[str, Any]]] = {}
        # Calls that ended on a trace before the gate opened it (the proxy's first upstream
        # call, failed before the gate started), kept for the last ``early_traces`` traces.
        self._early: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()
        self._early_traces = early_traces

    def sharing(self, inner: CallSink | None) -> "CallCollector":
        """A collector over the same traces that forwards to ``inner`` (a wrapped model's own sink)."""
        other = CallCollector(inner, early_traces=self._early_traces)
        other.by_trace, other._early = self.by_trace, self._early
        return other

    def open(self, trace_id: str) -> list[dict[str, Any]]:
        """Start collecting for ``trace_id`` (with the calls that ended on it before); the
        returned list fills as calls end."""
        calls = self.by_trace.setdefault(trace_id, [])
        calls[:0] = self._early.pop(trace_id, [])
        return calls

    def close(self, trace_id: str) -> list[dict[str, Any]]:
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

    async def cached_reply(self, request_hash: str) -> dict[str, Any] | None:
        return None if self.inner is None else await self.inner.cached_reply(request_hash)


def result_json(result: GateResult) -> dict[str, Any]:
    """The gate's result as plain JSON data."""
    return dataclasses.asdict(result)


def gate_payload(result: GateResult) -> dict[str, Any]:
    """The record of one gated request: the stored payload, and the ``jurist``
    field the proxy returns over HTTP (the same dict)."""
    return GateRecord.of(result, strategy=result.strategy, evaluator=result.evaluator).to_json()


def evaluations_list(result: GateResult) -> list[dict[str, Any]]:
    """Note 004's ``evaluations``: ``[{attempt, comprehensive|quality_score, reason|issues}]``."""
    out = []
    for ev in result.evaluations:
        item: dict[str, Any] = {"attempt": ev.attempt, "passed": ev.passed}
        if ev.comprehensive is not None:
            item.update(comprehensive=ev.comprehensive, reason=ev.reason or "")
        if ev.quality_score is not None:
            item.update(quality_score=ev.quality_score, issues=list(ev.issues))
        if ev.skipped_reason:
            item.update(skipped=True, reason=ev.skipped_reason)
        out.append(item)
    return out


class _Part(BaseModel):
    model_config = ConfigDict(extra="allow")


class EvaluationEntry(_Part):
    """One evaluation of one attempt (:class:`~jurist.gate.types.Evaluation`)."""

    attempt: int
    passed: bool | None = None  # None: evaluation skipped (fail-safe)
    quality_score: float | None = None
    confidence_score: float | None = None
    issues: list[str] = Field(default_factory=list)
    improvement_hint: str | None = None
    comprehensive: bool | None = None
    reason: str | None = None
    latency_ms: float = 0.0
    skipped_reason: str | None = None
    coverage: float | None = None


class AttemptEntry(_Part):
    """One answer the gate produced (:class:`~jurist.gate.types.Attempt`)."""

    number: int
    kind: str  # generation | regeneration | comprehensive_retry
    text: str = ""
    latency_ms: float | None = None
    evaluation: EvaluationEntry | None = None


class GateRecord(_Part):
    """The stored record of one gated request."""

    kind: Literal["gate"] = "gate"
    version: str = GATE_RECORD_VERSION
    answer: str = ""
    accepted_attempt: int = 0
    accept_reason: str | None = None
    attempts: list[AttemptEntry] = Field(default_factory=list)
    evaluations: list[EvaluationEntry] = Field(default_factory=list)
    llm_calls: list[dict[str, Any]] = Field(default_factory=list)
    trace_id: str | None = None
    evaluation_skipped: bool = False
    skip_reason: str | None = None
    error: str | None = None
    continue_context: list[dict[str, Any]] | None = None
    strategy: str | None = None
    evaluator: str | None = None
    question: str | None = None  # the last user message (older records have none)
    evaluations_list: list[dict[str, Any]] = Field(default_factory=list)

    @classmethod
    def of(cls, result: GateResult, *, strategy: str | None, evaluator: str | None) -> "GateRecord":
        data = result_json(result)
        # ``evaluation_pending``: only in the ``jurist`` field at ``done`` with feedback off (the
        # evaluation comes after it); a settled record is stored as records always were.
        if not data["evaluation_pending"]:
            del data["evaluation_pending"]
        return cls.model_validate({**data, "strategy": strategy, "evaluator": evaluator,
                                   "evaluations_list": evaluations_list(result)})

    def evaluation_of(self, attempt: AttemptEntry) -> EvaluationEntry | None:
        """The attempt's evaluation (older records kept it only in ``evaluations``)."""
        if attempt.evaluation is not None:
            return attempt.evaluation
        return next((e for e in self.evaluations if e.attempt == attempt.number), None)

    def to_json(self) -> dict[str, Any]:
        # A record stored before records kept the question reads back as it was stored.
        return self.model_dump(mode="json", exclude=None if self.question is not None else {"question"})


def evaluation_row(result: GateResult, *, evaluation_id: str, subject_id: str, judge_model: str | None,
                   strategy: str, evaluator: str) -> EvaluationRow:
    """The ``evaluations`` row (kind ``gate``) for one gated request; its payload is a :class:`GateRecord`."""
    accepted = next((a for a in result.attempts if a.number == result.accepted_attempt), None)
    ev = accepted.evaluation if accepted else None
    score = None if ev is None else (ev.quality_score if ev.quality_score is not None
                                    else (None if ev.comprehensive is None else float(ev.comprehensive)))
    status = "failed" if result.error else ("skipped" if result.evaluation_skipped else "scored")
    if result.strategy is None or result.evaluator is None:
        result = dataclasses.replace(result, strategy=result.strategy or strategy,
                                     evaluator=result.evaluator or evaluator)
    return EvaluationRow(
        id=evaluation_id, subject_id=subject_id, trace_id=result.trace_id, status=status, score=score,
        max_score=1.0 if score is not None else None,
        percentage=None if score is None else round(score * 100.0, 2), judge_model=judge_model,
        payload=GateRecord.of(result, strategy=result.strategy, evaluator=result.evaluator),
        passed=None if ev is None or ev.passed is None else bool(ev.passed), escalated=False,
        iterations=max(1, len(result.attempts)),
        max_attempts_hit=result.accept_reason == "max_regenerations" and len(result.attempts) > 1,
        failure=("error" if result.error else "evaluation_skipped" if result.evaluation_skipped
                 else None if ev is not None and ev.passed else "below_threshold"),
    )


def score_rows(result: GateResult, *, judge_model: str | None) -> list[dict[str, Any]]:
    """One ``scores`` row per evaluated attempt (key ``attempt.<n>``)."""
    rows = []
    for a in result.attempts:
        ev = a.evaluation
        if ev is None:
            continue
        score = ev.quality_score if ev.quality_score is not None else (
            None if ev.comprehensive is None else float(ev.comprehensive))
        rows.append({
            "key": f"attempt.{a.number}", "name": a.kind, "score": score, "max_score": 1.0, "weight": None,
            "status": "evaluation_failed" if ev.passed is None else "scored",
            "reason": ev.skipped_reason or ev.reason or ("; ".join(ev.issues) or None),
            "judge_model": judge_model, "template_hash": None, "input_tokens": 0, "output_tokens": 0,
            "latency_ms": round(ev.latency_ms, 3), "call_id": None,
        })
    return rows
