"""Read queries. All SQL of jurist lives in this package."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Connection

from jurist.store.tables import evaluations, llm_calls, scores


def list_calls(
    conn: Connection,
    *,
    limit: int | None = 20,
    purpose: str | None = None,
    status: str | None = None,
    trace_id: str | None = None,
    model: str | None = None,
) -> list[dict[str, Any]]:
    """LLM calls, newest first, optionally filtered."""
    stmt = select(llm_calls).order_by(llm_calls.c.created_at.desc(), llm_calls.c.id)
    if purpose:
        stmt = stmt.where(llm_calls.c.purpose == purpose)
    if status:
        stmt = stmt.where(llm_calls.c.status == status)
    if trace_id:
        stmt = stmt.where(llm_calls.c.trace_id == trace_id)
    if model:
        stmt = stmt.where(llm_calls.c.model == model)
    if limit is not None:
        stmt = stmt.limit(limit)
    return [dict(r._mapping) for r in conn.execute(stmt)]


def list_evaluations(
    conn: Connection,
    *,
    limit: int | None = 100,
    kind: str | None = None,
    subject_id: str | None = None,
    status: str | None = None,
) -> list[dict[str, Any]]:
    stmt = select(evaluations).order_by(evaluations.c.created_at.desc())
    if kind:
        stmt = stmt.where(evaluations.c.kind == kind)
    if subject_id:
        stmt = stmt.where(evaluations.c.subject_id == subject_id)
    if status:
        stmt = stmt.where(evaluations.c.status == status)
    if limit is not None:
        stmt = stmt.limit(limit)
    return [dict(r._mapping) for r in conn.execute(stmt)]


def scores_of(conn: Connection, evaluation_id: str) -> list[dict[str, Any]]:
    stmt = select(scores).where(scores.c.evaluation_id == evaluation_id).order_by(scores.c.id)
    return [dict(r._mapping) for r in conn.execute(stmt)]


def get_evaluation(conn: Connection, evaluation_id: str, kind: str | None = None) -> dict[str, Any] | None:
    stmt = select(evaluations).where(evaluations.c.id == evaluation_id)
    if kind:
        stmt = stmt.where(evaluations.c.kind == kind)
    row = conn.execute(stmt).first()
    return dict(row._mapping) if row is not None else None
