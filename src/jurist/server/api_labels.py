"""Human labels on the dashboard, and the calibration they make possible.

``POST /api/evaluation/labels`` stores a person's score (or pass/fail) of one
rubric of an evaluated item (checked against the stored evaluation: the item, the rubric
and the rubric's scale; 422 naming the problem); ``GET /api/evaluation/labels`` lists
them; ``DELETE /api/evaluation/labels/{id}`` deletes one; ``GET /api/evaluation/calibration``
compares them with the newest stored rubric evaluation of each item, listing the labels
it cannot use with why (it needs the ``analysis`` extra, and answers 501 naming it
without); ``GET /api/evaluation/calibrations`` lists the calibrations ``jurist calibrate``
stored, which ``require_calibration`` looks up (a store read: no extra needed). See
docs/calibration.md. All SQL is in ``jurist.store.labels`` and ``jurist.store.calibrations``.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from typing import Any

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, Field, StrictBool, model_validator

from jurist.errors import NotFound
from jurist.extras import require_extra
from jurist.jsonfiles import Number
from jurist.server.auth import require_write
from jurist.server.errors import error_responses
from jurist.server.state import get_state
from jurist.store import calibrations as cq
from jurist.store import dashboard as dq
from jurist.store import labels as lq

router = APIRouter(prefix="/api/evaluation", tags=["labels"])

SAFE_ID = r"^[A-Za-z0-9_.:@/-]{1,300}$"


class NewLabel(BaseModel):
    """A person's verdict on one rubric of an item: a score on the rubric's scale, or pass/fail."""

    model_config = ConfigDict(extra="forbid")

    evaluation_id: str | None = Field(None, max_length=32, description="the evaluation labelled (its trace page); "
                                      "the item and the rubric's scale are taken from it")
    item: str | None = Field(None, pattern=SAFE_ID, description="what was judged (a session id); default: the "
                             "evaluation's subject")
    rubric: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,200}$")
    score: Number | None = Field(None, allow_inf_nan=False, description="a whole number on the rubric's scale")
    passed: StrictBool | None = Field(None, description="pass (true) or fail (false), instead of a score")
    annotator: str = Field(min_length=1, max_length=200)
    note: str | None = Field(None, max_length=5000)

    @model_validator(mode="after")
    def _one_verdict(self) -> "NewLabel":
        if (self.score is None) == (self.passed is None):
            raise ValueError("give either score or passed")
        if self.score is not None and self.score != int(self.score):
            raise ValueError("score must be a whole number")
        if self.evaluation_id is None and self.item is None:
            raise ValueError("give evaluation_id or item")
        return self


class StoredLabel(lq.LabelRow):
    """A stored label as the API returns it: the store's row."""


def refused(field: str, message: str) -> RequestValidationError:
    """A 422 naming the body field at fault, as a validation error of the body is answered."""
    return RequestValidationError([{"type": "value_error", "loc": ("body", field), "msg": message}])


@router.post("/labels", response_model=StoredLabel, status_code=201, dependencies=[Depends(require_write)],
             responses=error_responses(401, 404, 422))
async def add_label(request: Request, body: NewLabel) -> lq.LabelRow:
    """Store a label (the annotator's earlier label of the same item and rubric is replaced). The item
    must have a stored rubric evaluation scoring the rubric (the one given, or the item's newest), and
    a score must be a whole number on that rubric's scale: else 422, naming the problem."""
    state = get_state(request)
    item = body.item
    if body.evaluation_id is not None:
        found = await state.store.aread(dq.trace, body.evaluation_id)
        if found is None:
            raise NotFound(f"no evaluation with id {body.evaluation_id!r}")
        ev = found["evaluation"]
        if item is not None and item != ev["subject_id"]:
            raise refused("item", f"item {item!r} is not the evaluation's subject {ev['subject_id']!r}")
        item = ev["subject_id"]
        scored = {s["key"]: s["max_score"] for s in found["scores"]}
        what = "the evaluation"
    elif item is not None:
        latest = (await state.store.aread(lq.latest_rubric_scores, [item])).get(item)
        if latest is None:
            raise refused("item", f"no stored rubric evaluation of item {item!r}: label an item the judge scored "
                                  "(give evaluation_id, from its trace page)")
        scored = {key: s.max_score for key, s in latest.scores.items()}
        what = f"the newest evaluation of item {item!r}"
    else:  # NewLabel asks for one of them
        raise refused("item", "give evaluation_id or item")
    if body.rubric not in scored:
        raise refused("rubric", f"{what} has no rubric {body.rubric!r} (rubrics: {', '.join(scored) or 'none'})")
    low, top = state.settings.score_scale
    high = scored[body.rubric]
    high = top if high is None else high
    if body.score is not None and not low <= body.score <= high:
        raise refused("score", f"score {body.score:g} is not on the rubric's scale {low:g}-{high:g}")
    label = lq.NewLabel(item=item, rubric=body.rubric, annotator=body.annotator, score=body.score,
                        passed=body.passed, note=body.note, evaluation_id=body.evaluation_id)
    return await state.store.awrite(lq.save_label, label, datetime.now(timezone.utc))


@router.delete("/labels/{label_id}", response_model=StoredLabel, dependencies=[Depends(require_write)],
               responses=error_responses(401, 404, 422))
async def delete_label(request: Request, label_id: int = Path(ge=1, le=2_147_483_647, description="the label's id")
                       ) -> lq.LabelRow:
    """Delete a label; returns it as it was. The calibration lists the labels it cannot use with their ids."""
    found = await get_state(request).store.awrite(lq.delete_label, label_id)
    if found is None:
        raise NotFound(f"no label with id {label_id}")
    return found


@router.get("/labels", response_model=list[StoredLabel], responses=error_responses(422))
async def list_labels(request: Request, item: str | None = Query(None, pattern=SAFE_ID)) -> list[lq.LabelRow]:
    """The labels of one item, or every label (by item, rubric, annotator)."""
    store = get_state(request).store
    return await (store.aread(lq.labels_of, item) if item is not None else store.aread(lq.all_labels))


async def stored_calibration(request: Request, resamples: int) -> dict[str, Any]:
    """The calibration of the stored labels against the newest stored rubric evaluation of each item
    (MissingExtra without the ``analysis`` extra)."""
    require_extra("analysis", "The calibration")
    from jurist.analysis.calibrate import compare_stored

    state = get_state(request)
    rows = await state.store.aread(lq.all_labels)
    latest = await state.store.aread(lq.latest_rubric_scores, {r.item for r in rows})
    report = await asyncio.to_thread(compare_stored, rows, latest, low=state.settings.score_scale[0],
                                     resamples=resamples)
    out: dict[str, Any] = report.to_json()
    return out


@router.get("/calibration", responses=error_responses(422, 501))
async def calibration(request: Request,
                      resamples: int = Query(1000, ge=0, le=10_000, description="bootstrap resamples")
                      ) -> dict[str, Any]:
    """Per rubric: agreement of the judge with the labels (κ, weighted κ, ρ, τ, α, bias, intervals),
    the annotators among themselves, the confusion matrix, the items that differ most."""
    return await stored_calibration(request, resamples)


class StoredCalibration(BaseModel):
    """A calibration ``jurist calibrate`` stored: the judge it holds for and its figures."""

    id: str
    kind: str = Field(description="what was calibrated: rubric | gate | panel")
    judge_model: str
    template_name: str
    template_hash: str
    rubric: str = Field(description="a rubric id, a gate evaluator or a panel dimension")
    rubric_hash: str | None
    scale: str
    items: int
    n: int = Field(description="judge-person pairs compared")
    kappa: float | None = Field(description="Cohen's κ, quadratic weights (for pass/fail: Cohen's κ)")
    kappa_low: float | None
    kappa_high: float | None
    agreement: float | None
    agreement_low: float | None
    agreement_high: float | None
    pass_at: float | None
    threshold: float | None = Field(description="pass/fail: the fitted threshold (pass at score >= it)")
    threshold_fit: str | None
    threshold_agreement: float | None
    threshold_agreement_low: float | None
    threshold_agreement_high: float | None
    threshold_degenerate: str | None = Field(None, description="why the fitted threshold is no threshold to use "
                                             "(every item passes, none does, or κ ≤ 0); threshold is then null")
    labels: str
    created_at: datetime

    @model_validator(mode="before")
    @classmethod
    def _degenerate_from_figures(cls, data: Any) -> Any:
        """A stored row keeps a degenerate fit's reason in its figures (the JSON column)."""
        if isinstance(data, dict) and "threshold_degenerate" not in data:
            fitted = (data.get("figures") or {}).get("threshold") or {}
            return {**data, "threshold_degenerate": fitted.get("degenerate")}
        return data


async def stored_calibrations(request: Request, limit: int = 200) -> list[cq.StoredCalibration]:
    rows: list[cq.StoredCalibration] = await get_state(request).store.aread(cq.list_calibrations, limit=limit)
    return rows


@router.get("/calibrations", response_model=list[StoredCalibration], responses=error_responses(422))
async def calibrations(request: Request, limit: int = Query(200, ge=1, le=cq.MAX_CALIBRATIONS_READ)
                       ) -> list[StoredCalibration]:
    """The stored calibrations, newest first: per judge (model, template) and rubric or dimension,
    κ and agreement with their intervals and, for pass/fail, the fitted threshold."""
    return [StoredCalibration.model_validate(row.model_dump()) for row in await stored_calibrations(request, limit)]
