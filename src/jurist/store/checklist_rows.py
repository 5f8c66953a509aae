"""Typed rows of the continuous checklist's tables: what ``Store`` writes and reads back.

JSON columns keep JSON data (the checklist as started, a card's ``fsrs.Card.to_dict()``,
the judge's observations); everything else is a typed column.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from jurist.store.stored import StoredRow


ChecklistMode = Literal["recall", "rabbithole"]  # jurist.checklist.evaluator.Mode


class ChecklistSessionRow(StoredRow):
    """A ``checklist_sessions`` row: one learner working through one checklist."""

    id: str
    learner: str
    title: str
    points: list[dict[str, Any]]  # JSON: the checklist's points as started ([{"id", "text"}])
    mode: ChecklistMode
    tutor_model: str | None
    judge_model: str | None
    status: str  # active | completed | ended
    created_at: datetime
    updated_at: datetime
    completed_at: datetime | None = None


class ChecklistPointRow(StoredRow):
    """A ``checklist_points`` row: where one point of a session stands."""

    session_id: str
    point_id: str
    position: int
    status: str  # pending | recalled
    confidence: float | None = None
    message_seq: int | None = None  # the user message that recalled it
    recalled_at: datetime | None = None


class ChecklistMessageRow(StoredRow):
    """A ``checklist_messages`` row: a visible message (never the hidden feedback)."""

    id: str
    session_id: str
    seq: int
    role: str  # user | assistant
    content: str
    created_at: datetime


class ChecklistEvaluationRow(StoredRow):
    """A ``checklist_evaluations`` row: the judge's evaluation of one user message."""

    id: str
    session_id: str
    message_seq: int
    mode: str
    status: str  # ok | evaluation_failed | skipped
    judge_model: str | None
    unchecked: list[str]  # the point ids judged
    recalled: dict[str, float]  # point id -> confidence
    observations: dict[str, str]  # point id -> the judge's observation
    feedback: str
    dropped_ids: list[str]  # ids the judge invented
    dropped_count: int
    undecided: list[str]  # point ids the judge could not decide (the reason says why)
    reason: str | None
    call_ids: list[str]
    input_tokens: int
    output_tokens: int
    created_at: datetime


class FsrsCardRow(StoredRow):
    """An ``fsrs_cards`` row: the spaced-repetition card of one learner's point."""

    learner: str
    deck: str  # the checklist's title
    point_id: str
    text: str
    card: dict[str, Any]  # JSON: fsrs.Card.to_dict()
    due: datetime
    state: str
    reviews: int
    last_rating: str | None
    last_review: datetime | None
    updated_at: datetime
