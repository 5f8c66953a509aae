"""A turn's evaluation has one model and one status vocabulary; the stored turn keeps its documented names."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from jurist.checklist import BatchEvaluation, ChecklistEvaluator, ChecklistTurn
from jurist.errors import PayloadError
from jurist.models import script
from jurist.payloads import read_payload

STORED = {"kind": "checklist", "version": "1.0", "id": "t1", "session_id": "s1", "message_seq": 1, "mode": "recall",
          "status": "evaluation_failed", "judge_model": "scripted/judge", "unchecked": ["a"], "recalled": {},
          "observations": {}, "feedback": "", "dropped_ids": [], "dropped_count": 0, "undecided": [], "reason": "no JSON",
          "call_ids": ["c1", "c2"], "input_tokens": 10, "output_tokens": 2, "learner": "ada", "title": "T",
          "recalled_count": 0, "total_points": 1}


async def test_a_failed_evaluation_is_failed_in_memory_and_evaluation_failed_when_stored(checklist, settings):
    script("judge", "not json", "still not json")
    evaluator = ChecklistEvaluator("scripted/judge", settings=settings)
    ev = await evaluator.evaluate_batch(checklist.points, [{"role": "user", "content": "hi"}])
    assert isinstance(ev, BatchEvaluation) and ev.status == "failed" and ev.turn_status == "evaluation_failed"
    turn = ChecklistTurn.of(ev, id="t1", session_id="s1", message_seq=1, mode="recall", unchecked=["a"])
    assert turn.status == "failed" and turn.to_json()["status"] == "evaluation_failed"


def test_a_stored_turn_reads_back_with_the_outcome_status_and_writes_its_documented_name():
    turn = read_payload("checklist", STORED)
    assert isinstance(turn, ChecklistTurn) and turn.status == "failed"
    assert turn.to_json() == STORED
    assert ChecklistTurn.model_validate({**STORED, "status": "failed"}).to_json() == STORED


def test_a_turn_stored_before_undecided_points_were_kept_reads_back_with_none():
    earlier = {k: v for k, v in STORED.items() if k != "undecided"}
    assert read_payload("checklist", earlier).undecided == []


def test_a_turn_keeps_the_points_its_judge_could_not_decide():
    ev = BatchEvaluation(recalled_point_ids=["a"], confidence_per_point={"a": 0.9}, undecided_ids=["b"],
                         reason="uncertain: the local judge cannot decide whether the text expresses 'B'")
    turn = ChecklistTurn.of(ev, id="t1", session_id="s1", message_seq=1, mode="recall", unchecked=["a", "b"])
    assert turn.status == "ok" and turn.recalled == {"a": 0.9} and turn.undecided == ["b"]
    assert turn.to_json()["undecided"] == ["b"] and turn.to_json()["reason"].startswith("uncertain:")
    assert read_payload("checklist", turn.to_json()) == turn


def test_a_turn_with_an_unknown_status_or_field_is_an_error():
    with pytest.raises(PayloadError, match="status"):
        read_payload("checklist", {**STORED, "status": "scored"})
    with pytest.raises(PayloadError, match=r"feedbak: unknown field 'feedbak' \(did you mean 'feedback'\?\)"):
        read_payload("checklist", {**STORED, "feedbak": "x"})


def test_an_evaluation_is_a_value():
    ev = BatchEvaluation(recalled_point_ids=["a"], confidence_per_point={"a": 0.9})
    with pytest.raises(ValidationError):
        ev.status = "skipped"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        BatchEvaluation(status="evaluation_failed")  # type: ignore[arg-type]
