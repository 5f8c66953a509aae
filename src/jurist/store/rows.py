"""Typed input of the ``evaluations`` table.

Every capability stores its evaluations as an :class:`EvaluationRow`: the
columns the explorer filters and aggregates on, and the payload, a pydantic
model with ``kind`` and ``version`` (``RubricResult``, ``GateRecord``, the
research ``EvaluationRecord``, ``ChecklistTurn``). :func:`evaluation_values`
is the one place that turns a row (or a plain dict of columns, as imports
and synthetic histories write them) into the values inserted.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, Mapping, Protocol, TypedDict, runtime_checkable

# A value of a ``scores`` row column (the store's score rows are plain dicts of these).
ColumnValue = str | float | int | bool | None
# A score row as written: its columns' values by name.
ScoreValues = dict[str, ColumnValue]
# An evaluation's column values as inserted: plain columns, ``created_at``, the payload's JSON.
EvaluationValues = dict[str, ColumnValue | datetime | Mapping[str, object]]


@runtime_checkable
class StoredPayload(Protocol):
    """What the store needs of a payload model."""

    @property
    def kind(self) -> str: ...

    @property
    def version(self) -> str: ...

    def to_json(self) -> Mapping[str, object]:
        """The payload as JSON data, as it is stored and returned over HTTP."""
        ...


@dataclass
class EvaluationRow:
    """One ``evaluations`` row; ``kind`` is the payload's."""

    id: str
    subject_id: str
    status: str  # scored | partial | failed | skipped
    payload: StoredPayload
    trace_id: str | None = None
    score: float | None = None
    max_score: float | None = None
    percentage: float | None = None
    judge_model: str | None = None
    rubrics_version: str | None = None
    source: str | None = None
    passed: bool | None = None
    escalated: bool = False
    iterations: int = 1
    failure: str | None = None
    max_attempts_hit: bool = False  # the loop used all its attempts (more than one) and the last failed
    created_at: datetime | None = None

    @property
    def kind(self) -> str:
        return self.payload.kind


class Facets(TypedDict, total=False):
    """The dashboard's columns of an evaluation row that a capability derives from its result."""

    passed: bool | None
    failure: str | None
    escalated: bool
    iterations: int
    max_attempts_hit: bool


_COLUMNS = tuple(f.name for f in fields(EvaluationRow))
# What a plain dict of columns may leave out.
_DEFAULTS: dict[str, ColumnValue] = {
    f.name: f.default for f in fields(EvaluationRow)
    if f.name not in ("id", "subject_id", "status", "payload", "created_at")
    and isinstance(f.default, str | float | int | bool | None)}


def evaluation_values(row: EvaluationRow | Mapping[str, Any]) -> EvaluationValues:
    """The column values of an evaluation: every column present (rows written in one
    batch must carry the same keys), the payload as JSON data, ``created_at`` left
    out when not set (the store fills it)."""
    values: EvaluationValues
    if isinstance(row, EvaluationRow):
        values = {name: getattr(row, name) for name in _COLUMNS}
        values["kind"] = row.kind
    else:
        values = {**_DEFAULTS, **row}
    payload = values["payload"]
    if isinstance(payload, StoredPayload):
        values["payload"] = payload.to_json()
        values.setdefault("kind", payload.kind)
    if values.get("created_at") is None:
        values.pop("created_at", None)
    return values

