"""The evaluation record of one research query (the note's "Data Persistence").

pydantic models whose JSON uses the note's camelCase names
(``EvaluationRecord``, ``PlanAttempt``, ``EvaluatorResult``,
``EscalationResult``, ``IterationDecision``), plus the stage sections and the
answer attempts. ``EvaluatorResult`` and ``EscalationResult`` are the panel's own
:class:`~jurist.judges.panel.RoleResult` and :class:`~jurist.judges.panel.Escalation`
(one model each, written here by their camelCase aliases); :func:`fill_stage`
copies a :class:`~jurist.judges.panel.PanelResult` into a stage. Latencies are
milliseconds; every raw model response is kept. A status is the outcome
vocabulary (``ok`` | ``failed``); a stage that could not be evaluated says so
with ``evaluationSkipped``.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError
from pydantic.alias_generators import to_camel

from jurist.judges.outcome import Status
from jurist.judges.panel import Escalation, PanelResult, RoleResult
from jurist.research.config import StagesConfig

Mode = Literal["targeted_fix", "full_regeneration", "alternative_approach"]
RECORD_VERSION = "1.0"


def now() -> str:
    """The current UTC time, ISO 8601."""
    return datetime.now(timezone.utc).isoformat()


class Record(BaseModel):
    """Base: camelCase JSON, snake_case Python."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    def to_json(self) -> dict[str, JsonValue]:
        """The record as JSON data with the note's field names."""
        return self.model_dump(mode="json", by_alias=True)


class Issue(Record):
    issue: str
    fix: str = ""


#: One role's judgement: the panel's :class:`~jurist.judges.panel.RoleResult` itself, under the note's name
#: (camelCase here: ``rawResponse``, ``latency`` in ms, ``tokensUsed``).
EvaluatorResult = RoleResult
#: The stronger model's review: the panel's :class:`~jurist.judges.panel.Escalation` itself. ``trigger`` is
#: the first of ``triggers``: low_confidence, disagreement, borderline (the panel), or max_attempts (the plan
#: loop's final review).
EscalationResult = Escalation


class IterationDecision(Record):
    """What the planner is told after a failed attempt (the note's IterationDecision)."""

    mode: Mode
    specific_issues: list[Issue] = Field(default_factory=list)
    feedback_to_planner: str
    recommended_mode: Mode | None = None  # the critic's recommendation, before the escalation rules
    failure_type: str | None = None
    critique: str = ""
    critic_scores: dict[str, float] = Field(default_factory=dict)
    critic_model: str | None = None
    raw_response: str | None = None
    latency: float = 0.0
    tokens_used: int = 0
    status: Status = "ok"  # ok | failed (then the feedback is built from the panel's critiques)
    error: str | None = None


class StageResult(Record):
    """What every evaluated stage (or attempt) carries."""

    evaluator_results: list[EvaluatorResult] = Field(default_factory=list)
    aggregated_scores: dict[str, float] = Field(default_factory=dict)
    aggregated_confidence: float | None = None
    overall: float | None = None
    passed: bool | None = None
    escalation: EscalationResult | None = None
    escalation_triggers: list[str] = Field(default_factory=list)  # fired, escalation model or not
    unscored_dimensions: list[str] = Field(default_factory=list)
    scoring_note: str | None = None
    evaluation_skipped: bool = False
    skip_reason: str | None = None


class PlanAttempt(StageResult):
    """One plan and its evaluation (the note's PlanAttempt)."""

    attempt_number: int
    timestamp: str = Field(default_factory=now)
    plan: Any = None
    mode: Mode | None = None  # the mode the planner was asked for (None: first attempt)
    failed_rules: list[str] = Field(default_factory=list)
    iteration_decision: IterationDecision | None = None
    latency: float = 0.0


class PlanEvaluation(Record):
    attempts: list[PlanAttempt] = Field(default_factory=list)
    final_scores: dict[str, float] = Field(default_factory=dict)
    overall: float | None = None  # the chosen attempt's overall
    passed: bool | None = None
    total_iterations: int = 0
    max_attempts: int | None = None
    escalated_to_large_model: bool = False
    chosen_attempt: int | None = None
    meta_review: EscalationResult | None = None
    unscored_dimensions: list[str] = Field(default_factory=list)
    scoring_note: str | None = None
    evaluation_skipped: bool = False
    skip_reason: str | None = None
    warnings: list[str] = Field(default_factory=list)


class SourceEvaluation(Record):
    source_id: str
    title: str | None = None
    url: str | None = None
    relevance: float | None = None  # when the evaluator scored sources one by one


class RetrievalEvaluation(StageResult):
    scores: dict[str, float] = Field(default_factory=dict)
    flagged_severe: bool = False
    severe_dimensions: list[str] = Field(default_factory=list)
    source_details: list[SourceEvaluation] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)


class AnswerAttempt(StageResult):
    attempt_number: int
    timestamp: str = Field(default_factory=now)
    answer: str
    feedback: str | None = None  # what the synthesiser was told (None: first attempt)


class AnswerEvaluation(Record):
    attempts: list[AnswerAttempt] = Field(default_factory=list)
    final_scores: dict[str, float] = Field(default_factory=dict)
    overall: float | None = None  # the final answer's overall
    passed: bool | None = None
    regenerated: bool = False
    final_attempt: int | None = None
    unscored_dimensions: list[str] = Field(default_factory=list)
    scoring_note: str | None = None
    evaluation_skipped: bool = False
    skip_reason: str | None = None
    warnings: list[str] = Field(default_factory=list)


class Decision(Record):
    """A question the research asked its user (proceed or retry) and the answer."""

    stage: str
    reason: str
    choice: Literal["proceed", "retry"]
    by: Literal["user", "timeout"]
    default: Literal["proceed", "retry"]
    timeout: float  # seconds
    timestamp: str = Field(default_factory=now)


class EvaluationRecord(Record):
    """The whole evaluation of one research query (the note's EvaluationRecord).

    Also the stored payload of a ``research`` evaluation: ``kind`` and
    ``version`` name its format (a record stored before they existed reads as
    version 1.0)."""

    kind: Literal["research"] = "research"
    version: str = RECORD_VERSION
    log_id: str
    query_id: str
    timestamp: str = Field(default_factory=now)
    user_query: str
    trace_id: str | None = None
    plan_evaluation: PlanEvaluation | None = None
    retrieval_evaluation: RetrievalEvaluation | None = None
    answer_evaluation: AnswerEvaluation | None = None
    overall_score: float | None = None
    evaluation_skipped: bool = False
    skip_reason: str | None = None
    warnings: list[str] = Field(default_factory=list)
    decisions: list[Decision] = Field(default_factory=list)
    config: dict[str, JsonValue] = Field(default_factory=dict)
    # The pipeline's own prompts this run used: prompt lab name -> the hash of the text (its version).
    pipeline_prompts: dict[str, str] = Field(default_factory=dict)

    def stages_config(self) -> StagesConfig | None:
        """The stages' configuration (thresholds, weights) this record was made under: None when the
        record holds none, or one this version cannot read."""
        stages = self.config["stages"] if "stages" in self.config else None
        if not isinstance(stages, dict):
            return None
        try:
            return StagesConfig.model_validate(stages)
        except ValidationError:
            return None

    def summary(self) -> dict[str, JsonValue]:
        """The note's response extension (``evaluation`` of the research response)."""
        plan, ret, ans = self.plan_evaluation, self.retrieval_evaluation, self.answer_evaluation
        return {
            "planScore": plan.overall if plan else None,
            "retrievalScore": ret.overall if ret else None,
            "answerScore": ans.overall if ans else None,
            "overallScore": self.overall_score,
            "iterations": plan.total_iterations if plan else 0,
            "evaluationSkipped": self.evaluation_skipped,
            "skipReason": self.skip_reason,
            "details": f"/api/evaluation/sessions/{self.log_id}",
        }


def unscored_note(unscored: list[str]) -> str | None:
    """The record's explanation of an overall computed over fewer dimensions."""
    if not unscored:
        return None
    return (f"not scored: {', '.join(unscored)}; the overall is the weighted mean of the scored "
            "dimensions only, their weights renormalised to sum to 1")


def fill_stage(target: StageResult, result: PanelResult, dimensions: list[str]) -> None:
    """Copy a scored PanelResult into ``target`` (an attempt or a stage section)."""
    target.evaluator_results = list(result.role_results)
    target.aggregated_scores = dict(result.scores)
    target.aggregated_confidence = result.confidence
    target.overall = result.overall
    target.escalation = result.escalation
    target.escalation_triggers = list(result.triggers or (result.escalation.triggers if result.escalation else []))
    target.unscored_dimensions = [d for d in dimensions if d not in result.scores]
    target.scoring_note = unscored_note(target.unscored_dimensions)
