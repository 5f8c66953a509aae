"""Human labels: what people said about the items a judge scores.

A labels file is JSONL, one label per line::

    {"item": "s1", "rubric": "mechanism", "label": 4, "annotator": "ana", "note": "misses the half-life"}

``item`` names what was judged (a session id for rubric scores), ``rubric`` the
rubric or dimension, ``label`` a score on the rubric's scale or ``true``/``false``
(pass/fail), ``annotator`` who gave it; ``note`` is optional. Several annotators
may label one item; one annotator labels an item and rubric once. Blank lines
and lines starting with ``#`` are skipped. Every problem names the file and line.
"""

from __future__ import annotations

import math
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError, field_validator

from jurist.errors import InputError
from jurist.jsonfiles import jsonl_objects, line_problem

MAX_LABELS_BYTES = 20_000_000
MAX_LINE_CHARS = 20_000
_ID = r"^[A-Za-z0-9_.:@/-]{1,300}$"


class Label(BaseModel):
    """One person's verdict on one item for one rubric."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    item: str = Field(pattern=_ID)
    rubric: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,200}$")
    label: StrictBool | float  # a score on the rubric's scale, or pass (true) / fail (false)
    annotator: str = Field(min_length=1, max_length=200)
    note: str | None = Field(default=None, max_length=5000)

    @field_validator("label", mode="before")
    @classmethod
    def _finite(cls, value: object) -> object:
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"a label is a score (a finite number) or true / false, not {value}")
        return value

    @property
    def is_pass_fail(self) -> bool:
        return isinstance(self.label, bool)


class LabelSet(BaseModel):
    """The labels of a file, each with the line it came from (for messages)."""

    labels: list[Label]
    lines: list[int]
    source: str

    def where(self, index: int) -> tuple[str, int]:
        return self.source, self.lines[index]


def parse_labels(lines: list[str], source: str) -> LabelSet:
    """Parse label lines; a bad line is an :class:`InputError` with its number."""
    labels: list[Label] = []
    numbers: list[int] = []
    seen: dict[tuple[str, str, str], int] = {}
    for n, obj in jsonl_objects(lines, source, comments=True, max_line=MAX_LINE_CHARS):
        try:
            label = Label.model_validate(obj)
        except ValidationError as exc:
            raise InputError(line_problem(exc, Label, "label"), file=source,
                             line=n) from None
        key = (label.item, label.rubric, label.annotator)
        if key in seen:
            raise InputError(f"{label.annotator!r} already labelled item {label.item!r} for rubric "
                             f"{label.rubric!r} on line {seen[key]}", file=source, line=n)
        seen[key] = n
        labels.append(label)
        numbers.append(n)
    if not labels:
        raise InputError("the file holds no labels", file=source)
    return LabelSet(labels=labels, lines=numbers, source=source)


def load_labels(path: str | Path) -> LabelSet:
    """Load and validate a labels file (at most 20 MB, lines of at most 20,000 characters)."""
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_LABELS_BYTES:
            raise InputError(f"the file is larger than {MAX_LABELS_BYTES:,} bytes", file=str(p))
        with p.open(encoding="utf-8") as fh:
            return parse_labels(fh.readlines(), str(p))
    except OSError as exc:
        raise InputError(f"cannot read labels: {exc.strerror}", file=str(p)) from None
    except UnicodeDecodeError:
        raise InputError("the file is not UTF-8 text", file=str(p)) from None
