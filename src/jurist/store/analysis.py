"""Queries for the offline analysis and the prompt lab: prompt versions, analysis
runs, patterns and the evaluation and score rows the statistics read.

Plain functions taking a Connection, like :mod:`jurist.store.queries`; the
``Store`` runs them off the event loop (``aread`` / ``awrite``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import func, insert, select, update
from sqlalchemy.engine import Connection

from jurist.store.tables import (
    analysis_runs,
    evaluations,
    llm_calls,
    pattern_evaluations,
    patterns,
    prompts,
    scores,
)

# IN lists are sent in chunks: SQLite and PostgreSQL both cap bound parameters.
_CHUNK = 500


def _chunks(values: Sequence[Any]) -> Iterable[Sequence[Any]]:
    for i in range(0, len(values), _CHUNK):
        yield values[i : i + _CHUNK]


# -- prompts -----------------------------------------------------------------------


def list_prompt_versions(conn: Connection, name: str | None = None) -> list[dict[str, Any]]:
    """Stored prompt versions (without their text), by name then version."""
    stmt = select(prompts.c.name, prompts.c.version, prompts.c.hash, prompts.c.note, prompts.c.created_at).order_by(
        prompts.c.name, prompts.c.version
    )
    if name is not None:
        stmt = stmt.where(prompts.c.name == name)
    return [dict(r._mapping) for r in conn.execute(stmt)]


def get_prompt_version(conn: Connection, name: str, version: int) -> dict[str, Any] | None:
    stmt = select(prompts.c.name, prompts.c.version, prompts.c.text, prompts.c.hash, prompts.c.note,
                  prompts.c.created_at).where(prompts.c.name == name, prompts.c.version == version)
    row = conn.execute(stmt).first()
    return dict(row._mapping) if row is not None else None


def latest_prompt_version(conn: Connection, name: str) -> int | None:
    return conn.execute(select(func.max(prompts.c.version)).where(prompts.c.name == name)).scalar()


def insert_prompt_version(conn: Connection, row: dict[str, Any]) -> None:
    conn.execute(insert(prompts), [row])


def prompt_hash_labels(conn: Connection) -> dict[str, tuple[str, int]]:
    """Every stored hash -> (prompt name, version)."""
    stmt = select(prompts.c.hash, prompts.c.name, prompts.c.version).order_by(prompts.c.version)
    return {r.hash: (r.name, r.version) for r in conn.execute(stmt)}


# -- what the statistics read ------------------------------------------------------


def evaluations_for_analysis(
    conn: Connection,
    *,
    kind: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int = 20000,
) -> list[dict[str, Any]]:
    """Scored evaluations (newest first, at most ``limit``): the columns the analysis needs, no payloads."""
    e = evaluations.c
    stmt = (
        select(e.id, e.kind, e.subject_id, e.trace_id, e.percentage, e.judge_model, e.failure, e.source,
               e.created_at)
        .where(e.percentage.is_not(None))
        .order_by(e.created_at.desc(), e.id)
        .limit(limit)
    )
    if kind:
        stmt = stmt.where(e.kind == kind)
    if since is not None:
        stmt = stmt.where(e.created_at >= since)
    if until is not None:
        stmt = stmt.where(e.created_at < until)
    return [dict(r._mapping) for r in conn.execute(stmt)]


def payloads_of(conn: Connection, evaluation_ids: Sequence[str]) -> dict[str, Any]:
    """evaluation id -> payload, for the few kinds whose text lives there."""
    out: dict[str, Any] = {}
    for part in _chunks(list(evaluation_ids)):
        for r in conn.execute(select(evaluations.c.id, evaluations.c.payload).where(evaluations.c.id.in_(part))):
            out[r.id] = r.payload
    return out


def transcripts_of(conn: Connection, evaluation_ids: Sequence[str]) -> dict[str, Any]:
    """evaluation id -> the ``transcript`` its payload keeps (rubric evaluations), reading only
    that part of the payload; evaluations without one are left out."""
    out: dict[str, Any] = {}
    transcript = evaluations.c.payload["transcript"]
    for part in _chunks(list(evaluation_ids)):
        for r in conn.execute(select(evaluations.c.id, transcript.label("transcript"))
                              .where(evaluations.c.id.in_(part))):
            if r.transcript is not None:
                out[r.id] = r.transcript
    return out


def generation_messages(conn: Connection, trace_ids: Sequence[str]) -> dict[str, Any]:
    """trace id -> the messages of its first generation call (the gate's input)."""
    out: dict[str, Any] = {}
    for part in _chunks(list(trace_ids)):
        stmt = (
            select(llm_calls.c.trace_id, llm_calls.c.messages)
            .where(llm_calls.c.trace_id.in_(part), llm_calls.c.purpose == "generation")
            .order_by(llm_calls.c.created_at)
        )
        for r in conn.execute(stmt):
            out.setdefault(r.trace_id, r.messages)
    return out


def score_rows_of(conn: Connection, evaluation_ids: Sequence[str]) -> list[dict[str, Any]]:
    """The scored per-item rows of these evaluations: key, score, scale and template hash."""
    s = scores.c
    out: list[dict[str, Any]] = []
    for part in _chunks(list(evaluation_ids)):
        stmt = select(s.evaluation_id, s.key, s.score, s.max_score, s.template_hash).where(
            s.evaluation_id.in_(part), s.status == "scored", s.score.is_not(None)
        )
        out.extend(dict(r._mapping) for r in conn.execute(stmt))
    return out


def scores_for_hashes(
    conn: Connection, hashes: Sequence[str], *, key: str | None = None, limit: int = 20000
) -> list[dict[str, Any]]:
    """Scored rows judged with any of ``hashes``, newest first, with their subject and judge model
    (the score's, else its evaluation's)."""
    s, e = scores.c, evaluations.c
    stmt = (
        select(s.template_hash, s.key, s.score, s.max_score, e.subject_id, e.created_at,
               func.coalesce(s.judge_model, e.judge_model).label("judge_model"))
        .select_from(scores.join(evaluations, evaluations.c.id == scores.c.evaluation_id))
        .where(s.template_hash.in_(list(hashes)), s.status == "scored", s.score.is_not(None))
        .order_by(e.created_at.desc(), s.id.desc())
        .limit(limit)
    )
    if key:
        stmt = stmt.where(s.key == key)
    return [dict(r._mapping) for r in conn.execute(stmt)]


# -- analysis runs and patterns ----------------------------------------------------


def insert_run(conn: Connection, row: dict[str, Any]) -> None:
    conn.execute(insert(analysis_runs), [row])


def finish_run(conn: Connection, run_id: str, values: dict[str, Any]) -> None:
    conn.execute(update(analysis_runs).where(analysis_runs.c.id == run_id).values(**values))


def insert_patterns(conn: Connection, rows: list[dict[str, Any]], links: list[dict[str, Any]]) -> None:
    """Patterns and their (pattern_id, evaluation_id) links, in the caller's transaction."""
    if rows:
        conn.execute(insert(patterns), rows)
    for start in range(0, len(links), 5000):
        conn.execute(insert(pattern_evaluations), links[start : start + 5000])


def get_run(conn: Connection, run_id: str | None = None) -> dict[str, Any] | None:
    """One run by id, or the newest finished (done) run."""
    stmt = select(analysis_runs)
    if run_id is not None:  # not the prompt lab's routes, which this table also keeps (store/prompt_routes.py)
        stmt = stmt.where(analysis_runs.c.id == run_id, analysis_runs.c.status.in_(("running", "done", "failed")))
    else:
        stmt = stmt.where(analysis_runs.c.status == "done").order_by(analysis_runs.c.created_at.desc()).limit(1)
    row = conn.execute(stmt).first()
    return dict(row._mapping) if row is not None else None


def patterns_of_run(conn: Connection, run_id: str, links_per_pattern: int = 100) -> list[dict[str, Any]]:
    """The run's patterns, highest impact first, each with up to ``links_per_pattern`` evaluation ids."""
    impact_order = {"high": 0, "medium": 1, "low": 2}
    rows = [dict(r._mapping) for r in conn.execute(select(patterns).where(patterns.c.run_id == run_id))]
    rows.sort(key=lambda p: (impact_order.get(p["impact"], 3), p["p_value"] if p["p_value"] is not None else 1.0,
                             p["id"]))
    for p in rows:
        stmt = (
            select(pattern_evaluations.c.evaluation_id)
            .where(pattern_evaluations.c.pattern_id == p["id"])
            .order_by(pattern_evaluations.c.evaluation_id)
            .limit(links_per_pattern)
        )
        p["evaluation_ids"] = [r.evaluation_id for r in conn.execute(stmt)]
    return rows
