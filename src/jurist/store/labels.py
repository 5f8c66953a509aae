"""Queries of human labels (the ``labels`` table) and of the judge's scores they are compared with."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Iterable

from sqlalchemy import and_, func, insert, select, update
from sqlalchemy.engine import Connection

from jurist.store.tables import evaluations, labels, scores

MAX_LABELS_READ = 100_000


def save_label(conn: Connection, row: dict[str, Any], at: datetime) -> dict[str, Any]:
    """Insert a label, or replace the one the same annotator gave this item and rubric; returns it."""
    key = and_(labels.c.item == row["item"], labels.c.rubric == row["rubric"], labels.c.annotator == row["annotator"])
    values = {k: row.get(k) for k in ("score", "passed", "note", "evaluation_id")}
    changed = conn.execute(update(labels).where(key).values(**values, updated_at=at)).rowcount
    if not changed:
        conn.execute(insert(labels), [{**values, "item": row["item"], "rubric": row["rubric"],
                                       "annotator": row["annotator"], "created_at": at, "updated_at": at}])
    found = conn.execute(select(labels).where(key)).first()
    assert found is not None  # written above, in this transaction
    return dict(found._mapping)


def labels_of(conn: Connection, item: str) -> list[dict[str, Any]]:
    """The labels of one item, by rubric and annotator."""
    stmt = select(labels).where(labels.c.item == item).order_by(labels.c.rubric, labels.c.annotator)
    return [dict(r._mapping) for r in conn.execute(stmt)]


def all_labels(conn: Connection, *, limit: int = MAX_LABELS_READ) -> list[dict[str, Any]]:
    """Every label (at most ``limit``, the newest), by item, rubric and annotator."""
    newest = select(labels.c.id).order_by(labels.c.updated_at.desc(), labels.c.id.desc()).limit(limit).subquery()
    stmt = (select(labels).where(labels.c.id.in_(select(newest.c.id)))
            .order_by(labels.c.item, labels.c.rubric, labels.c.annotator))
    return [dict(r._mapping) for r in conn.execute(stmt)]


def latest_rubric_scores(conn: Connection, items: Iterable[str]) -> dict[str, dict[str, Any]]:
    """The newest rubric evaluation of each item, with its scores by rubric:
    ``{item: {"evaluation_id", "judge_model", "scores": {rubric: {"score", "max_score", "status", "reason"}}}}``."""
    wanted = sorted(set(items))
    out: dict[str, dict[str, Any]] = {}
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
            entry = out.setdefault(r.subject_id, {"evaluation_id": r.id, "judge_model": r.judge_model, "scores": {}})
            if entry["evaluation_id"] != r.id:
                continue  # two evaluations at the same moment: the first by id
            entry["scores"][r.key] = {"score": r.score, "max_score": r.max_score, "status": r.status,
                                      "reason": r.reason}
    return out
