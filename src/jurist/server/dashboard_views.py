"""What the trace and research pages show, read from a stored evaluation.

A payload is read as its kind's model (:func:`jurist.payloads.read_payload`:
rubric result.json, the gate's record, the research EvaluationRecord, a
checklist turn); these functions turn one into plain dicts and lists for the
templates. A payload that no model reads is not an error of the page: it is
shown as stored, with the reason. Nothing here marks text as safe: the
templates escape everything.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable


from jurist.checklist.records import ChecklistTurn
from jurist.errors import PayloadError
from jurist.gate.records import GateRecord
from jurist.gate.types import CALL_GENERATION
from jurist.payloads import read_payload
from jurist.research import stages as st
from jurist.research.config import StageConfig
from jurist.research.records import (
    AnswerAttempt,
    AnswerEvaluation,
    EscalationResult,
    EvaluationRecord,
    EvaluatorResult,
    IterationDecision,
    PlanAttempt,
    PlanEvaluation,
    RetrievalEvaluation,
)
from jurist.rubrics.results import RubricResult

STAGE_TITLES = {st.PLAN: "Stage 1: Planning", st.RETRIEVAL: "Stage 2: Retrieval", st.ANSWER: "Stage 3: Answer"}


# -- template filters ---------------------------------------------------------
def num(value: Any, digits: int = 2) -> str:
    if value is None or isinstance(value, bool):
        return "—"
    try:
        return f"{float(value):.{digits}f}"
    except (TypeError, ValueError):
        return str(value)


def pct(value: Any, digits: int = 1) -> str:
    if value is None or isinstance(value, bool):
        return "—"
    try:
        return f"{float(value) * 100:.{digits}f}%"
    except (TypeError, ValueError):
        return str(value)


def count(value: Any) -> str:
    if value is None:
        return "—"
    try:
        return f"{int(value):,}"
    except (TypeError, ValueError):
        return str(value)


def when(value: Any) -> str:
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M")
    return "—" if value is None else str(value)[:16].replace("T", " ")


def label(key: Any) -> str:
    """``intent_alignment`` -> ``Intent alignment``."""
    text = str(key).replace("_", " ").replace(".", " · ")
    return text[:1].upper() + text[1:]


def pretty(value: Any) -> str:
    """A JSON value as indented text (for <pre>); strings as they are."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def width(value: Any) -> int:
    """A 0..1 score as a bar width in percent (clamped)."""
    try:
        return max(0, min(100, round(float(value) * 100)))
    except (TypeError, ValueError):
        return 0


FILTERS = {"num": num, "pct": pct, "count": count, "when": when, "label": label, "pretty": pretty, "width": width}


# -- helpers -------------------------------------------------------------------
def _messages(call: dict[str, Any]) -> list[dict[str, str]]:
    messages = call.get("messages")  # a stored llm_calls row
    out = []
    for m in messages if isinstance(messages, list) else []:
        if isinstance(m, dict):
            content = m.get("content")
            out.append({"role": str(m.get("role", "?")), "content": content if isinstance(content, str)
                        else pretty(content)})
    return out


def call_view(call: dict[str, Any]) -> dict[str, Any]:
    return {**call, "message_list": _messages(call),
            "tokens": (call.get("input_tokens") or 0) + (call.get("output_tokens") or 0)}


# -- per kind --------------------------------------------------------------------
@dataclass
class RubricView:
    """One rubric's score on the trace page."""

    id: str
    name: str
    score: float | None
    max_score: float | None
    status: str
    weight: float
    reasoning: str | None
    judge_model: str | None
    items: list[Any]  # the rubric's checklist items (models the template reads by attribute)
    score_range: tuple[float, float] | None = None  # undecided items: where the score lies


@dataclass
class RubricSection:
    rubrics: list[RubricView]
    session_id: str
    summary: Any
    status: str


def rubric_section(result: RubricResult) -> RubricSection:
    rubrics = [RubricView(id=r.rubric_id, name=r.rubric_name or r.rubric_id, score=r.final_score,
                          max_score=r.max_score, status=r.file_status, weight=r.weight, reasoning=r.reasoning,
                          judge_model=r.judge_model, items=list(r.items or []), score_range=r.score_range)
               for r in result.rubric_scores]
    return RubricSection(rubrics=rubrics, session_id=result.session_id, summary=result.summary, status=result.status)


@dataclass
class GateAttemptView:
    """One attempt of a gate record, with its evaluation (None: not evaluated)."""

    number: int
    kind: str
    text: str
    latency_ms: float | None
    evaluation: Any
    issues: list[Any]


@dataclass
class GateSection:
    attempts: list[GateAttemptView]
    accepted: int | None
    accept_reason: Any
    answer: str | None
    strategy: Any
    evaluator: Any
    skipped: bool
    skip_reason: str | None
    error: str | None
    before: GateAttemptView | None
    after: GateAttemptView | None
    calls: Any


def gate_section(record: GateRecord) -> GateSection:
    attempts = []
    for a in record.attempts:
        ev = record.evaluation_of(a)
        attempts.append(GateAttemptView(number=a.number, kind=a.kind, text=a.text, latency_ms=a.latency_ms,
                                        evaluation=ev, issues=list(ev.issues) if ev is not None else []))
    accepted = record.accepted_attempt
    before = attempts[0] if len(attempts) > 1 else None
    after = next((a for a in attempts if a.number == accepted), attempts[-1] if attempts else None)
    return GateSection(attempts=attempts, accepted=accepted, accept_reason=record.accept_reason,
                       answer=record.answer, strategy=record.strategy, evaluator=record.evaluator,
                       skipped=record.evaluation_skipped, skip_reason=record.skip_reason, error=record.error,
                       before=before, after=after if before is not None else None, calls=record.llm_calls)


@dataclass
class RecalledView:
    id: str
    confidence: float
    observation: str | None


@dataclass
class ChecklistSection:
    title: str | None
    learner: str | None
    mode: str | None
    message_seq: int
    status: str
    recalled: list[RecalledView]
    unchecked: list[str]
    feedback: str | None
    dropped: list[str]
    undecided: list[str]
    recalled_count: int | None
    total_points: int | None
    session_id: str
    reason: str | None


def checklist_section(turn: ChecklistTurn) -> ChecklistSection:
    return ChecklistSection(
        title=turn.title, learner=turn.learner, mode=turn.mode, message_seq=turn.message_seq, status=turn.status,
        recalled=[RecalledView(id=k, confidence=v, observation=turn.observations.get(k))
                  for k, v in turn.recalled.items()],
        unchecked=list(turn.unchecked), feedback=turn.feedback, dropped=list(turn.dropped_ids),
        undecided=list(turn.undecided), recalled_count=turn.recalled_count, total_points=turn.total_points,
        session_id=turn.session_id, reason=turn.reason)


def _sections(rec: EvaluationRecord) -> list[tuple[str, str, Any]]:
    """(key, title, section or None) of the three stages, in order."""
    return [(st.PLAN, STAGE_TITLES[st.PLAN], rec.plan_evaluation),
            (st.RETRIEVAL, STAGE_TITLES[st.RETRIEVAL], rec.retrieval_evaluation),
            (st.ANSWER, STAGE_TITLES[st.ANSWER], rec.answer_evaluation)]


@dataclass
class StageSummary:
    key: str
    title: str
    overall: float | None
    passed: bool | None
    skipped: bool
    skip_reason: str | None


@dataclass
class ResearchSummary:
    query: str
    overall: float | None
    stages: list[StageSummary]


def research_summary(rec: EvaluationRecord) -> ResearchSummary:
    stages = [StageSummary(key=key, title=title, overall=s.overall if s else None, passed=s.passed if s else None,
                           skipped=bool(s and s.evaluation_skipped), skip_reason=s.skip_reason if s else None)
              for key, title, s in _sections(rec)]
    return ResearchSummary(query=rec.user_query, overall=rec.overall_score, stages=stages)


Section = RubricSection | GateSection | ChecklistSection | ResearchSummary
_SECTIONS: dict[type, Callable[[Any], Section]] = {
    RubricResult: rubric_section, GateRecord: gate_section, ChecklistTurn: checklist_section,
    EvaluationRecord: research_summary,
}


def _asked(calls: list[dict[str, Any]]) -> str | None:
    """The user's question of a gate record stored before records kept it: the last user
    message of its first generation call (a generator function makes none)."""
    for call in calls:
        if call.get("purpose") == CALL_GENERATION:
            users = [m["content"] for m in _messages(call) if m["role"] == "user"]
            return users[-1] if users else None
    return None


def trace_title(kind: str | None, payload: Any, turn: dict[str, Any] | None,
                calls: list[dict[str, Any]]) -> str | None:
    """What a trace is about, as its title: the user's question (gate), the learner's message
    (checklist), the query (research); None: the subject id titles it."""
    if isinstance(payload, GateRecord):
        return payload.question or _asked(calls)
    if isinstance(payload, ChecklistTurn):
        return turn.get("message") if turn else None
    if isinstance(payload, EvaluationRecord):
        return payload.user_query
    return None


def trace_view(found: dict[str, Any]) -> dict[str, Any]:
    """The trace page: the row, its payload read as its kind's model (a payload that no
    model reads is shown as stored, with the reason), its title, scores, calls, patterns;
    a checklist turn's learner message (``turn``)."""
    ev = found["evaluation"]
    raw = ev.get("payload")
    kind, error, payload = ev.get("kind"), None, None
    section: Section | None = None
    if not (isinstance(raw, dict) and raw.get("synthetic")):  # generated history has no payload to show
        try:
            payload = read_payload(kind, raw)
        except PayloadError as exc:
            error = str(exc)
        else:
            kind, section = payload.kind, _SECTIONS[type(payload)](payload)
    turn = found.get("turn")
    return {"evaluation": ev, "kind": kind, "section": section or {}, "known_payload": section is not None,
            "payload_error": error, "payload_text": pretty(raw), "scores": found["scores"],
            "calls": [call_view(c) for c in found["calls"]], "patterns": found["patterns"], "turn": turn,
            "title": trace_title(kind, payload, turn, found["calls"])}


# -- research runtime view ----------------------------------------------------------
def _stage_configs(rec: EvaluationRecord) -> dict[str, StageConfig]:
    """The stages' thresholds as configured for this record (none when the record has no
    configuration, or one this version cannot read)."""
    parsed = rec.stages_config()
    return {key: parsed.of(key) for key in st.STAGE_NAMES} if parsed is not None else {}


@dataclass
class DimensionView:
    key: str
    label: str
    score: float | None
    threshold: float | None = None
    below: bool = False


def _dimensions(scores: dict[str, float], config: StageConfig | None) -> list[DimensionView]:
    out = []
    for dim, score in scores.items():
        cfg = config.dimensions.get(dim) if config else None
        threshold = cfg.threshold if cfg else None
        below = threshold is not None and score < threshold
        out.append(DimensionView(key=dim, label=label(dim), score=score, threshold=threshold, below=below))
    return out


@dataclass
class CritiqueView:
    role: str
    model: str
    text: str | None
    error: str | None
    confidence: float | None


def _critiques(results: list[EvaluatorResult]) -> list[CritiqueView]:
    return [CritiqueView(role=r.role, model=r.model, text=r.critique, error=r.error, confidence=r.confidence)
            for r in results if r.critique or r.error]


@dataclass
class EscalationView:
    trigger: Any
    triggers: list[Any]
    model: str | None
    review: Any
    verdict: Any
    scores: Any
    status: Any
    error: str | None


def _escalation(e: EscalationResult | None) -> EscalationView | None:
    if e is None:
        return None
    return EscalationView(trigger=e.trigger, triggers=list(e.triggers), model=e.model, review=e.panel_review,
                          verdict=e.final_verdict, scores=e.scores, status=e.status, error=e.error)


@dataclass
class IssueView:
    issue: str
    fix: str


@dataclass
class DecisionView:
    mode: Any
    critique: Any
    feedback: Any
    failure_type: Any
    issues: list[IssueView]


def _decision(d: IterationDecision | None) -> DecisionView | None:
    if d is None:
        return None
    return DecisionView(mode=d.mode, critique=d.critique, feedback=d.feedback_to_planner, failure_type=d.failure_type,
                        issues=[IssueView(issue=i.issue, fix=i.fix) for i in d.specific_issues])


@dataclass
class AttemptView:
    """One attempt of a research stage (retrieval: its one evaluation)."""

    number: int
    total: int
    passed: bool | None
    overall: float | None
    skipped: bool
    skip_reason: str | None
    dimensions: list[DimensionView]
    critiques: list[CritiqueView]
    escalation: EscalationView | None
    note: str | None
    failed_rules: list[Any] = field(default_factory=list)
    decision: DecisionView | None = None
    plan: Any = None
    answer: Any = None
    feedback: Any = None


def _attempt(a: PlanAttempt | AnswerAttempt | RetrievalEvaluation, number: int, total: int,
             config: StageConfig | None) -> AttemptView:
    view = AttemptView(
        number=number, total=total, passed=a.passed, overall=a.overall,
        skipped=a.evaluation_skipped, skip_reason=a.skip_reason,
        dimensions=_dimensions(a.aggregated_scores, config), critiques=_critiques(a.evaluator_results),
        escalation=_escalation(a.escalation), note=a.scoring_note)
    if isinstance(a, PlanAttempt):
        view.number, view.failed_rules = a.attempt_number or number, list(a.failed_rules)
        view.decision, view.plan = _decision(a.iteration_decision), a.plan
    elif isinstance(a, AnswerAttempt):
        view.number, view.answer, view.feedback = a.attempt_number or number, a.answer, a.feedback
    elif not a.aggregated_scores:
        view.dimensions = _dimensions(a.scores, config)
    return view


@dataclass
class DecisionRecordView:
    """What the user chose at a severe-failure notice, and how."""

    reason: Any
    choice: Any
    by: Any
    default: Any
    timeout: Any
    when: Any


@dataclass
class StageView:
    """One stage's box on the research page (``present`` False: the record has no such stage)."""

    key: str
    title: str
    present: bool
    overall: float | None
    passed: bool | None
    pass_threshold: float | None
    skipped: bool
    skip_reason: str | None
    note: str | None = None
    attempts: list[AttemptView] = field(default_factory=list)
    final_dimensions: list[DimensionView] = field(default_factory=list)
    flagged_severe: bool = False
    severe: list[DimensionView] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    all_warnings: list[str] = field(default_factory=list)
    escalated: bool = False
    meta_review: EscalationView | None = None
    chosen: int | None = None
    regenerated: bool | None = None
    iterations: int | None = None
    decisions: list[DecisionRecordView] = field(default_factory=list)


def _stage(key: str, title: str, s: PlanEvaluation | RetrievalEvaluation | AnswerEvaluation | None,
           config: StageConfig | None) -> StageView:
    if s is None:
        return StageView(key=key, title=title, present=False, overall=None, passed=None,
                         pass_threshold=config.pass_threshold if config else None, skipped=False, skip_reason=None)
    attempts: list[Any] = [s] if isinstance(s, RetrievalEvaluation) else list(s.attempts)  # retrieval: no loop
    max_attempts = s.max_attempts if isinstance(s, PlanEvaluation) else None
    total = max(len(attempts), max_attempts or 0) if key == st.PLAN else len(attempts)
    final = s.aggregated_scores if isinstance(s, RetrievalEvaluation) else s.final_scores
    flagged = isinstance(s, RetrievalEvaluation) and s.flagged_severe
    severe = s.severe_dimensions if isinstance(s, RetrievalEvaluation) else []
    warnings = [str(w) for w in s.warnings]
    return StageView(
        key=key, title=title, present=True, overall=s.overall, passed=s.passed,
        pass_threshold=config.pass_threshold if config else None, skipped=s.evaluation_skipped,
        skip_reason=s.skip_reason, attempts=[_attempt(a, i + 1, total, config) for i, a in enumerate(attempts)],
        final_dimensions=_dimensions(final, config), flagged_severe=flagged,
        severe=[DimensionView(key=d, label=label(d), score=final.get(d)) for d in severe],
        warnings=[w for w in warnings if not (flagged and "quality warning" in w.lower())],
        all_warnings=warnings,
        escalated=isinstance(s, PlanEvaluation) and s.escalated_to_large_model,
        meta_review=_escalation(s.meta_review) if isinstance(s, PlanEvaluation) else None,
        chosen=s.chosen_attempt if isinstance(s, PlanEvaluation) else (
            s.final_attempt if isinstance(s, AnswerEvaluation) else None),
        regenerated=s.regenerated if isinstance(s, AnswerEvaluation) else None,
        iterations=s.total_iterations if isinstance(s, PlanEvaluation) else None, note=s.scoring_note,
    )


def research_view(ev: dict[str, Any]) -> dict[str, Any]:
    """The runtime view: one box per stage with its score and pass mark, attempts, critiques,
    escalation, skipped and severe-failure notices. A payload that is not a readable research
    record gives an empty view with ``payload_error`` saying why."""
    try:
        rec = read_payload(ev["kind"], ev["payload"])  # a stored row: kind and payload columns
        if not isinstance(rec, EvaluationRecord):
            raise PayloadError(f"the stored payload is a {rec.kind} payload, not a research record", kind=rec.kind)
    except PayloadError as exc:
        return {"query": None, "overall": None, "skipped": False, "skip_reason": None, "stages": [], "warnings": [],
                "payload_error": str(exc)}
    configs = _stage_configs(rec)
    stages = [_stage(key, title, s, configs.get(key)) for key, title, s in _sections(rec)]
    for stage in stages:  # what the user chose at a severe-failure notice, and how
        stage.decisions = [DecisionRecordView(reason=d.reason, choice=d.choice, by=d.by, default=d.default,
                                              timeout=d.timeout, when=d.timestamp)
                           for d in rec.decisions if d.stage == stage.key]
    shown = {w for s in stages for w in s.all_warnings}
    return {"query": rec.user_query, "overall": rec.overall_score, "skipped": rec.evaluation_skipped,
            "skip_reason": rec.skip_reason, "stages": stages,
            "warnings": [str(w) for w in rec.warnings if str(w) not in shown], "payload_error": None}
