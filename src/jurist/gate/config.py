"""Gate configuration: strategy, evaluator, threshold, regenerations, time budget."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from jurist.gate.types import Strategy
from jurist.jsonfiles import Number, Whole
from jurist.judges.calibration import CalibrationRequirement

EvaluatorName = Literal["quality", "comprehensiveness"]

#: Regenerations allowed by default, per evaluator (note 001: once; note 004: twice).
DEFAULT_MAX_REGENERATIONS: dict[str, int] = {"quality": 1, "comprehensiveness": 2}


class GateConfig(BaseModel):
    """How a gate judges and when it regenerates.

    ``evaluate_feedback_enabled`` is off by default (note 001): the gate then sends
    ``done`` as soon as the answer is complete and scores it afterwards (the record
    lands in the store when the judge has answered); it never regenerates.
    ``require_calibration`` (``{min_kappa: 0.6}``) is off by default: see docs/gate.md,
    "Calibrated gates".
    """

    model_config = ConfigDict(extra="forbid")  # and true / false are not numbers (Number, Whole)

    strategy: Strategy = "blocking"
    evaluator: EvaluatorName = "quality"
    threshold: Number = Field(default=0.4, ge=0.0, le=1.0)  # quality_score below this fails
    max_regenerations: Whole | None = Field(default=None, ge=0)  # None: 1 for quality, 2 for comprehensiveness
    budget_s: Number = Field(default=30.0, gt=0)  # the whole request, never exceeded
    evaluate_feedback_enabled: bool = False
    judge: str | None = None  # model reference or alias; default: the `fast` alias, then settings.judge
    judge_timeout_s: Number = Field(default=20.0, gt=0)  # one evaluation (capped by the budget)
    # feedback off: how long Gate.aclose waits for evaluations still running after ``done``;
    # the ones still running then are recorded as skipped
    close_timeout_s: Number = Field(default=10.0, ge=0)
    previous_chars: Whole = Field(default=500, ge=0)  # of the previous answer shown on regeneration
    # parallel strategy: judge snapshots of the streaming answer, one at a time
    parallel_min_chars: Whole = Field(default=40, ge=1)  # a snapshot needs at least this much text
    parallel_min_coverage: Number = Field(default=0.5, ge=0.0, le=1.0)  # of the final text, to trust a pass
    parallel_wait_fraction: Number = Field(default=0.08, ge=0.0)  # wait for a running snapshot: x generation time
    max_tokens: Whole | None = None  # for a model-reference generator; None: settings.max_tokens
    temperature: Number | None = None  # for a model-reference generator; None: settings.temperature
    # Off by default. On: before the first judge call, the store must hold a calibration of the
    # evaluator's judge (model, template, evaluator) with at least this κ, else CalibrationRequired.
    require_calibration: CalibrationRequirement | None = None

    def regenerations(self) -> int:
        """The cap on regenerations for this evaluator."""
        if self.max_regenerations is not None:
            return self.max_regenerations
        return DEFAULT_MAX_REGENERATIONS.get(self.evaluator, 1)
