"""Rows read from the database are typed: validated, frozen, and what was written comes back."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from pydantic import ValidationError

from jurist.store import Store
from jurist.store.checklist_rows import (ChecklistEvaluationRow, ChecklistMessageRow, ChecklistPointRow,
                                         ChecklistSessionRow, FsrsCardRow)
from jurist.store.labels import LabelRow
from tests.conftest import fresh_database

AT = datetime(2026, 2, 3, 4, 5, 6, tzinfo=timezone.utc)


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path):
    with fresh_database(request.param, tmp_path, prefix="jurist_typed") as url:
        s = Store(url)
        yield s
        s.close()


def test_a_column_the_row_does_not_know_is_an_error_and_rows_are_frozen():
    columns = {"id": 1, "item": "s1", "rubric": "r", "score": 3.0, "passed": None, "annotator": "a", "note": None,
               "evaluation_id": None, "created_at": AT, "updated_at": AT}
    row = LabelRow.of(columns)
    assert row.score == 3.0 and row.model_dump() == columns
    with pytest.raises(ValidationError, match="extra_forbidden"):
        LabelRow.of(columns, colour="blue")
    with pytest.raises(ValidationError, match="frozen"):
        row.score = 4.0
    with pytest.raises(ValidationError):
        LabelRow.of({**columns, "id": "not a number"})


async def test_checklist_rows_come_back_as_written(store):
    session = ChecklistSessionRow(id="cs1", learner="ana", title="Caffeine", points=[{"id": "p1", "text": "One"}],
                                  mode="recall", tutor_model="t/m", judge_model=None, status="active",
                                  created_at=AT, updated_at=AT)
    point = ChecklistPointRow(session_id="cs1", point_id="p1", position=0, status="pending")
    await store.create_checklist_session(session, [point])
    message = ChecklistMessageRow(id="m1", session_id="cs1", seq=1, role="user", content="hello", created_at=AT)
    await store.add_checklist_message(message)
    evaluation = ChecklistEvaluationRow(
        id="ce1", session_id="cs1", message_seq=1, mode="recall", status="ok", judge_model="j/m", unchecked=["p1", "p2"],
        recalled={"p1": 0.8}, observations={"p1": "named it"}, feedback="", dropped_ids=[], dropped_count=0,
        undecided=["p2"], reason="uncertain: p2 in the band", call_ids=["c1"], input_tokens=10, output_tokens=5, created_at=AT)
    await store.record_checklist_evaluation(evaluation, {"p1": 0.8}, AT)
    assert await store.checklist_session("cs1") == session.model_copy(update={"updated_at": AT})
    assert await store.checklist_sessions(learner="ana") == [session]
    assert await store.checklist_messages("cs1") == [message]
    assert await store.checklist_evaluations("cs1") == [evaluation]
    assert await store.checklist_points("cs1") == [
        point.model_copy(update={"status": "recalled", "confidence": 0.8, "message_seq": 1, "recalled_at": AT})]
    assert await store.checklist_session("nope") is None


async def test_fsrs_cards_come_back_as_written(store):
    card = {"card_id": 1, "state": 1, "step": 0, "stability": None, "difficulty": None, "due": AT.isoformat(),
            "last_review": None}
    await store.save_fsrs_card(learner="ana", deck="Caffeine", point_id="p1", text="One", card=card, due=AT,
                               state="Learning", reviews=1, last_rating="Good", last_review=AT, updated_at=AT)
    expected = FsrsCardRow(learner="ana", deck="Caffeine", point_id="p1", text="One", card=card, due=AT,
                           state="Learning", reviews=1, last_rating="Good", last_review=AT, updated_at=AT)
    assert await store.fsrs_card("ana", "Caffeine", "p1") == expected
    assert await store.fsrs_cards("ana") == [expected]
    assert await store.fsrs_card("ana", "Caffeine", "p2") is None
