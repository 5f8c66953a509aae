"""Typed rows read from the database.

A query that returns rows returns them as a :class:`StoredRow` model (frozen
pydantic, one per query's columns): the database is an edge, so what is read
is validated, and its readers use attributes instead of ``dict`` keys. A row's
``model_dump()`` is the dict of its columns, so a route that returns one sends
the same JSON a dict of the row would.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Mapping, TypeVar

from pydantic import BaseModel, ConfigDict, JsonValue
from sqlalchemy.engine import RowMapping

R = TypeVar("R", bound="StoredRow")


class StoredRow(BaseModel):
    """A row read from the database: frozen, every column named (an unknown column is an error)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    @classmethod
    def of(cls: type[R], columns: RowMapping | Mapping[str, Any], **more: Any) -> R:
        """The model of a result row's columns (``row._mapping``), with ``more`` fields."""
        return cls.model_validate({**columns, **more})


class StoredScore(StoredRow):
    """One ``scores`` row: an item's score of an evaluation (a rubric's, a dimension's, an attempt's)."""

    id: int
    evaluation_id: str
    key: str
    name: str | None
    score: float | None
    max_score: float | None
    weight: float | None
    status: str  # scored | evaluation_failed | skipped
    reason: str | None
    judge_model: str | None
    template_hash: str | None
    input_tokens: int
    output_tokens: int
    latency_ms: float
    call_id: str | None


class StoredEvaluation(StoredRow):
    """One ``evaluations`` row: every column, the payload as the JSON stored."""

    id: str
    kind: str
    subject_id: str
    trace_id: str | None
    status: str  # scored | partial | failed | skipped
    score: float | None
    max_score: float | None
    percentage: float | None
    judge_model: str | None
    rubrics_version: str | None
    source: str | None
    payload: JsonValue
    created_at: datetime
    passed: bool | None
    escalated: bool
    iterations: int
    failure: str | None
    max_attempts_hit: bool
