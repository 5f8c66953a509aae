"""Checklist files: ``{"title": ..., "points": [{"id": ..., "text": ...}]}``.

:func:`load_checklist` validates a file and names the file and the field of
every problem (``caffeine.json: points[2].id: ...``). Unknown fields are errors that
name the closest known one and, where the key is written once, its line
(``caffeine.json:4: points[1]: unknown field 'txt' (did you mean 'text'?)``).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from jurist.errors import InputError
from jurist.jsonfiles import key_line, parse_json, read_text, validation_problems


class ChecklistPoint(BaseModel):
    """One thing the learner should recall."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, max_length=200)
    text: str = Field(min_length=1)

    @field_validator("id", "text")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be blank")
        return v.strip()


class Checklist(BaseModel):
    """A titled list of points; ids are unique."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    title: str = Field(min_length=1, max_length=300)
    points: list[ChecklistPoint] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_ids(self) -> "Checklist":
        seen: set[str] = set()
        for i, p in enumerate(self.points):
            if p.id in seen:
                raise ValueError(f"points[{i}].id: {p.id!r} is used twice; ids must be unique")
            seen.add(p.id)
        return self

    def point(self, point_id: str) -> ChecklistPoint:
        for p in self.points:
            if p.id == point_id:
                return p
        raise KeyError(point_id)


def parse_checklist(data: object, source: str = "checklist", *, text: str | None = None) -> Checklist:
    """Validate already-loaded JSON data; InputError names ``source`` and the field (``text``: the
    file's text, where an unknown field's line is looked up)."""
    try:
        return Checklist.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        unknown = next((e for e in errors if e["type"] == "extra_forbidden" and e["loc"]), None)
        line = key_line(text, str(unknown["loc"][-1])) if text is not None and unknown is not None else None
        raise InputError(
            "; ".join(validation_problems(exc, Checklist))
            + ' (expected {"title": "...", "points": [{"id": "...", "text": "..."}]})',
            file=source, line=line,
        ) from None


def load_checklist(path: str | Path) -> Checklist:
    """Read and validate a checklist file."""
    p = Path(path)
    text = read_text(p, "checklist")
    return parse_checklist(parse_json(text, str(p)), str(p), text=text)


class ChecklistMessage(BaseModel):
    """One visible message of a tutoring session (``user`` or ``assistant``)."""

    model_config = ConfigDict(frozen=True)

    role: str
    content: str
    seq: int = 0
    id: str | None = None
