"""Rubric files: loading and validation.

A rubrics file is ``{"version": "1.0", "scale": [1, 5], "rubrics": [...]}`` or
a bare list of rubrics. A rubric is free-form (``scoring_criteria`` as text, or
a mapping from score level to its description) or item-based (``items``: each
``{"id", "text", "points"}``, negative points for what must not happen), or a check
that needs no model (``check``: :mod:`jurist.rubrics.checks`, compiled when the file is
loaded). The text ``{expected}`` in a rubric's description, criteria or items stands for
the session's expected answer(s) (:mod:`jurist.rubrics.judging`).

Every number (weights, points, scale bounds, score levels) is finite and
between 1e-12 and 1e12 in size (or 0, where 0 makes sense), so every total,
ratio and percentage computed from them is a finite number too; ids and names
must fit the store (:mod:`jurist.rubrics.naming`). Unknown fields are errors that
name the closest known one (``rubric 'safety': unknown field 'weigth' (did you mean
'weight'?)``); ``metadata`` (on the file and on a rubric) is free, for the user's own
data, and never read. ``true`` and ``false`` are not numbers.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from pydantic import (BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, ValidationInfo, field_validator,
                      model_validator)

from jurist.errors import InputError
from jurist.jsonfiles import Number, error_problem, first_error, key_line, parse_json, read_text
from jurist.judges.calibration import CalibrationRequirement
from jurist.rubrics.checks import EXPECTED, Check, parse_check
from jurist.rubrics.naming import id_problem, name_problem, shorten
from jurist.store.tables import RUBRICS_VERSION_LENGTH, SCORE_KEY_LENGTH, SCORE_NAME_LENGTH

DEFAULT_SCALE = (1.0, 5.0)
NUMBER_LIMIT = 1e12  # the largest size of a number in a rubrics file; 1 / NUMBER_LIMIT the smallest but 0


def in_range(x: float) -> bool:
    """A finite number, 0 or between 1 / NUMBER_LIMIT and NUMBER_LIMIT in size."""
    return math.isfinite(x) and (x == 0 or 1 / NUMBER_LIMIT <= abs(x) <= NUMBER_LIMIT)


def _check_scale(scale: tuple[float, float] | None) -> tuple[float, float] | None:
    if scale is not None and not all(in_range(x) for x in scale):
        raise ValueError(f"scale bounds must be finite numbers, 0 or from {1 / NUMBER_LIMIT:g} to "
                         f"{NUMBER_LIMIT:g} in size")
    return scale


class RubricItem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    text: str = Field(min_length=1)
    points: Number

    @field_validator("points")
    @classmethod
    def _nonzero(cls, v: float) -> float:
        if v == 0:
            raise ValueError("points must not be 0 (positive for what should happen, negative for what must not)")
        if not in_range(v):
            raise ValueError(f"points must be a finite number from {1 / NUMBER_LIMIT:g} to {NUMBER_LIMIT:g} in size")
        return v


class Rubric(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    description: str = ""
    scoring_criteria: str | dict[str, str] | None = None
    weight: Number = 1.0
    items: list[RubricItem] | None = None
    scale: tuple[Number, Number] | None = None
    # Before any judge call, a stored calibration of the judge on this rubric with at least this κ
    # (None: the rubric set's, else none; see docs/calibration.md, "Calibrated gates").
    require_calibration: CalibrationRequirement | None = None
    # A check that needs no model (jurist.rubrics.checks), as written; compiled into compiled_check.
    check: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None  # the user's own data: free, never read
    _check: Check | None = PrivateAttr(None)

    @field_validator("id")
    @classmethod
    def _storable_id(cls, v: str) -> str:
        problem = id_problem(v, SCORE_KEY_LENGTH)
        if problem:
            raise ValueError(f"the rubric id {problem}")
        return v

    @field_validator("name")
    @classmethod
    def _storable_name(cls, v: str) -> str:
        problem = name_problem(v, SCORE_NAME_LENGTH)
        if problem:
            raise ValueError(f"the rubric name {problem}")
        return v

    @field_validator("weight")
    @classmethod
    def _positive_weight(cls, v: float) -> float:
        if not (v > 0 and in_range(v)):
            raise ValueError(f"weight must be greater than 0: a finite number from {1 / NUMBER_LIMIT:g} "
                             f"to {NUMBER_LIMIT:g}")
        return v

    @field_validator("scale")
    @classmethod
    def _finite_scale(cls, v: tuple[float, float] | None) -> tuple[float, float] | None:
        return _check_scale(v)

    @model_validator(mode="after")
    def _has_criteria(self, info: ValidationInfo) -> "Rubric":
        criteria = self.scoring_criteria
        empty = criteria is None or (isinstance(criteria, str) and not criteria.strip()) or (
            isinstance(criteria, dict) and not criteria
        )
        if self.check is not None:
            if not empty or self.items is not None:
                raise ValueError("a rubric with a check has no scoring_criteria or items: give one or the other")
            if self.require_calibration is not None:
                raise ValueError("require_calibration: a check needs no model, so there is no judge to calibrate")
            if "python" in self.check and (info.context or {}).get("python_checks") is False:
                raise ValueError("check: a python check runs code on this machine: it is taken from a rubrics "
                                 "file or Python code, not from rubrics sent as data (an HTTP request)")
            try:
                self._check = parse_check(self.check)
            except ValueError as exc:
                raise ValueError(f"check: {exc}") from None
            if self.scale is not None and not self.scale[0] < self.scale[1]:
                raise ValueError("scale must be [min, max] with min < max")
            return self
        if empty and not self.items:
            raise ValueError("scoring_criteria is empty and there are no items: give one or the other")
        if self.items is not None:
            if not self.items:
                raise ValueError("items is an empty list")
            ids = [i.id for i in self.items]
            dupes = sorted({i for i in ids if ids.count(i) > 1})
            if dupes:
                raise ValueError(f"duplicate item id(s) {', '.join(dupes)}")
            if not any(i.points > 0 for i in self.items):
                raise ValueError("items need at least one with positive points")
        if isinstance(criteria, dict):
            try:
                levels = [float(k) for k in criteria]
            except ValueError:
                raise ValueError("scoring_criteria keys must be score levels such as \"1\" ... \"5\"") from None
            if not all(in_range(x) for x in levels):
                raise ValueError(f"scoring_criteria keys must be finite score levels, 0 or from "
                                 f"{1 / NUMBER_LIMIT:g} to {NUMBER_LIMIT:g} in size")
            if self.scale is None:
                self.scale = (min(levels), max(levels))
        if self.scale is not None and not self.scale[0] < self.scale[1]:
            raise ValueError("scale must be [min, max] with min < max")
        return self

    @property
    def item_based(self) -> bool:
        return bool(self.items)

    @property
    def compiled_check(self) -> Check | None:
        """The rubric's check, compiled (None: a rubric for a judge)."""
        if self.check is not None and self._check is None:  # a copy made without validation
            self._check = parse_check(self.check)
        return self._check

    @property
    def uses_expected(self) -> bool:
        """Whether the rubric needs the session's expected answer: ``{expected}`` in its texts or check."""
        check = self.compiled_check
        if check is not None:
            return check.uses_expected
        texts = [self.description, self.criteria_text(), *(i.text for i in self.items or [])]
        return any(EXPECTED in t for t in texts)

    def criteria_text(self) -> str:
        """The scoring criteria as prompt text."""
        c = self.scoring_criteria
        if isinstance(c, dict):
            return "\n".join(f"{level}: {desc}" for level, desc in sorted(c.items(), key=lambda kv: float(kv[0])))
        return c or ""

    def items_text(self) -> str:
        return "\n".join(f"- [{i.id}] ({i.points:+g} points) {i.text}" for i in self.items or [])


class RubricSet(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: str = "1.0"
    scale: tuple[Number, Number] = DEFAULT_SCALE
    rubrics: list[Rubric]
    source: str | None = None
    require_calibration: CalibrationRequirement | None = None  # every rubric's bar, unless it has its own
    metadata: dict[str, Any] | None = None  # the user's own data: free, never read

    def requirement_for(self, rubric: Rubric) -> CalibrationRequirement | None:
        """The calibration bar of one rubric: its own, else the set's (None: none; a check has none:
        it needs no model)."""
        if rubric.check is not None:
            return None
        return rubric.require_calibration or self.require_calibration

    @field_validator("version")
    @classmethod
    def _storable_version(cls, v: str) -> str:
        problem = name_problem(v, RUBRICS_VERSION_LENGTH)
        if problem:
            raise ValueError(f"the version {problem}")
        return v

    @field_validator("scale")
    @classmethod
    def _finite_scale(cls, v: tuple[float, float]) -> tuple[float, float]:
        _check_scale(v)
        return v

    def scale_of(self, rubric: Rubric) -> tuple[float, float]:
        return rubric.scale or self.scale


def load_rubrics(path: str | Path, default_scale: tuple[float, float] | None = None) -> RubricSet:
    """Load and validate a rubrics file; every problem names the file and the field."""
    p = Path(path)
    text = read_text(p, "rubrics")
    return parse_rubrics(parse_json(text, str(p)), str(p), default_scale, text=text, python_checks=True)


def parse_rubrics(data: Any, source: str, default_scale: tuple[float, float] | None = None, *,
                  text: str | None = None, python_checks: bool = False) -> RubricSet:
    """Validate rubrics given as data (a file's JSON, or a request body); ``source`` names it in errors
    (``text``: the file's text, where an unknown field's line is looked up). A ``python`` check
    (which imports and runs code) is refused unless ``python_checks``: a file read from disk or the
    caller's own code may hold one, rubrics sent over HTTP may not."""
    p = source
    if isinstance(data, list):
        data = {"rubrics": data}
    if not isinstance(data, dict) or "rubrics" not in data:
        raise InputError('expected an object with a "rubrics" list, or a list of rubrics', file=str(p))
    data = dict(data)  # the caller's object is left as it was
    if default_scale is not None and "scale" not in data:
        data["scale"] = default_scale
    if "version" in data:
        if isinstance(data["version"], bool) or not isinstance(data["version"], (str, int, float)):
            raise InputError(f"version must be text or a number, not {type(data['version']).__name__}",
                             file=str(p))
        data["version"] = str(data["version"])
    rubrics = data.get("rubrics")
    if isinstance(rubrics, list):
        for n, r in enumerate(rubrics):
            if isinstance(r, dict) and "id" not in r:
                raise InputError(f"rubrics[{n}]: missing field 'id'", file=str(p))
        ids = [r.get("id") for r in rubrics if isinstance(r, dict)]
        dupes = sorted({str(i) for i in ids if ids.count(i) > 1})
        if dupes:
            raise InputError(f"duplicate rubric id(s): {', '.join(dupes)}", file=str(p))
        if not rubrics:
            raise InputError('"rubrics" is empty', file=str(p))
    try:
        rs = RubricSet.model_validate(data, context={"python_checks": python_checks})
    except ValidationError as exc:
        e = first_error(exc)
        loc = list(e["loc"])
        where = ""
        if len(loc) >= 2 and loc[0] == "rubrics" and isinstance(loc[1], int) and isinstance(rubrics, list):
            rid = rubrics[loc[1]].get("id") if isinstance(rubrics[loc[1]], dict) else None
            where = f"rubric {shorten(rid)!r}" if rid else f"rubrics[{loc[1]}]"
            loc = loc[2:]
        problem = error_problem(e, RubricSet, loc)
        line = key_line(text, str(loc[-1])) if text is not None and e["type"] == "extra_forbidden" and loc else None
        raise InputError(f"{where}: {problem}" if where else problem, file=str(p), line=line) from None
    if not rs.scale[0] < rs.scale[1]:
        raise InputError("scale must be [min, max] with min < max", file=str(p))
    rs.source = str(p)
    return rs
