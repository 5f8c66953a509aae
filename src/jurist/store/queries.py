"""Read queries. All SQL of jurist lives in this package."""

from __future__ import annotations

import difflib
import functools
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, get_args, get_type_hints

from datetime import datetime

from sqlalchemy import ColumnElement, Table, bindparam, insert, select, update
from sqlalchemy.engine import Connection

from jurist.models.base import CallRecord
from jurist.models.model import CachedReply
from jurist.store.checklist_rows import (ChecklistEvaluationRow, ChecklistMessageRow, ChecklistPointRow,
                                         ChecklistSessionRow, FsrsCardRow)
from jurist.store.rows import EvaluationRow, evaluation_values

from jurist.store.tables import (
    checklist_evaluations,
    checklist_messages,
    checklist_points,
    checklist_sessions,
    evaluations,
    fsrs_cards,
    llm_calls,
    scores,
)

if TYPE_CHECKING:
    from sqlalchemy.dialects.postgresql import Insert as PostgresInsert
    from sqlalchemy.dialects.sqlite import Insert as SqliteInsert


def insert_history(conn: Connection, evals: list[dict[str, Any]], score_rows: list[dict[str, Any]],
                   calls: list[dict[str, Any]]) -> None:
    """Bulk insert of evaluations, their scores and calls (imports and synthetic history)."""
    if calls:
        conn.execute(insert(llm_calls), calls)
    if evals:
        conn.execute(insert(evaluations), evals)
    if score_rows:
        conn.execute(insert(scores), score_rows)


def cached_replies_query(hashes: set[str]) -> Any:
    """Successful calls with these request hashes, oldest first (served by
    the index on request_hash and status)."""
    return (
        select(llm_calls.c.request_hash, llm_calls.c.response_text, llm_calls.c.input_tokens,
               llm_calls.c.output_tokens, llm_calls.c.created_at)
        .where(llm_calls.c.request_hash.in_(sorted(hashes)), llm_calls.c.status == "ok",
               llm_calls.c.response_text.is_not(None))
        .order_by(llm_calls.c.created_at)
    )


#: The latest successful answer to one request hash, built once: executing it compiles nothing
#: (from the statement cache) and expands no IN list, a third of what a batch query costs for one.
CACHED_REPLY = (
    select(llm_calls.c.response_text, llm_calls.c.input_tokens, llm_calls.c.output_tokens)
    .where(llm_calls.c.request_hash == bindparam("request_hash"), llm_calls.c.status == "ok",
           llm_calls.c.response_text.is_not(None))
    .order_by(llm_calls.c.created_at.desc())
    .limit(1)
)


def cached_reply(conn: Connection, request_hash: str) -> dict[str, CachedReply]:
    """The latest successful answer to one request hash, keyed as :func:`cached_replies` keys them."""
    row = conn.execute(CACHED_REPLY, {"request_hash": request_hash}).first()
    return {} if row is None else {request_hash: _cached(row)}


def _cached(row: Any) -> CachedReply:
    return CachedReply(text=row.response_text, input_tokens=row.input_tokens, output_tokens=row.output_tokens)


def cached_replies(conn: Connection, hashes: set[str]) -> dict[str, CachedReply]:
    """The latest successful answer per request hash (the call cache)."""
    rows = conn.execute(cached_replies_query(hashes)).all()
    # ordered oldest first, so the latest answer for a hash wins
    return {r.request_hash: _cached(r) for r in rows}


FAILED_CALLS = "failed"  # a filter, not a stored status: every call whose status is not ok


@functools.cache
def call_statuses() -> tuple[str, ...]:
    """The statuses a call is stored with: the values of ``CallRecord.status``'s Literal."""
    return tuple(get_args(get_type_hints(CallRecord)["status"]))


def call_status_filters() -> tuple[str, ...]:
    """What a filter on a call's status accepts: each stored status, and ``failed`` (any failure)."""
    return (*call_statuses(), FAILED_CALLS)


def unknown_call_status(status: str) -> str | None:
    """Why ``status`` is not a call status filter (the closest one, and every one), or None when it is one."""
    accepted = call_status_filters()
    if status in accepted:
        return None
    close = difflib.get_close_matches(status, accepted, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return (f"{status!r} is not a call status{hint}; use one of: {', '.join(accepted)} "
            f"({FAILED_CALLS}: every call that failed, whatever the failure)")


def call_status_is(status: str) -> ColumnElement[bool]:
    """The condition on ``llm_calls.status`` of a status filter (``failed``: any status but ok)."""
    if status == FAILED_CALLS:
        return llm_calls.c.status != "ok"
    return llm_calls.c.status == status


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
        stmt = stmt.where(call_status_is(status))
    if trace_id:
        stmt = stmt.where(llm_calls.c.trace_id == trace_id)
    if model:
        stmt = stmt.where(llm_calls.c.model == model)
    if limit is not None:
        stmt = stmt.limit(limit)
    return [dict(r._mapping) for r in conn.execute(stmt)]


def models_by_response(conn: Connection, texts: Iterable[str]) -> dict[str, str]:
    """The model of the newest successful call whose reply is exactly each text (the model that
    wrote an answer, when it was generated through jurist); asked 100 texts at a time."""
    wanted, found = sorted(set(texts)), dict[str, str]()
    for start in range(0, len(wanted), 100):
        chunk = wanted[start:start + 100]
        stmt = (select(llm_calls.c.response_text, llm_calls.c.model)
                .where(llm_calls.c.response_text.in_(chunk), llm_calls.c.status == "ok")
                .order_by(llm_calls.c.created_at))
        found.update({r.response_text: r.model for r in conn.execute(stmt)})  # oldest first: the newest wins
    return found


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


def existing_evaluation_ids(conn: Connection, ids: Iterable[str]) -> set[str]:
    """Which of ``ids`` are evaluations in the store (asked 500 at a time)."""
    wanted, found = sorted(set(ids)), set[str]()
    for start in range(0, len(wanted), 500):
        chunk = wanted[start:start + 500]
        found.update(conn.execute(select(evaluations.c.id).where(evaluations.c.id.in_(chunk))).scalars())
    return found


def scores_of(conn: Connection, evaluation_id: str) -> list[dict[str, Any]]:
    stmt = select(scores).where(scores.c.evaluation_id == evaluation_id).order_by(scores.c.id)
    return [dict(r._mapping) for r in conn.execute(stmt)]


def get_evaluation(conn: Connection, evaluation_id: str, kind: str | None = None) -> dict[str, Any] | None:
    stmt = select(evaluations).where(evaluations.c.id == evaluation_id)
    if kind:
        stmt = stmt.where(evaluations.c.kind == kind)
    row = conn.execute(stmt).first()
    return dict(row._mapping) if row is not None else None


# -- continuous checklist -------------------------------------------------------


def insert_checklist_session(conn: Connection, session: ChecklistSessionRow, points: list[ChecklistPointRow]) -> None:
    conn.execute(insert(checklist_sessions), [session.model_dump()])
    if points:
        conn.execute(insert(checklist_points), [p.model_dump() for p in points])


def insert_checklist_message(conn: Connection, message: ChecklistMessageRow) -> None:
    conn.execute(insert(checklist_messages), [message.model_dump()])
    conn.execute(
        update(checklist_sessions)
        .where(checklist_sessions.c.id == message.session_id)
        .values(updated_at=message.created_at)
    )


def record_checklist_evaluation(
    conn: Connection, evaluation: ChecklistEvaluationRow, recalled: dict[str, float], at: datetime,
    summary: EvaluationRow | Mapping[str, Any] | None = None,
) -> None:
    """One evaluation row and the points it recalled (and its ``evaluations`` row, written at ``at``),
    in the caller's transaction."""
    conn.execute(insert(checklist_evaluations), [evaluation.model_dump()])
    if summary is not None:
        conn.execute(insert(evaluations), [{"created_at": at, **evaluation_values(summary)}])
    for point_id, confidence in recalled.items():
        conn.execute(
            update(checklist_points)
            .where(checklist_points.c.session_id == evaluation.session_id,
                   checklist_points.c.point_id == point_id, checklist_points.c.status == "pending")
            .values(status="recalled", confidence=confidence, message_seq=evaluation.message_seq, recalled_at=at)
        )


def set_checklist_status(conn: Connection, session_id: str, status: str, at: datetime) -> None:
    conn.execute(
        update(checklist_sessions)
        .where(checklist_sessions.c.id == session_id)
        .values(status=status, updated_at=at, completed_at=at if status != "active" else None)
    )


def get_checklist_session(conn: Connection, session_id: str) -> ChecklistSessionRow | None:
    row = conn.execute(select(checklist_sessions).where(checklist_sessions.c.id == session_id)).first()
    return ChecklistSessionRow.of(row._mapping) if row is not None else None


def list_checklist_sessions(
    conn: Connection, *, learner: str | None = None, status: str | None = None, limit: int | None = 50
) -> list[ChecklistSessionRow]:
    stmt = select(checklist_sessions).order_by(checklist_sessions.c.updated_at.desc())
    if learner is not None:
        stmt = stmt.where(checklist_sessions.c.learner == learner)
    if status is not None:
        stmt = stmt.where(checklist_sessions.c.status == status)
    if limit is not None:
        stmt = stmt.limit(limit)
    return [ChecklistSessionRow.of(r._mapping) for r in conn.execute(stmt)]


def checklist_point_states(conn: Connection, session_id: str) -> list[ChecklistPointRow]:
    stmt = select(checklist_points).where(checklist_points.c.session_id == session_id).order_by(
        checklist_points.c.position)
    return [ChecklistPointRow.of(r._mapping) for r in conn.execute(stmt)]


def list_checklist_messages(conn: Connection, session_id: str) -> list[ChecklistMessageRow]:
    stmt = select(checklist_messages).where(checklist_messages.c.session_id == session_id).order_by(
        checklist_messages.c.seq)
    return [ChecklistMessageRow.of(r._mapping) for r in conn.execute(stmt)]


def list_checklist_evaluations(conn: Connection, session_id: str) -> list[ChecklistEvaluationRow]:
    stmt = select(checklist_evaluations).where(checklist_evaluations.c.session_id == session_id).order_by(
        checklist_evaluations.c.message_seq, checklist_evaluations.c.created_at)
    return [ChecklistEvaluationRow.of(r._mapping) for r in conn.execute(stmt)]


def get_fsrs_card(conn: Connection, learner: str, deck: str, point_id: str) -> FsrsCardRow | None:
    stmt = select(fsrs_cards).where(fsrs_cards.c.learner == learner, fsrs_cards.c.deck == deck,
                                    fsrs_cards.c.point_id == point_id)
    row = conn.execute(stmt).first()
    return FsrsCardRow.of(row._mapping) if row is not None else None


def upsert_fsrs_card(conn: Connection, card: FsrsCardRow) -> None:
    if get_fsrs_card(conn, card.learner, card.deck, card.point_id) is None:
        conn.execute(insert(fsrs_cards), [card.model_dump()])
        return
    conn.execute(
        update(fsrs_cards)
        .where(fsrs_cards.c.learner == card.learner, fsrs_cards.c.deck == card.deck,
               fsrs_cards.c.point_id == card.point_id)
        .values(**card.model_dump(exclude={"learner", "deck", "point_id"}))
    )


def list_fsrs_cards(
    conn: Connection, learner: str, *, due_before: datetime | None = None, deck: str | None = None
) -> list[FsrsCardRow]:
    stmt = select(fsrs_cards).where(fsrs_cards.c.learner == learner).order_by(fsrs_cards.c.due,
                                                                               fsrs_cards.c.point_id)
    if due_before is not None:
        stmt = stmt.where(fsrs_cards.c.due <= due_before)
    if deck is not None:
        stmt = stmt.where(fsrs_cards.c.deck == deck)
    return [FsrsCardRow.of(r._mapping) for r in conn.execute(stmt)]


def conflict_insert(dialect: str) -> Callable[[Table], PostgresInsert | SqliteInsert] | None:
    """The ``insert`` of ``dialect`` that takes ``ON CONFLICT`` (SQLite's, PostgreSQL's); None for
    another database (jurist ships SQLite and PostgreSQL drivers only)."""
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as postgres_insert

        return postgres_insert
    if dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        return sqlite_insert
    return None  # pragma: no cover


def insert_evaluations_once(conn: Connection, items: list[tuple[dict[str, Any], list[dict[str, Any]]]]) -> int:
    """Insert evaluations (each with its score rows) whose id is not in the table yet.

    The ids are derived from what was evaluated, so a retried or resumed batch
    writing the same evaluation again writes nothing. The evaluation insert
    comes first (``ON CONFLICT DO NOTHING ... RETURNING``), so two processes
    racing on one id still leave one row and one set of scores. Returns how
    many evaluations were new.
    """
    dialect_insert = conflict_insert(conn.dialect.name)
    new_ids: set[str] = set()
    if dialect_insert is not None:
        # One compiled statement, executed for many rows at once; RETURNING names the rows that were new.
        stmt = dialect_insert(evaluations).on_conflict_do_nothing(
            index_elements=[evaluations.c.id]).returning(evaluations.c.id)
        by_columns: dict[frozenset[str], list[dict[str, Any]]] = {}
        for evaluation, _ in items:
            by_columns.setdefault(frozenset(evaluation), []).append(evaluation)
        for rows in by_columns.values():
            new_ids.update(r[0] for r in conn.execute(stmt, rows))
    else:
        for evaluation, _ in items:
            if conn.execute(select(evaluations.c.id).where(evaluations.c.id == evaluation["id"])).first() is None:
                conn.execute(insert(evaluations), [evaluation])
                new_ids.add(evaluation["id"])
    new_scores: list[dict[str, Any]] = []
    written: set[str] = set()
    for evaluation, score_rows in items:  # the same id twice in one batch: the first one's scores
        if evaluation["id"] in new_ids and evaluation["id"] not in written:
            written.add(evaluation["id"])
            new_scores.extend(score_rows)
    if new_scores:
        conn.execute(insert(scores), new_scores)
    return len(written)
