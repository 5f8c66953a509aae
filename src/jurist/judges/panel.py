"""Judge panels: role-based judges in parallel, confidence-weighted
aggregation, and escalation to a stronger model when the panel is unsure.

Each :class:`Role` is one judge call (purpose ``panel_role``) scoring its
dimensions 0..1 with a confidence and a critique; all roles run at once, bounded
only by the endpoints' shared limiters. A role that times out, fails or cannot
be parsed after the re-ask is a failed :class:`RoleResult`, left out. When every
confidence is low, two roles' scores differ by more than ``disagreement`` (their
weighted scores, or a dimension both score), or the overall score is
near the pass mark, one call to the escalation model (purpose
``panel_escalation``) reviews the panel and gives the final scores. No
surviving role gives a ``skipped`` result, never an invented score.

With ``require_calibration`` (one :class:`~jurist.judges.calibration.CalibrationRequirement`,
or one per dimension) the panel looks up, before its first call, a stored calibration of
each role's judge (model, template) on each of its dimensions, and refuses with
:class:`~jurist.errors.CalibrationRequired` when one is missing or below the bar.

The panel is generic: roles, dimensions and their descriptions are given by
the caller (research's five roles and eleven dimensions are in
:mod:`jurist.research.vocabulary`). Role and escalation statuses are the
outcome statuses of :mod:`jurist.judges.outcome`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import re
import time
from dataclasses import dataclass
from typing import Any, Callable, Final, Mapping, NamedTuple, Sequence, TypeVar

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator, model_validator
from pydantic.alias_generators import to_camel

from jurist.config import Settings
from jurist.errors import ConfigError, InputError, JudgeParseError, ModelError
from jurist.judges.calibration import (JudgeIdentity, JudgeUse, Requirements, StoreSource, identity_of,
                                       require_calibrated, requirement_for, text_hash)
from jurist.judges.judge import Judge
from jurist.judges.outcome import FAILED, OK, SKIPPED, Outcome, Status, guarded
from jurist.judges.prompting import quote
from jurist.judges.parsing import UNIT_INTERVAL, extract_json
from jurist.judges.templates import PromptSource, builtin
from jurist.models.base import Completion
from jurist.models.model import CallSink, Model
from jurist.models.registry import HOW_TO_CONFIGURE, ModelSource, resolve_ref

SCORED: Final = "scored"  # PanelResult.to_json()'s name for an OK panel (one with scores)

TRIGGER_LOW_CONFIDENCE = "low_confidence"
TRIGGER_DISAGREEMENT = "disagreement"
TRIGGER_BORDERLINE = "borderline"

PURPOSE_ROLE = "panel_role"
PURPOSE_ESCALATION = "panel_escalation"
_EPS = 1e-9  # "within" / "more than" comparisons are not at the mercy of float rounding
T = TypeVar("T")


@dataclass
class Role:
    """One judge of the panel: the dimensions it scores, its model and prompt."""

    name: str  # e.g. "intent_analyst"
    dimensions: list[str]  # dimension keys, e.g. ["intent_alignment", "relevance"]
    model: str | None = None  # model reference or alias; None: the panel's default model
    instructions: str | None = None  # the role's own instructions; None: a generic line


class PanelRecord(BaseModel):
    """Base of the panel's results: frozen values, snake_case in Python and in ``to_json()``.

    Their camelCase aliases are the research record's JSON names (``rawResponse``,
    ``tokensUsed``; a latency is ``latency`` there), which the research record
    writes (``by_alias``) and reads back; either spelling is accepted as input."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


class RoleResult(PanelRecord):
    """One role's judgement (the design note's EvaluatorResult, the name the research record uses)."""

    role: str
    model: str
    dimensions: list[str]
    scores: dict[str, float]  # 0..1 per dimension this role scored
    confidence: float  # 0..1
    critique: str
    raw_response: str
    latency_ms: float = Field(alias="latency")  # milliseconds; ``latency`` in the research record
    tokens_used: int
    status: Status = OK  # ok | failed (left out of the aggregation)
    error: str | None = None
    template_hash: str | None = None  # the hash of the prompt text the role's call used (the prompt lab's version)


class Escalation(PanelRecord):
    """The stronger model's review of the panel (the design note's EscalationResult).

    ``trigger`` is the first of ``triggers`` (set from them when not given): the
    research record writes both; :meth:`PanelResult.to_json` only ``triggers``.
    Research's plan loop records its final review here too (trigger ``max_attempts``)."""

    trigger: str = ""
    triggers: list[str] = Field(default_factory=list)  # which of low_confidence / disagreement / borderline fired
    model: str
    panel_review: str
    trust_decisions: dict[str, float] = Field(default_factory=dict)  # role -> 0..1
    final_verdict: str
    scores: dict[str, float] = Field(default_factory=dict)
    latency_ms: float = Field(0.0, alias="latency")  # milliseconds; ``latency`` in the research record
    tokens_used: int = 0
    status: Status = OK  # ok | failed (then the panel's own scores stand)
    error: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _first_trigger(cls, data: Any) -> Any:
        if isinstance(data, dict) and "trigger" not in data:
            triggers = data["triggers"] if "triggers" in data else []
            return {"trigger": triggers[0] if triggers else "", **data}
        return data


class PanelResult(PanelRecord):
    """A panel's evaluation. ``status`` is ``ok`` (scored) or ``skipped`` (no role survived);
    :meth:`to_json` writes ``ok`` by its documented name ``scored``."""

    status: Status  # ok | skipped
    scores: dict[str, float]  # final per-dimension scores (after escalation, if it ran)
    overall: float | None  # dimension-weighted mean of ``scores``; None when skipped
    confidence: float  # aggregated confidence of the surviving roles
    passed: bool | None  # overall >= pass_threshold; None when skipped
    panel_scores: dict[str, float]  # before escalation
    panel_overall: float | None
    role_results: list[RoleResult] = Field(default_factory=list)
    escalation: Escalation | None = None
    skip_reason: str | None = None
    triggers: list[str] = Field(default_factory=list)  # fired, whether or not an escalation model was set
    pass_threshold: float | None = None
    latency_ms: float = 0.0  # wall time of the whole evaluation
    tokens_used: int = 0  # every call of the evaluation, escalation included

    @field_validator("status", mode="before")
    @classmethod
    def _status_name(cls, value: Any) -> Any:
        return OK if value == SCORED else value

    def to_json(self) -> dict[str, JsonValue]:
        """Everything as JSON data, snake_case (nested results included; an escalation without
        its ``trigger``), ``status`` ``scored`` | ``skipped``."""
        data: dict[str, JsonValue] = self.model_dump(mode="json", exclude={"escalation": {"trigger"}})
        if self.status == OK:
            data["status"] = SCORED
        return data


_GENERIC_INSTRUCTIONS = "Judge the material carefully on the dimensions below."
#: How a panel built in Python is calibrated (research stages name their ``jurist calibrate`` command).
CALIBRATE_PANEL = ("await jurist.analysis.calibrate_panel.calibrate_panel(panel, items, labels, task=...) "
                   "(Python; see docs/calibration.md)")


def roles_for(
    dimensions: Sequence[str], roles: Sequence[Role], models: Mapping[str, str] | None = None
) -> list[Role]:
    """Copies of ``roles`` restricted to ``dimensions`` (roles left with none are
    dropped), with ``models`` (role name -> model reference) overriding models.
    Raises ConfigError for a dimension no role scores or a model for an unknown role."""
    models = dict(models or {})
    unknown = sorted(set(models) - {r.name for r in roles})
    if unknown:
        raise ConfigError(f"models names unknown role(s) {', '.join(unknown)}; roles: {', '.join(r.name for r in roles)}")
    uncovered = [d for d in dimensions if not any(d in r.dimensions for r in roles)]
    if uncovered:
        raise ConfigError(f"no role scores {', '.join(uncovered)}; add a Role with these dimensions")
    wanted = set(dimensions)
    return [
        dataclasses.replace(r, dimensions=[d for d in r.dimensions if d in wanted], model=models.get(r.name, r.model))
        for r in roles
        if wanted.intersection(r.dimensions)
    ]


# --- aggregation and triggers -----------------------------------------------------


def _by_dimension(results: Sequence[RoleResult]) -> dict[str, list[tuple[float, float]]]:
    """dimension -> (confidence, score) of each surviving role that scored it."""
    out: dict[str, list[tuple[float, float]]] = {}
    for r in results:
        if r.status == OK:
            for dim, score in r.scores.items():
                out.setdefault(dim, []).append((r.confidence, score))
    return out


def aggregate(results: Sequence[RoleResult]) -> tuple[dict[str, float], float]:
    """Per dimension, the confidence-weighted mean of the surviving roles that scored
    it (plain mean when their confidences are all 0); and their mean confidence.
    Both rounded to 6 decimals, as is the overall score."""
    scores: dict[str, float] = {}
    for dim, cs in _by_dimension(results).items():
        total = sum(c for c, _ in cs)
        mean = sum(c * s for c, s in cs) / total if total > 0 else sum(s for _, s in cs) / len(cs)
        scores[dim] = round(mean, 6)
    ok = [r.confidence for r in results if r.status == OK]
    return scores, (round(sum(ok) / len(ok), 6) if ok else 0.0)


def overall_score(scores: Mapping[str, float], weights: Mapping[str, float]) -> float | None:
    """``Σ w_d s_d / Σ w_d`` over the scored dimensions; None when their weights sum to 0."""
    total = sum(weights.get(d, 0.0) for d in scores)
    return round(sum(weights.get(d, 0.0) * s for d, s in scores.items()) / total, 6) if total > 0 else None


def confident_overall(results: Sequence[RoleResult], weights: Mapping[str, float]) -> float | None:
    """The note's final score: ``Σ w_d × c_r × s_r(d) / Σ w_d × c_r`` over every surviving
    role r and dimension d it scored, so a low-confidence role counts less everywhere (where
    several roles score a dimension this is the weight times their confidence-weighted mean).
    When every such confidence is 0, the plain weighted mean of the per-dimension scores;
    None when the scored dimensions' weights sum to 0."""
    pairs = [(weights.get(d, 0.0), c, sc) for d, cs in _by_dimension(results).items() for c, sc in cs]
    total = sum(w * c for w, c, _ in pairs)
    if total > 0:
        return round(sum(w * c * sc for w, c, sc in pairs) / total, 6)
    return overall_score(aggregate(results)[0], weights)


def role_overall(result: RoleResult, weights: Mapping[str, float]) -> float | None:
    """One role's weighted score over its dimensions (None when their weights sum to 0)."""
    return overall_score(result.scores, weights)


def disagreement_spread(results: Sequence[RoleResult], weights: Mapping[str, float]) -> float:
    """The largest difference between two surviving roles: their weighted scores, and their
    scores of any dimension both scored (the note's "scores differ by > 0.3")."""
    ok = [r for r in results if r.status == OK]
    overalls = [o for o in (role_overall(r, weights) for r in ok) if o is not None]
    spreads = [max(overalls) - min(overalls)] if overalls else []
    spreads += [max(sc for _, sc in cs) - min(sc for _, sc in cs) for cs in _by_dimension(ok).values()]
    return max(spreads, default=0.0)


def escalation_triggers(
    results: Sequence[RoleResult], overall: float | None, *, pass_threshold: float, low_confidence: float,
    disagreement: float, borderline: float, weights: Mapping[str, float] | None = None,
) -> list[str]:
    """Which of low_confidence / disagreement / borderline fire for these results (the
    roles' weighted scores compared under ``weights``; without them, only shared dimensions)."""
    ok = [r for r in results if r.status == OK]
    fired: list[str] = []
    if ok and all(r.confidence < low_confidence for r in ok):
        fired.append(TRIGGER_LOW_CONFIDENCE)
    if weights is not None:
        spread = disagreement_spread(ok, weights)
    else:
        spread = max((max(sc for _, sc in cs) - min(sc for _, sc in cs) for cs in _by_dimension(ok).values()),
                     default=0.0)
    if spread > disagreement + _EPS:
        fired.append(TRIGGER_DISAGREEMENT)
    if overall is not None and abs(overall - pass_threshold) <= borderline + _EPS:
        fired.append(TRIGGER_BORDERLINE)
    return fired


# --- replies ------------------------------------------------------------------------


RoleReply = NamedTuple("RoleReply", [("scores", dict[str, float]), ("confidence", float), ("critique", str)])
EscalationReply = NamedTuple("EscalationReply", [("panel_review", str), ("trust", dict[str, float]),
                                                 ("scores", dict[str, float]), ("verdict", str)])


def _unit(value: Any, where: str, raw: str) -> float:
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            pass
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise JudgeParseError(f"{where} must be a number from 0 to 1, got {value!r}", raw=raw)
    if not 0.0 <= value <= 1.0:
        raise JudgeParseError(f"{where} is {value:g}, outside 0 to 1 (score on the 0 to 1 scale)", raw=raw)
    return float(value)


def _units(obj: Mapping[str, object], key: str, names: Sequence[str], raw: str) -> dict[str, float]:
    given = obj.get(key)
    if not isinstance(given, dict):
        raise JudgeParseError(f'the JSON object needs a "{key}" object', raw=raw)
    given = {str(k).strip().lower(): v for k, v in given.items()}
    missing = [n for n in names if n.lower() not in given]
    if missing:
        raise JudgeParseError(f'"{key}" has no entry for {", ".join(missing)}; give one for each', raw=raw)
    return {n: _unit(given[n.lower()], f'"{key}.{n}"', raw) for n in names}


def _fields(raw: str, *texts: str) -> tuple[dict[str, object], list[str]]:
    """The reply's JSON object (keys lower-cased) and its string fields ``texts`` ("" when absent)."""
    obj: dict[str, object] = {str(k).strip().lower(): v for k, v in extract_json(raw).items()}
    for key in texts:
        if not isinstance(obj.get(key, ""), str):
            raise JudgeParseError(f'"{key}" must be a string, got {obj[key]!r}', raw=raw)
    return obj, [str(obj.get(key, "")).strip() for key in texts]


def parse_role_reply(raw: str, dimensions: Sequence[str]) -> RoleReply:
    """``{"scores": {dim: 0..1}, "confidence": 0..1, "critique": "..."}``; every dimension required."""
    obj, (critique,) = _fields(raw, "critique")
    scores = _units(obj, "scores", dimensions, raw)
    if "confidence" not in obj:
        raise JudgeParseError('the JSON object needs "confidence", a number from 0 to 1', raw=raw)
    return RoleReply(scores, _unit(obj["confidence"], '"confidence"', raw), critique)


def parse_escalation_reply(raw: str, dimensions: Sequence[str], roles: Sequence[str]) -> EscalationReply:
    """``{"panel_review", "trust": {role: 0..1}, "scores": {dim: 0..1}, "verdict"}``."""
    obj, (review, verdict) = _fields(raw, "panel_review", "verdict")
    return EscalationReply(review, _units(obj, "trust", roles, raw), _units(obj, "scores", dimensions, raw), verdict)


_UNIT = UNIT_INTERVAL
_STRING: dict[str, JsonValue] = {"type": "string", "maxLength": 600}  # bounded: a small model under constrained decoding may not stop


def _object(props: dict[str, JsonValue]) -> dict[str, JsonValue]:
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def _units_of(names: Sequence[str]) -> tuple[str, dict[str, JsonValue]]:
    """The format line and the schema of an object giving a 0..1 number for each name."""
    return "{" + ", ".join(f'"{n}": <number from 0 to 1>' for n in names) + "}", _object({n: _UNIT for n in names})


_LABEL = re.compile(r"[A-Za-z][\w.-]{0,63}")
_ROLE_VARS = frozenset({"role_name", "role_instructions", "dimensions", "format", "task", "subject"})
_ESCALATION_VARS = frozenset({"dimensions", "format", "task", "triggers", "panel", "subject"})
_WHY = {
    TRIGGER_LOW_CONFIDENCE: "every judge's confidence is below {low_confidence:g}",
    TRIGGER_DISAGREEMENT: "two judges' scores (their weighted scores, or one dimension both score) differ by more "
                          "than {disagreement:g}",
    TRIGGER_BORDERLINE: "the overall score is within {borderline:g} of the pass mark {pass_threshold:g}",
}


class Panel:
    """Role-based judges in parallel, aggregated, escalated when unsure.

    ``weights`` gives each dimension the roles score its weight in ``overall``.
    Models are resolved through ``runtime`` (a :class:`jurist.Runtime`: its
    settings, limiters and store), or from ``settings`` with calls recorded in
    ``store``; aliases such as ``escalation`` come from the settings' aliases,
    and a reference that cannot be resolved is a ConfigError.
    """

    def __init__(
        self, roles: Sequence[Role], weights: Mapping[str, float], *, runtime: ModelSource | None = None,
        settings: Settings | None = None, store: CallSink | None = None, model: str | None = None,
        escalation_model: str | None = None,
        pass_threshold: float = 0.7, dimension_descriptions: Mapping[str, str] | None = None,
        low_confidence: float = 0.6, disagreement: float = 0.3, borderline: float = 0.05,
        role_timeout: float | None = None, prompts: PromptSource | None = None,
        require_calibration: Requirements = None, calibrate_command: str | None = None,
    ) -> None:
        self.roles = [dataclasses.replace(r, dimensions=list(r.dimensions)) for r in roles]
        # The prompt lab's routes (active versions, A/B tests): given, else the runtime's.
        self.prompts = prompts if prompts is not None else getattr(runtime, "prompts", None)
        self.weights = {d: float(w) for d, w in weights.items()}
        if runtime is not None:
            settings = runtime.settings
        elif settings is None:
            raise ConfigError("a panel needs runtime= (jurist.open()) or settings=")
        self.runtime, self.settings, self.store = runtime, settings, store
        if runtime is None:  # the public edge: a runtime of its own over the settings, its bounds fixed now
            from jurist.runtime import runtime_for

            runtime = runtime_for(None, settings, open_store=False)
        self._source: ModelSource = runtime
        self.pass_threshold, self.low_confidence = pass_threshold, low_confidence
        self.disagreement, self.borderline, self.role_timeout = disagreement, borderline, role_timeout
        self.descriptions = dict(dimension_descriptions or {})
        self._check()
        self._models: dict[str, Model] = {}
        self._templates = {
            PURPOSE_ROLE: builtin(PURPOSE_ROLE).check(_ROLE_VARS, required=set(_ROLE_VARS)),
            PURPOSE_ESCALATION: builtin(PURPOSE_ESCALATION).check(_ESCALATION_VARS, required=set(_ESCALATION_VARS)),
        }
        self._judges = [(role, self._role_judge(role, model or self.settings.judge)) for role in self.roles]
        self._escalation = self._model(escalation_model, "escalation_model") if escalation_model else None
        self.require_calibration = require_calibration
        self.calibrate_command = calibrate_command or CALIBRATE_PANEL
        self._calibration = self.calibration_uses()  # checked against the store before the first judge call

    def _check(self) -> None:
        names = [r.name.lower() for r in self.roles]
        if not names or len(set(names)) != len(names) or not all(_LABEL.fullmatch(r.name) for r in self.roles):
            raise ConfigError("a panel needs roles with unique names (letters, digits, '_', '.', '-')")
        if any(not r.dimensions or len(set(r.dimensions)) != len(r.dimensions) for r in self.roles):
            raise ConfigError("every role needs at least one dimension, each listed once")
        dims = {d for r in self.roles for d in r.dimensions}
        unweighted, unscored = sorted(dims - set(self.weights)), sorted(set(self.weights) - dims)
        if unweighted or unscored:
            raise ConfigError(
                (f"no weight for {', '.join(unweighted)}; " if unweighted else "")
                + (f"no role scores {', '.join(unscored)}; " if unscored else "")
                + "weights must name exactly the roles' dimensions (restrict roles with roles_for(...))"
            )
        if any(not 0 <= w < float("inf") for w in self.weights.values()) or sum(self.weights.values()) <= 0:
            raise ConfigError("weights must be finite, at least 0, and not all 0")
        for name in ("pass_threshold", "low_confidence", "disagreement", "borderline"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(f"{name} must be between 0 and 1, got {getattr(self, name)!r}")
        if self.role_timeout is not None and self.role_timeout <= 0:
            raise ConfigError("role_timeout must be a positive number of seconds, or None")

    def _model(self, ref: str | None, what: str) -> Model:
        """The Model for a reference or alias, one per resolved reference."""
        if not ref:
            raise ConfigError(f"{what} has no model and the panel no default: {HOW_TO_CONFIGURE}")
        full = resolve_ref(ref, self.settings)
        if full.startswith("local/"):
            raise ConfigError(f"{what}: {full} scores rubric items only; a panel needs a chat model")
        if full not in self._models:
            self._models[full] = self._source.model(full, sink=self.store)
        return self._models[full]

    def _judge(self, model: Model, purpose: str, hint: str, schema: dict[str, JsonValue]) -> Judge:
        s = self.settings
        return Judge(model, self._templates[purpose], purpose=purpose, format_hint=hint, schema=schema,
                     schema_name=purpose, temperature=s.temperature, seed=s.seed, max_tokens=s.max_tokens,
                     prompts=self.prompts)

    def _role_judge(self, role: Role, default: str | None) -> Judge:
        scores_hint, scores_schema = _units_of(role.dimensions)
        hint = f'{{"scores": {scores_hint}, "confidence": <number from 0 to 1>, "critique": "<1 to 3 sentences>"}}'
        schema = _object({"scores": scores_schema, "confidence": _UNIT, "critique": _STRING})
        return self._judge(self._model(role.model or default, f"role {role.name!r}"), PURPOSE_ROLE, hint, schema)

    def dimension_hash(self, role: Role, dimension: str) -> str:
        """The hash of what a role's prompt shows of a dimension: the role's name and instructions
        and the dimension's description (a calibration holds for these)."""
        return text_hash(role.name, role.instructions or _GENERIC_INSTRUCTIONS, dimension,
                         self.descriptions.get(dimension, ""))

    def role_judges(self) -> list[tuple[Role, Judge]]:
        """Each role and its judge (model and ``panel_role`` template)."""
        return list(self._judges)

    def identities(self) -> list[tuple[Role, JudgeIdentity]]:
        """Each role's judge on each of its dimensions, as calibrations know it."""
        return [(role, identity_of(judge, d, self.dimension_hash(role, d)))
                for role, judge in self._judges for d in role.dimensions]

    def calibration_uses(self, requirements: Requirements = None) -> list[JudgeUse]:
        """The role judges whose dimensions require a calibration (by ``requirements``, default the
        panel's ``require_calibration``), with their bars."""
        wanted = self.require_calibration if requirements is None else requirements
        return [JudgeUse(identity_of(judge, d, self.dimension_hash(role, d)), bar, self.calibrate_command, routed=judge)
                for role, judge in self._judges for d in role.dimensions
                if (bar := requirement_for(wanted, d)) is not None]

    async def check_calibration(self) -> None:
        """With ``require_calibration``: raise :class:`~jurist.errors.CalibrationRequired` unless the
        runtime's store holds a good enough calibration of every role judge on each dimension that
        requires one (looked up once per panel)."""
        if self._calibration:
            source = self.runtime if isinstance(self.runtime, StoreSource) else None
            await require_calibrated(source, self._calibration)
            self._calibration = []

    def _dimension_list(self, dims: Sequence[str]) -> str:
        return "\n".join(f"- {d}: {self.descriptions[d]}" if d in self.descriptions else f"- {d}" for d in dims)

    async def evaluate(self, subject: Mapping[str, str], *, task: str, trace_id: str | None = None) -> PanelResult:
        """Run every role at once, aggregate, and escalate if a trigger fires and an
        escalation model is set. Role and escalation failures are data in the
        result; only the caller's mistakes (InputError, ConfigError) raise."""
        started = time.perf_counter()
        material, task = _material(subject), " ".join(str(task).split())
        results = await self.role_results(subject, task=task, trace_id=trace_id)
        panel_scores, confidence = aggregate(results)
        panel_overall = confident_overall(results, self.weights)
        result = PanelResult(status=SKIPPED, scores={}, overall=None, confidence=confidence, passed=None,
                             panel_scores=panel_scores, panel_overall=panel_overall, role_results=results,
                             pass_threshold=self.pass_threshold)
        if panel_overall is None:
            why = ("every role failed: " + "; ".join(f"{r.role}: {r.error}" for r in results)
                   if all(r.status == FAILED for r in results) else "the surviving roles scored only weight-0 dimensions")
            result = result.model_copy(update={"skip_reason": why})
        else:
            triggers = escalation_triggers(
                results, panel_overall, pass_threshold=self.pass_threshold, low_confidence=self.low_confidence,
                disagreement=self.disagreement, borderline=self.borderline, weights=self.weights)
            result = result.model_copy(update={"status": OK, "scores": panel_scores, "overall": panel_overall,
                                               "triggers": triggers})
            if triggers and self._escalation is not None:
                escalation = await self._escalate(result, task, material, trace_id)
                update: dict[str, Any] = {"escalation": escalation}
                if escalation.status == OK:
                    update.update(scores=escalation.scores, overall=overall_score(escalation.scores, self.weights))
                result = result.model_copy(update=update)
            result = result.model_copy(update={
                "passed": result.overall is not None and result.overall >= self.pass_threshold - _EPS})
        tokens = sum(r.tokens_used for r in results) + (result.escalation.tokens_used if result.escalation else 0)
        return result.model_copy(update={"latency_ms": round((time.perf_counter() - started) * 1000.0, 3),
                                         "tokens_used": tokens})

    async def role_results(self, subject: Mapping[str, str], *, task: str, trace_id: str | None = None,
                           check: bool = True) -> list[RoleResult]:
        """Every role's own scores of ``subject`` (all at once; no aggregation, no escalation):
        what :meth:`evaluate` starts from, and what a calibration compares with people's labels
        (``check=False``: without the ``require_calibration`` look-up, for calibrating)."""
        material, task = _material(subject), " ".join(str(task).split())
        if not task:
            raise InputError("task is empty: say in one line what is judged")
        if check:
            await self.check_calibration()
        gathered = await asyncio.gather(
            *(self._run_role(role, judge, task, material, trace_id) for role, judge in self._judges),
            return_exceptions=True,
        )
        for item in gathered:  # role failures are results already; anything else is a bug or a usage error
            if isinstance(item, BaseException):
                raise item
        return [r for r in gathered if isinstance(r, RoleResult)]

    async def _call(self, judge: Judge, variables: dict[str, str], parse: Callable[[str], T], trace_id: str | None,
                    timeout: float | None) -> tuple[Outcome[T], str, float, int, str]:
        """One judge call under ``timeout`` (role_timeout): (outcome of the reply, last raw text, latency ms,
        tokens, the hash of the template text used). A time-out, a reply still invalid after the re-ask or
        a model error is a failed outcome."""
        started = time.perf_counter()
        completions: list[Completion] = []
        used = await judge.template_for(variables, trace_id=trace_id)  # the prompt lab's version for this call

        async def call() -> T:
            reply, done = await judge.run(variables, parse, trace_id=trace_id, template=used)
            completions.extend(done)
            return reply

        outcome = await guarded(call, timeout=timeout, budget="role_timeout", reason=_reason,
                                catch=(JudgeParseError, ModelError))
        if outcome.failed:  # a reply that could not be parsed still cost its calls
            completions = list(getattr(outcome.error, "completions", None) or [])
        if not completions:  # no call came back: the wall time is all there is
            return outcome, "", round((time.perf_counter() - started) * 1000.0, 3), 0, used.hash
        latency = round(sum(c.latency_ms for c in completions), 3)
        tokens = sum(c.input_tokens + c.output_tokens for c in completions)
        return outcome, completions[-1].text, latency, tokens, used.hash

    async def _run_role(self, role: Role, judge: Judge, task: str, material: str, trace_id: str | None) -> RoleResult:
        variables = {"role_name": role.name, "dimensions": self._dimension_list(role.dimensions),
                     "role_instructions": role.instructions or _GENERIC_INSTRUCTIONS,
                     "format": judge.format_hint, "task": task, "subject": material}
        parse = functools.partial(parse_role_reply, dimensions=role.dimensions)
        outcome, raw, latency, tokens, template_hash = await self._call(judge, variables, parse, trace_id,
                                                                        self.role_timeout)
        reply = outcome.value or RoleReply({}, 0.0, "")
        return RoleResult(role=role.name, model=judge.model.name, dimensions=list(role.dimensions),
                          scores=reply.scores, confidence=reply.confidence, critique=reply.critique, raw_response=raw,
                          latency_ms=latency, tokens_used=tokens, status=outcome.status, error=outcome.reason,
                          template_hash=template_hash)

    async def _escalate(self, panel: PanelResult, task: str, material: str, trace_id: str | None) -> Escalation:
        """One call to the escalation model; a failure is recorded and the panel's scores stand."""
        assert self._escalation is not None and panel.panel_overall is not None
        dims, roles = list(panel.panel_scores), [r.role for r in panel.role_results if r.status == OK]
        (trust_hint, trust_schema), (scores_hint, scores_schema) = _units_of(roles), _units_of(dims)
        hint = (f'{{"panel_review": "<2 to 4 sentences>", "trust": {trust_hint}, '
                f'"scores": {scores_hint}, "verdict": "<1 to 3 sentences>"}}')
        schema = _object({"panel_review": _STRING, "trust": trust_schema, "scores": scores_schema, "verdict": _STRING})
        judge = self._judge(self._escalation, PURPOSE_ESCALATION, hint, schema)
        why = "\n".join("- " + _WHY[t].format(**vars(self)) for t in panel.triggers)
        variables = {"dimensions": self._dimension_list(dims), "format": hint, "task": task, "subject": material,
                     "triggers": why, "panel": self._panel_text(panel)}
        parse = functools.partial(parse_escalation_reply, dimensions=dims, roles=roles)
        outcome, _, latency, tokens, _ = await self._call(judge, variables, parse, trace_id, None)
        reply = outcome.value or EscalationReply("", {}, {}, "")
        return Escalation(triggers=list(panel.triggers), model=judge.model.name, panel_review=reply.panel_review,
                          trust_decisions=reply.trust, final_verdict=reply.verdict, scores=reply.scores,
                          latency_ms=latency, tokens_used=tokens, status=outcome.status, error=outcome.reason)

    def _panel_text(self, panel: PanelResult) -> str:
        """Each role's scores, confidence and (quoted) critique, then the aggregate."""
        parts = []
        for r in panel.role_results:
            if r.status != OK:
                parts.append(f"### {r.role}\nfailed; left out of the panel")
                continue
            listed = ", ".join(f"{d} = {s:.2f}" for d, s in r.scores.items())
            parts.append(f"### {r.role}\nconfidence: {r.confidence:.2f}\nscores: {listed}\ncritique:\n"
                         + quote("text", r.critique or "(none)", f"{r.role}.critique"))
        listed = ", ".join(f"{d} = {s:.2f}" for d, s in panel.panel_scores.items())
        parts.append(f"### Panel (confidence-weighted)\nscores: {listed}\n"
                     f"weighted overall: {panel.panel_overall:.3f} (pass mark {self.pass_threshold:g})")
        return "\n\n".join(parts)

    async def aclose(self) -> None:
        """Close the models this panel resolved."""
        for model in self._models.values():
            await model.aclose()


def _reason(exc: BaseException) -> str:
    """A failed call's reason: a parse error as it is (it says what was wrong), else ``ErrorType: message``."""
    return str(exc) if isinstance(exc, JudgeParseError) else f"{type(exc).__name__}: {exc}"


def _material(subject: Mapping[str, str]) -> str:
    """The labelled texts, each escaped and quoted as ``<text id="label">``."""
    if not subject:
        raise InputError("subject is empty: give at least one labelled text, e.g. {'answer': '...'}")
    for label, text in subject.items():
        if not isinstance(label, str) or not _LABEL.fullmatch(label):
            raise InputError(f"subject label {label!r}: use a letter, then letters, digits, '_', '.' or '-'")
        if not isinstance(text, str):
            raise InputError(f"subject[{label!r}] must be a string, got {type(text).__name__}")
    return "\n".join(quote("text", text, label) for label, text in subject.items())
