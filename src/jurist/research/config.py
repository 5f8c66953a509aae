"""Configuration of research evaluation: the ``research:`` section of jurist.yaml.

The shape is the design note's (snake_case at the top, camelCase inside
``evaluation:``); every default is the note's::

    research:
      model: openai/gpt-4o-mini         # every role, the critic and the escalation not named below
      evaluators:                       # per role
        intent_analyst: {model: ollama/llama3.1:8b}
        coverage_checker: {model: ollama/qwen3:14b}
      escalation_model: ollama/qwen3:30b
      iteration: {max_attempts: 3, timeout_per_attempt: 60000, escalation_after_attempt: 2}
      stages:
        plan:
          pass_threshold: 0.7
          require_calibration: {min_kappa: 0.6}   # off by default; per dimension too
          dimensions:
            intent_alignment: {weight: 0.50, threshold: 0.7, rule: always}
      evaluation:
        enabled: true
        planEvaluation: {enabled: true, iterationEnabled: true, maxAttempts: 3, timeout: 60000, failAction: continue}
        retrievalEvaluation: {enabled: true, timeout: 30000, failAction: continue}
        answerEvaluation: {enabled: true, regenerationEnabled: true, timeout: 45000, failAction: continue}

Times are milliseconds in the file, as in the note; the ``*_seconds``
properties convert them, and the rest of the code works in seconds only.
:func:`load_research_config` reads the section (or a separate YAML file),
validates it and raises :class:`~jurist.errors.ConfigError` naming the bad
field.

Models: a role's own ``evaluators.<role>.model``, else ``model``, else the
note's Ollama default of that role; the escalation: ``escalation_model``,
else ``model``, else the note's default; the plan critic: ``critic_model``,
else the intent_analyst's model.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from jurist.config import Settings, read_yaml
from jurist.errors import ConfigError
from jurist.jsonfiles import Number, Whole, unknown_name, validation_problems
from jurist.judges.calibration import CalibrationRequirement
from jurist.research import stages as st
from jurist.research import vocabulary as vocab

FailAction = Literal["continue", "warn", "block"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class EvaluatorConfig(_Strict):
    """One role of the panel: its model (``None``: the section's ``model``, else the judge)."""

    model: str | None = None


class IterationConfig(_Strict):
    """The plan-refinement loop (``iteration:``)."""

    max_attempts: Whole = Field(default=3, ge=1, le=10)
    timeout_per_attempt: Whole = Field(default=60000, gt=0)  # ms
    escalation_after_attempt: Whole = Field(default=2, ge=1)

    @property
    def attempt_seconds(self) -> float:
        """``timeout_per_attempt`` in seconds."""
        return self.timeout_per_attempt / 1000.0


class EscalationConfig(_Strict):
    """When the panel escalates to the escalation model."""

    low_confidence: Number = Field(default=0.6, ge=0, le=1)
    disagreement: Number = Field(default=0.3, ge=0, le=1)
    borderline: Number = Field(default=0.05, ge=0, le=1)


class DimensionConfig(_Strict):
    """Weight, threshold and iteration rule of one dimension."""

    weight: Number = Field(ge=0)
    threshold: Number | None = Field(default=None, ge=0, le=1)
    rule: Literal["always", "iterate", "if_borderline", "none"] = "none"
    require_calibration: CalibrationRequirement | None = None  # None: the stage's


def _dims(stage: str) -> dict[str, DimensionConfig]:
    return {d.key: DimensionConfig(weight=d.weight, threshold=d.threshold, rule=d.rule)
            for d in st.DIMENSIONS[stage]}


class StageConfig(_Strict):
    """Dimensions and thresholds of one stage. Given dimensions are merged over
    the defaults; weights need not sum to 1 (they are normalised)."""

    pass_threshold: Number = Field(default=st.PASS_THRESHOLD, ge=0, le=1)
    severe_threshold: Number = Field(default=st.SEVERE_THRESHOLD, ge=0, le=1)
    regenerate_below: Number = Field(default=st.REGENERATE_BELOW, ge=0, le=1)
    dimensions: dict[str, DimensionConfig] = Field(default_factory=dict)
    # Off by default: every dimension's calibration bar, unless the dimension has its own.
    require_calibration: CalibrationRequirement | None = None

    @property
    def weights(self) -> dict[str, float]:
        return {k: d.weight for k, d in self.dimensions.items()}

    def calibration_bars(self) -> dict[str, CalibrationRequirement]:
        """Dimension -> the calibration its judge must have (only dimensions that require one)."""
        return {k: bar for k, d in self.dimensions.items()
                if (bar := d.require_calibration or self.require_calibration) is not None}

    def pass_mark(self, dimension: str) -> float:
        """The score at which a dimension passes: its threshold, else the stage's pass threshold."""
        threshold = self.dimensions[dimension].threshold
        return self.pass_threshold if threshold is None else threshold


class StagesConfig(_Strict):
    plan: StageConfig = Field(default_factory=lambda: StageConfig(dimensions=_dims(st.PLAN)))
    retrieval: StageConfig = Field(default_factory=lambda: StageConfig(dimensions=_dims(st.RETRIEVAL)))
    answer: StageConfig = Field(default_factory=lambda: StageConfig(dimensions=_dims(st.ANSWER)))

    @model_validator(mode="before")
    @classmethod
    def _merge_defaults(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        out = dict(data)
        for stage in st.STAGE_NAMES:
            given = out.get(stage)
            if given is None:
                continue
            if not isinstance(given, dict):
                continue  # pydantic reports the type error
            dims = given.get("dimensions") or {}
            if not isinstance(dims, dict):
                continue
            known = [d.key for d in st.DIMENSIONS[stage]]
            unknown = sorted(set(dims) - set(known))
            if unknown:
                raise ValueError(f"{stage}.dimensions: "
                                 + "; ".join(unknown_name(str(u), known, "dimension") for u in unknown))
            merged: dict[str, object] = {k: v.model_dump() for k, v in _dims(stage).items()}
            for key, value in dims.items():
                default = merged[key]
                merged[key] = {**default, **value} if isinstance(value, dict) and isinstance(default, dict) else value
            out[stage] = {**given, "dimensions": merged}
        return out

    @model_validator(mode="after")
    def _some_weight(self) -> "StagesConfig":
        for stage in st.STAGE_NAMES:
            if sum(getattr(self, stage).weights.values()) <= 0:
                raise ValueError(f"{stage}: the dimension weights must not all be 0")
        return self

    def of(self, stage: str) -> StageConfig:
        return {st.PLAN: self.plan, st.RETRIEVAL: self.retrieval, st.ANSWER: self.answer}[stage]


class _StageSwitches(_Strict):
    """The fail-safe switches every stage has; ``timeout`` is milliseconds (one evaluation)."""

    enabled: bool = True
    timeout: Whole = Field(gt=0)
    fail_action: FailAction = Field(default="continue", alias="failAction")

    @property
    def timeout_seconds(self) -> float:
        return self.timeout / 1000.0


class PlanEvaluationConfig(_StageSwitches):
    iteration_enabled: bool = Field(default=True, alias="iterationEnabled")
    max_attempts: Whole = Field(default=3, ge=1, le=10, alias="maxAttempts")
    timeout: Whole = Field(default=60000, gt=0)  # ms, one evaluation of one plan


class RetrievalEvaluationConfig(_StageSwitches):
    timeout: Whole = Field(default=30000, gt=0)


class AnswerEvaluationConfig(_StageSwitches):
    regeneration_enabled: bool = Field(default=True, alias="regenerationEnabled")
    timeout: Whole = Field(default=45000, gt=0)


class EvaluationConfig(_Strict):
    """The note's ``evaluation:`` block (fail-safe switches)."""

    enabled: bool = True
    plan_evaluation: PlanEvaluationConfig = Field(default_factory=PlanEvaluationConfig, alias="planEvaluation")
    retrieval_evaluation: RetrievalEvaluationConfig = Field(
        default_factory=RetrievalEvaluationConfig, alias="retrievalEvaluation")
    answer_evaluation: AnswerEvaluationConfig = Field(default_factory=AnswerEvaluationConfig, alias="answerEvaluation")

    def of(self, stage: str) -> _StageSwitches:
        """The switches of one stage."""
        return {st.PLAN: self.plan_evaluation, st.RETRIEVAL: self.retrieval_evaluation,
                st.ANSWER: self.answer_evaluation}[stage]


class ResearchConfig(_Strict):
    """Everything research evaluation can be told (see the module docstring)."""

    model: str | None = None  # every role, critic and escalation without a model of its own (None: the note's)
    evaluators: dict[str, EvaluatorConfig] = Field(default_factory=dict, validate_default=True)
    escalation_model: str | None = vocab.DEFAULT_ESCALATION_MODEL
    visual_evaluator: str | None = vocab.DEFAULT_VISUAL_EVALUATOR  # recorded; not used yet
    critic_model: str | None = None  # plan critic (None: the intent_analyst's model)
    role_timeout: Whole | None = Field(default=None, gt=0)  # ms per role call (None: the panel's)
    iteration: IterationConfig = Field(default_factory=IterationConfig)
    escalation: EscalationConfig = Field(default_factory=EscalationConfig)
    stages: StagesConfig = Field(default_factory=StagesConfig)
    evaluation: EvaluationConfig = Field(default_factory=EvaluationConfig)

    @field_validator("evaluators", mode="before")
    @classmethod
    def _merge_evaluators(cls, v: Any, info: ValidationInfo) -> Any:
        """The roles the section does not name get ``model`` when it is given, else the note's default."""
        if not isinstance(v, dict):
            return v
        unknown = sorted(set(v) - set(vocab.DEFAULT_ROLE_MODELS))
        if unknown:
            raise ValueError("; ".join(unknown_name(str(u), vocab.DEFAULT_ROLE_MODELS, "evaluator role") for u in unknown))
        model = info.data.get("model")
        merged: dict[str, Any] = {r: {"model": model or m} for r, m in vocab.DEFAULT_ROLE_MODELS.items()}
        for role, entry in v.items():
            merged[role] = {"model": entry} if isinstance(entry, str) or entry is None else entry
        return merged

    @model_validator(mode="before")
    @classmethod
    def _escalation_follows_model(cls, data: Any) -> Any:
        """Without ``escalation_model``, ``model`` (when given) escalates too, not the note's default."""
        if isinstance(data, dict) and data.get("model") and "escalation_model" not in data:
            return {**data, "escalation_model": data["model"]}
        return data

    @model_validator(mode="after")
    def _attempts_agree(self) -> "ResearchConfig":
        plan = self.evaluation.plan_evaluation
        if ("max_attempts" in self.iteration.model_fields_set and "max_attempts" in plan.model_fields_set
                and self.iteration.max_attempts != plan.max_attempts):
            raise ValueError(
                f"iteration.max_attempts ({self.iteration.max_attempts}) and "
                f"evaluation.planEvaluation.maxAttempts ({plan.max_attempts}) disagree; set one of them")
        return self

    # -- derived values ---------------------------------------------------------
    @property
    def max_attempts(self) -> int:
        """planEvaluation.maxAttempts when given, else iteration.max_attempts."""
        plan = self.evaluation.plan_evaluation
        return plan.max_attempts if "max_attempts" in plan.model_fields_set else self.iteration.max_attempts

    @property
    def role_timeout_seconds(self) -> float | None:
        """``role_timeout`` in seconds (None: the panel's)."""
        return self.role_timeout / 1000.0 if self.role_timeout is not None else None

    def role_models(self) -> dict[str, str]:
        """Role -> model reference, for roles that have one (a role set to null has none:
        the panel's default model, ``model`` or the configured judge)."""
        return {role: e.model for role, e in self.evaluators.items() if e.model}

    def critic(self) -> str | None:
        """The plan critic's model: critic_model, else the intent_analyst's, else ``model``."""
        intent = self.evaluators.get("intent_analyst")
        return self.critic_model or (intent.model if intent else None) or self.model

    def snapshot(self) -> dict[str, object]:
        """The configuration as JSON data (by the YAML names), for the record."""
        return self.model_dump(mode="json", by_alias=True)


SECTION = "research"


def research_config(data: Mapping[str, object] | None, *, source: str | None = None) -> ResearchConfig:
    """Validate a ``research:`` section (a mapping); ConfigError names the bad field."""
    try:
        return ResearchConfig.model_validate(dict(data or {}))
    except ValidationError as exc:
        where = f" in {source}" if source else ""
        problems = "; ".join(validation_problems(exc, ResearchConfig, [SECTION]))
        raise ConfigError(f"invalid research configuration{where}: {problems}") from None


def load_research_config(
    source: str | Path | Mapping[str, object] | None = None, *, settings: Settings | None = None
) -> ResearchConfig:
    """The research configuration.

    ``source`` may be a dict (the section itself), or a YAML file: its
    ``research:`` section when it has one, else the whole file is the section.
    Without ``source``: the ``research:`` section of the settings (``settings``, else
    loaded now from ``JURIST_CONFIG`` or ``./jurist.yaml`` and the environment), else the
    defaults. Given settings are not read again: their file is not opened a second time.
    """
    if isinstance(source, Mapping):
        inner = source.get(SECTION, source) if SECTION in source else source
        if inner is not None and not isinstance(inner, Mapping):
            raise ConfigError(f"'{SECTION}:' must hold a mapping")
        return research_config(inner)
    if source is not None:
        path = Path(source)
        if not path.is_file():
            raise ConfigError(f"research configuration file {path} not found")
        data = read_yaml(path, "research settings")
        section = data.get(SECTION, data) if SECTION in data else data
        if section is not None and not isinstance(section, dict):
            raise ConfigError(f"{path}: '{SECTION}:' must hold a mapping")
        return research_config(section, source=str(path))
    if settings is None:
        settings = Settings.load()
    section = settings.research
    if section is None:
        return ResearchConfig()
    return research_config(section, source=settings.config_file)
