"""Queries of stored calibrations (the ``calibrations`` table): a judge's agreement with
human labels, per judge model, template and rubric or dimension."""

from __future__ import annotations

from datetime import datetime
from typing import Iterable, NamedTuple, Sequence

from pydantic import JsonValue
from sqlalchemy import insert, select
from sqlalchemy.engine import Connection

from jurist.store.stored import StoredRow
from jurist.store.tables import calibrations

MAX_CALIBRATIONS_READ = 500


class JudgeKey(NamedTuple):
    """What a calibration holds for: a judge model, a template (by hash), a rubric or dimension
    and, where the judge is shown more of it than its name, the hash of that."""

    judge_model: str
    template_hash: str
    rubric: str
    rubric_hash: str | None


class StoredCalibration(StoredRow):
    """One ``calibrations`` row: a judge's agreement with human labels on a rubric or dimension."""

    id: str
    kind: str  # rubric | gate | panel
    judge_model: str
    template_name: str
    template_hash: str
    rubric: str
    rubric_hash: str | None
    scale: str  # "1-5" | "pass/fail"
    items: int
    n: int
    kappa: float | None
    kappa_low: float | None
    kappa_high: float | None
    agreement: float | None
    agreement_low: float | None
    agreement_high: float | None
    pass_at: float | None
    threshold: float | None
    threshold_fit: str | None
    threshold_agreement: float | None
    threshold_agreement_low: float | None
    threshold_agreement_high: float | None
    labels: str
    figures: dict[str, JsonValue]  # every figure of the report, with its interval
    created_at: datetime


def save_calibrations(conn: Connection, rows: Sequence[StoredCalibration]) -> None:
    """Insert calibrations (each a full row, ``id`` and ``created_at`` included)."""
    if rows:
        conn.execute(insert(calibrations), [r.model_dump() for r in rows])


def latest_calibrations(conn: Connection, keys: Iterable[JudgeKey]) -> dict[JudgeKey, StoredCalibration]:
    """The newest calibration of each key that has one (the rubric hash must match, or be
    absent on both sides)."""
    out: dict[JudgeKey, StoredCalibration] = {}
    for key in dict.fromkeys(keys):
        found = calibrations_of(conn, key, limit=1)
        if found:
            out[key] = found[0]
    return out


def calibrations_of(conn: Connection, key: JudgeKey, *, limit: int = MAX_CALIBRATIONS_READ) -> list[StoredCalibration]:
    """The calibrations of one key, newest first (at most ``limit``; the rubric hash must match, or
    be absent on both sides)."""
    c = calibrations.c
    stmt = (select(calibrations)
            .where(c.judge_model == key.judge_model, c.template_hash == key.template_hash, c.rubric == key.rubric,
                   c.rubric_hash.is_(None) if key.rubric_hash is None else c.rubric_hash == key.rubric_hash)
            .order_by(c.created_at.desc(), c.id.desc()).limit(limit))
    return [StoredCalibration.of(r._mapping) for r in conn.execute(stmt)]


def list_calibrations(conn: Connection, *, limit: int = MAX_CALIBRATIONS_READ) -> list[StoredCalibration]:
    """Stored calibrations, newest first (at most ``limit``)."""
    c = calibrations.c
    stmt = select(calibrations).order_by(c.created_at.desc(), c.id.desc()).limit(limit)
    return [StoredCalibration.of(r._mapping) for r in conn.execute(stmt)]
