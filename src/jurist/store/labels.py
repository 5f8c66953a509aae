"""Queries of human labels (the ``labels`` table) and of the judge's scores they are compared with."""

from __future__ import annotations

from datetime import datetime
from typing import Iterable

from pydantic import BaseModel, ConfigDict
from sqlalchemy import and_, delete, func, insert, select, update
from sqlalchemy.engine import Connection

from jurist.store.stored import StoredRow
from jurist.store.tables import evaluations, labels, scores

MAX_LABELS_READ = 100_000


class NewLabel(BaseModel):
    """A person's label of one rubric of an item, as it is saved: a score or pass/fail."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    item: str
    rubric: str
    annotator: str
    score: float | None = None
    passed: bool | None = None
    note: str | None = None
    evaluation_id: str | None = None


class LabelRow(StoredRow):
    """A stored label (a ``labels`` row)."""

    id: int
    item: str
    rubric: str
    score: float | None
    passed: bool | None
    annotator: str
    note: str | None
    evaluation_id: str | None
    created_at: datetime
    updated_at: datetime


class RubricScore(StoredRow):
    """The judge's score of one rubric in a stored rubric evaluation."""

    score: float | None
    max_score: float | None
    status: str
    reason: str | None


class LatestRubricScores(StoredRow):
    """An item's newest rubric evaluation and its scores by rubric."""

    evaluation_id: str
    judge_model: str | None
    scores: dict[str, RubricScore]


def save_label(conn: Connection, label: NewLabel, at: datetime) -> LabelRow:
    """Insert a label, or replace the one the same annotator gave this item and rubric; returns it."""
    key = and_(labels.c.item == label.item, labels.c.rubric == label.rubric, labels.c.annotator == label.annotator)
    values = label.model_dump(include={"score", "passed", "note", "evaluation_id"})
    changed = conn.execute(update(labels).where(key).values(**values, updated_at=at)).rowcount
    if not changed:
        conn.execute(insert(labels), [{**label.model_dump(), "created_at": at, "updated_at": at}])
    found = conn.execute(select(labels).where(key)).first()
    assert found is not None  # written above, in this transaction
    return LabelRow.of(found._mapping)


def delete_label(conn: Connection, label_id: int) -> LabelRow | None:
    """Delete one label by id; returns it as it was (None: no such label)."""
    found = conn.execute(select(labels).where(labels.c.id == label_id)).first()
    if found is None:
        return None
    conn.execute(delete(labels).where(labels.c.id == label_id))
    return LabelRow.of(found._mapping)


def labels_of(conn: Connection, item: str) -> list[LabelRow]:
    """The labels of one item, by rubric and annotator."""
    stmt = select(labels).where(labels.c.item == item).order_by(labels.c.rubric, labels.c.annotator)
    return [LabelRow.of(r._mapping) for r in conn.execute(stmt)]


def all_labels(conn: Connection, *, limit: int = MAX_LABELS_READ) -> list[LabelRow]:
    """Every label (at most ``limit``, the newest), by item, rubric and annotator."""
    newest = select(labels.c.id).order_by(labels.c.updated_at.desc(), labels.c.id.desc()).limit(limit).subquery()
    stmt = (select(labels).where(labels.c.id.in_(select(newest.c.id)))
            .order_by(labels.c.item, labels.c.rubric, labels.c.annotator))
    return [LabelRow.of(r._mapping) for r in conn.execute(stmt)]


def latest_rubric_scores(conn: Connection, items: Iterable[str]) -> dict[str, LatestRubricScores]:
    """The newest rubric evaluation of each item, with its scores by rubric."""
    wanted = sorted(set(items))
    heads: dict[str, tuple[str, str | None]] = {}  # item -> (evaluation id, judge model)
    found: dict[str, dict[str, RubricScore]] = {}
    e = evaluations.c
    for start in range(0, len(wanted), 500):  # bounded IN lists
        chunk = wanted[start:start + 500]
        newest = (select(e.subject_id, func.max(e.created_at).label("at"))
                  .where(e.kind == "rubric", e.subject_id.in_(chunk)).group_by(e.subject_id).subquery())
        rows = conn.execute(
            select(e.id, e.subject_id, e.judge_model, scores.c.key, scores.c.score, scores.c.max_score,
                   scores.c.status, scores.c.reason)
            .join(newest, and_(e.subject_id == newest.c.subject_id, e.created_at == newest.c.at))
            .join(scores, scores.c.evaluation_id == e.id)
            .where(e.kind == "rubric")
            .order_by(e.subject_id, e.id))
        for r in rows:
            if heads.setdefault(r.subject_id, (r.id, r.judge_model))[0] != r.id:
                continue  # two evaluations at the same moment: the first by id
            found.setdefault(r.subject_id, {})[r.key] = RubricScore(score=r.score, max_score=r.max_score,
                                                                    status=r.status, reason=r.reason)
    return {item: LatestRubricScores(evaluation_id=eid, judge_model=judge, scores=found[item])
            for item, (eid, judge) in heads.items()}
