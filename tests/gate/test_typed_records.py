"""The gate's result is its stored record (one frozen model, no twin), its events are a
union of frozen models on ``type``, and the record's vocabularies are closed."""

from __future__ import annotations

import json
import typing

import pytest
from pydantic import TypeAdapter, ValidationError

from jurist.errors import PayloadError
from jurist.gate import (
    AcceptReason,
    Attempt,
    DeltaEvent,
    DoneEvent,
    ErrorEvent,
    Evaluation,
    EvaluationEvent,
    GateEvent,
    GateRecord,
    GateResult,
    ThinkingEvent,
)
from jurist.gate.records import CallEntry
from jurist.models import script
from jurist.payloads import read_payload
from tests.gate.helpers import QUESTION, bad, collect, gate, good


async def test_the_result_is_the_stored_record_model():
    script("gen", "first", "second")
    script("judge", bad(), good())
    g = gate()
    result = await g.run(QUESTION, "scripted/gen", trace_id="typed-result")
    g.store.flush()
    [row] = g.store.evaluations(kind="gate")
    await g.aclose()
    assert type(result) is GateRecord and GateResult is GateRecord
    assert all(type(a) is Attempt and type(a.evaluation) is Evaluation for a in result.attempts)
    assert all(type(c) is CallEntry for c in result.llm_calls)
    assert read_payload("gate", row["payload"]) == result  # what is stored reads back as what was returned
    assert result.status == "ok" and row["status"] == "scored"
    with pytest.raises(ValidationError):
        result.answer = "changed"  # type: ignore[misc]  # frozen: a record is a value


async def test_each_event_is_its_own_frozen_model():
    script("gen", "first", "second")
    script("judge", bad(), good())
    g = gate(strategy="blocking")
    events = await collect(g)
    await g.aclose()
    assert [type(e) for e in events] == [EvaluationEvent, ThinkingEvent, DeltaEvent, EvaluationEvent, DoneEvent]
    rejected, thinking, delta, accepted, done = events
    assert rejected.accepted is False and rejected.evaluation.passed is False and rejected.result is None
    assert thinking.retry_count == 1 and thinking.feedback == "Give the height too."
    assert (delta.text, delta.attempt) == ("second ", 2)
    assert accepted.accept_reason == "passed" and done.result.accepted_attempt == 2
    assert done.data["llm_calls"] == [c.model_dump() for c in done.result.llm_calls]
    with pytest.raises(ValidationError):
        delta.text = "x"  # type: ignore[misc]


async def test_a_failed_generation_is_an_error_event_with_its_record():
    script("gen", RuntimeError("down"))
    g = gate()
    [error] = await collect(g)
    await g.aclose()
    assert isinstance(error, ErrorEvent) and error.code == "GENERATION_FAILED"
    assert error.result.status == "failed" and error.result.accept_reason == "error"
    assert error.data["continue_context"] == QUESTION and error.data["error"] == "RuntimeError: down"


def test_the_union_reads_an_event_by_its_type():
    adapter: TypeAdapter[GateEvent] = TypeAdapter(GateEvent)
    ev = adapter.validate_python({"type": "delta", "text": "hi", "attempt": 1})
    assert isinstance(ev, DeltaEvent) and ev.data == {"text": "hi", "attempt": 1}
    with pytest.raises(ValidationError, match="does not match any of the expected tags"):
        adapter.validate_python({"type": "deltas", "text": "hi", "attempt": 1})
    with pytest.raises(ValidationError, match="Extra inputs"):
        adapter.validate_python({"type": "delta", "delta": "hi", "attempt": 1})  # no other key stands in for text


def test_accept_reason_is_one_closed_vocabulary():
    assert set(typing.get_args(AcceptReason)) == {
        "passed", "max_regenerations", "budget", "regeneration_failed", "evaluation_skipped", "feedback_disabled",
        "error", "tool_calls"}
    with pytest.raises(ValidationError, match="accept_reason"):
        GateRecord(accept_reason="accepted")  # type: ignore[arg-type]


@pytest.mark.parametrize("field, value", [
    ("quality_score", True), ("confidence_score", False), ("passed", 1), ("comprehensive", "yes")])
def test_booleans_are_not_scores_and_numbers_are_not_verdicts(field, value):
    with pytest.raises(ValidationError, match=field):
        Evaluation(attempt=1, **{field: value})


def test_a_stored_record_with_an_unknown_field_is_an_error_not_dropped():
    record = GateRecord(answer="Paris.", accepted_attempt=1, accept_reason="passed", trace_id="t").to_json()
    with pytest.raises(PayloadError, match="acept_reason"):
        read_payload("gate", {**record, "acept_reason": "passed"})


def test_call_entries_keep_absent_keys_absent():
    """A user's function has no tokens: its entry has no token keys at all (as stored), not nulls."""
    fn = CallEntry(type="generation", iteration=1, model="fn:write", latency_ms=1.0, status="ok", call_id=None,
                   error=None)
    assert list(fn.model_dump()) == ["type", "iteration", "model", "latency_ms", "status", "call_id", "error"]
    unknown = CallEntry(type="generation", iteration=1, model="m", input_tokens=None, output_tokens=None,
                        tokens=None, latency_ms=1.0, status="ok", call_id="c", error=None)
    assert json.loads(json.dumps(unknown.model_dump()))["tokens"] is None
    assert CallEntry.model_validate(fn.model_dump()).model_dump() == fn.model_dump()
