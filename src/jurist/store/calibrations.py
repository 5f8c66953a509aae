"""Queries of stored calibrations (the ``calibrations`` table): a judge's agreement with
human labels, per judge model, template and rubric or dimension."""

from __future__ import annotations

from typing import Any, Iterable, NamedTuple

from sqlalchemy import insert, select
from sqlalchemy.engine import Connection

from jurist.store.tables import calibrations

MAX_CALIBRATIONS_READ = 500


class JudgeKey(NamedTuple):
    """What a calibration holds for: a judge model, a template (by hash), a rubric or dimension
    and, where the judge is shown more of it than its name, the hash of that."""

    judge_model: str
    template_hash: str
    rubric: str
    rubric_hash: str | None


def save_calibrations(conn: Connection, rows: list[dict[str, Any]]) -> None:
    """Insert calibrations (each a full row, ``id`` and ``created_at`` included)."""
    if rows:
        conn.execute(insert(calibrations), rows)


def latest_calibrations(conn: Connection, keys: Iterable[JudgeKey]) -> dict[JudgeKey, dict[str, Any]]:
    """The newest calibration of each key that has one (the rubric hash must match, or be
    absent on both sides)."""
    c = calibrations.c
    out: dict[JudgeKey, dict[str, Any]] = {}
    for key in dict.fromkeys(keys):
        stmt = (select(calibrations)
                .where(c.judge_model == key.judge_model, c.template_hash == key.template_hash,
                       c.rubric == key.rubric,
                       c.rubric_hash.is_(None) if key.rubric_hash is None else c.rubric_hash == key.rubric_hash)
                .order_by(c.created_at.desc(), c.id.desc()).limit(1))
        row = conn.execute(stmt).first()
        if row is not None:
            out[key] = dict(row._mapping)
    return out


def list_calibrations(conn: Connection, *, limit: int = MAX_CALIBRATIONS_READ) -> list[dict[str, Any]]:
    """Stored calibrations, newest first (at most ``limit``)."""
    c = calibrations.c
    stmt = select(calibrations).order_by(c.created_at.desc(), c.id.desc()).limit(limit)
    return [dict(r._mapping) for r in conn.execute(stmt)]
