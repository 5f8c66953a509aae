"""Stage 1: plan evaluation, the refinement loop of the note's "Iteration Strategy".

:func:`evaluate_plan` asks the user's planner for a plan, has the evaluator
score it, and on failure asks a critic (purpose ``plan_critic``) for feedback
and asks the planner again:

* attempt 1 fails -> the critic's recommended mode;
* attempt ``escalation_after_attempt`` (2) or later fails -> ``full_regeneration``;
* the last attempt (``max_attempts``, 3) fails -> the escalation model reviews the
  attempts (purpose ``plan_meta_review``) and the best attempt (highest overall,
  the latest of equals) is used.

An attempt passes when its overall reaches the pass threshold and no dimension
rule fires (``always``/``iterate``: the dimension is below its threshold;
``if_borderline``: below its threshold while the overall is within
``escalation.borderline`` of the pass threshold).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from functools import partial
from typing import Any, Awaitable, Callable, Protocol

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from jurist.errors import CalibrationRequired, JudgeParseError, ModelError
from jurist.judges.judge import Judge
from jurist.judges.prompting import quote
from jurist.judges.parsing import extract_json
from jurist.judges.templates import PromptSource, builtin
from jurist.models.base import Completion
from jurist.models.model import Model
from jurist.research import stages as st
from jurist.research.config import ResearchConfig
from jurist.judges.outcome import describe, guarded, timed_out
from jurist.research.events import AttemptStarted, Emit, Iterating, Skipped, StageDone, ignore, scored
from jurist.research.failsafe import Guarded, StageOptions, disabled, evaluate_subject, fail, logger
from jurist.research.records import (
    EscalationResult, IterationDecision, Issue, Mode, PlanAttempt, PlanEvaluation, fill_stage, unscored_note,
)

PURPOSE_CRITIC = "plan_critic"
PURPOSE_META_REVIEW = "plan_meta_review"

Planner = Callable[[str, "IterationDecision | None", "str | None"], Awaitable[Any]]

MODE_GUIDANCE = {
    st.TARGETED_FIX: "regenerate only the failing components, applying the listed fixes",
    st.FULL_REGENERATION: "redo the entire plan, taking the critique into account",
    st.ALTERNATIVE_APPROACH: "the query was misunderstood: propose a completely different strategy",
}


# --- plans as data ----------------------------------------------------------------

class GivenPlan(BaseModel):
    """The fields jurist reads of a plan given as a JSON object (the rest is the planner's own):
    its search queries (the first of ``search_queries``, ``searchQueries``, ``queries``,
    ``search_terms`` that is a list; items are strings or objects with ``query``) and what it says
    it will look for (``objective``, ``intent``, ...)."""

    model_config = ConfigDict(extra="ignore")
    search_queries: object = None
    search_queries_camel: object = Field(default=None, alias="searchQueries")
    queries: object = None
    search_terms: object = None
    objective: object = None
    intent: object = None
    interpretation: object = None
    goal: object = None
    summary: object = None
    question: object = None

    def query_list(self) -> list[str]:
        """The search queries, stripped, empty ones left out."""
        for items in (self.search_queries, self.search_queries_camel, self.queries, self.search_terms):
            if isinstance(items, list):
                out = [str(_GivenQuery.model_validate(q).query) if isinstance(q, dict) else str(q) for q in items]
                return [q.strip() for q in out if q.strip()]
        return []

    def intents(self) -> list[str]:
        """What the plan says it will look for, in the order objective, intent, interpretation,
        goal, summary, question (string fields only)."""
        fields = (self.objective, self.intent, self.interpretation, self.goal, self.summary, self.question)
        return [f for f in fields if isinstance(f, str)]


class _GivenQuery(BaseModel):
    model_config = ConfigDict(extra="ignore")
    query: object = ""


def plan_text(plan: Any) -> str:
    """The plan as text for a judge: strings as they are, anything else as JSON."""
    return plan if isinstance(plan, str) else json.dumps(plan, indent=2, ensure_ascii=False, default=str)


def plan_queries(plan: Any) -> list[str]:
    """The plan's search queries: a ``search_queries`` (or ``queries``) list of a
    dict plan (items may be strings or dicts with ``query``), or the non-empty
    lines of a text plan (list markers stripped)."""
    if isinstance(plan, dict):
        return GivenPlan.model_validate(plan).query_list()
    if isinstance(plan, list):
        return [str(q).strip() for q in plan if str(q).strip()]
    lines = [ln.strip().lstrip("-*0123456789.) ").strip() for ln in str(plan).splitlines()]
    return [ln for ln in lines if ln]


# --- the critic ---------------------------------------------------------------------


class PlanCritic(Protocol):
    """Feedback on a failed plan, and the final review when every attempt failed."""

    async def critique(self, query: str, attempt: PlanAttempt, history: list[PlanAttempt], *,
                       trace_id: str | None = None) -> IterationDecision:
        ...

    async def meta_review(self, query: str, best: PlanAttempt, attempts: list[PlanAttempt], *,
                          trace_id: str | None = None) -> EscalationResult | None:
        ...


class _IssueReply(BaseModel):
    model_config = ConfigDict(extra="ignore")
    issue: str
    fix: str = ""


class CriticReply(BaseModel):
    """The critic's JSON (the note's "Critic Feedback Structure")."""

    model_config = ConfigDict(extra="ignore")
    passed: bool
    scores: dict[str, float] = Field(default_factory=dict)
    failure_type: str | None = None
    critique: str
    recommendation: str
    specific_issues: list[_IssueReply] = Field(default_factory=list)


def parse_critic(raw: str) -> CriticReply:
    """The critic's reply, validated; JudgeParseError says what is wrong (for the re-ask)."""
    obj = {str(k).lower(): v for k, v in extract_json(raw).items()}
    try:
        reply = CriticReply.model_validate(obj)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise JudgeParseError(f"the critic's JSON is invalid: {problems}", raw=raw) from None
    if reply.recommendation not in st.MODES:
        raise JudgeParseError(f'"recommendation" must be one of {", ".join(st.MODES)}, '
                              f"got {reply.recommendation!r}", raw=raw)
    bad = {k: v for k, v in reply.scores.items() if not 0.0 <= v <= 1.0}
    if bad:
        raise JudgeParseError(f'"scores" must be numbers from 0 to 1; got {bad}', raw=raw)
    return reply


def critic_schema(dimensions: list[str]) -> dict[str, JsonValue]:
    unit: dict[str, JsonValue] = {"type": "number", "minimum": 0, "maximum": 1}
    issue: dict[str, JsonValue] = {"type": "object",
                                   "properties": {"issue": {"type": "string"}, "fix": {"type": "string"}},
                                   "required": ["issue", "fix"], "additionalProperties": False}
    props: dict[str, JsonValue] = {
        "passed": {"type": "boolean"},
        "scores": {"type": "object", "properties": {d: unit for d in dimensions},
                   "required": list[JsonValue](dimensions), "additionalProperties": False},
        "failure_type": {"type": ["string", "null"]},
        "critique": {"type": "string"},
        "recommendation": {"type": "string", "enum": list(st.MODES)},
        "specific_issues": {"type": "array", "items": issue},
    }
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


_HINT = ('{"passed": false, "scores": {"<dimension>": <0..1>}, "failure_type": "<snake_case or null>", '
         '"critique": "<text>", "recommendation": "targeted_fix" | "full_regeneration" | "alternative_approach", '
         '"specific_issues": [{"issue": "<text>", "fix": "<text>"}]}')
_JOB_CRITIC = ("Explain why the plan failed and tell the planner exactly how to fix it: recommend an iteration "
               "mode and list the specific issues with their fixes.")
_JOB_META = ("Every attempt failed. Review the panel's scores and critiques of the best attempt below in the light "
             "of the earlier attempts (a meta-evaluation): decide whether the panel judged it fairly and give your "
             "own final verdict and scores. The research proceeds with this plan whatever you decide.")


def _evaluation_text(a: PlanAttempt) -> str:
    lines = [f"overall: {a.overall if a.overall is None else round(a.overall, 3)}",
             "scores: " + ", ".join(f"{k} {v:.2f}" for k, v in a.aggregated_scores.items())]
    if a.failed_rules:
        lines.append("failed rules: " + "; ".join(a.failed_rules))
    lines += [f"{r.role} ({r.model}): {r.critique}" for r in a.evaluator_results if r.critique]
    return "\n".join(lines)


def _history_text(history: list[PlanAttempt]) -> str:
    if not history:
        return "(none)"
    return "\n".join(quote("text", f"plan:\n{plan_text(a.plan)}\n\nevaluation:\n{_evaluation_text(a)}",
                           f"attempt{a.attempt_number}") for a in history)


class LLMPlanCritic:
    """The critic on a chat model; the meta-review on the escalation model (if any)."""

    def __init__(self, model: Model, escalation: Model | None = None, *, dimensions: dict[str, str],
                 temperature: float = 0.0, seed: int | None = 0, max_tokens: int = 1024,
                 prompts: PromptSource | None = None) -> None:
        self.model = model
        self.escalation = escalation
        self.dimensions = dimensions
        tmpl = builtin(PURPOSE_CRITIC).check(
            frozenset({"job", "dimensions", "query", "plan", "evaluation", "history"}),
            required={"query", "plan", "evaluation"})
        schema = critic_schema(list(dimensions))
        judge = partial(Judge, template=tmpl, format_hint=_HINT, schema=schema, schema_name=PURPOSE_CRITIC,
                        temperature=temperature, seed=seed, max_tokens=max_tokens, prompts=prompts)
        self._critic = judge(model, purpose=PURPOSE_CRITIC)
        self._meta = judge(escalation, purpose=PURPOSE_META_REVIEW) if escalation else None

    def _variables(self, job: str, query: str, attempt: PlanAttempt, history: list[PlanAttempt]) -> dict[str, str]:
        return {
            "job": job,
            "dimensions": "\n".join(f"  - {k}: {v}" for k, v in self.dimensions.items()),
            "query": quote("query", query),
            "plan": quote("text", plan_text(attempt.plan), "plan"),
            "evaluation": quote("text", _evaluation_text(attempt), "evaluation"),
            "history": _history_text(history),
        }

    async def _ask(self, judge: Judge, variables: dict[str, str], trace_id: str | None
                   ) -> tuple[CriticReply | None, str | None, float, int, str | None]:
        """(reply, raw text, latency ms, tokens, error): a model error or a reply still
        invalid after the re-ask is a failed outcome, its reason the error."""
        completions: list[Completion] = []

        async def call() -> CriticReply:
            reply, done = await judge.run(variables, parse_critic, trace_id=trace_id)
            completions.extend(done)
            return reply

        outcome = await guarded(call, catch=(JudgeParseError, ModelError))
        if outcome.failed:  # a reply that could not be parsed still cost its calls
            completions = list(outcome.error.completions) if isinstance(outcome.error, JudgeParseError) else []
        raw = completions[-1].text if completions else None
        return outcome.value, raw, _latency(completions), _tokens(completions), outcome.reason

    async def critique(self, query: str, attempt: PlanAttempt, history: list[PlanAttempt], *,
                       trace_id: str | None = None) -> IterationDecision:
        reply, raw, latency, tokens, error = await self._ask(
            self._critic, self._variables(_JOB_CRITIC, query, attempt, history), trace_id)
        if reply is None:
            decision = fallback_decision(attempt, error or "the critic failed")
            decision.critic_model, decision.raw_response = self.model.name, raw
            decision.latency, decision.tokens_used = latency, tokens
            return decision
        issues = [Issue(issue=i.issue, fix=i.fix) for i in reply.specific_issues]
        mode = reply.recommendation
        return IterationDecision(
            mode=mode, recommended_mode=mode, specific_issues=issues,
            feedback_to_planner=feedback_text(attempt, reply.critique, issues, mode),
            failure_type=reply.failure_type, critique=reply.critique, critic_scores=reply.scores,
            critic_model=self.model.name, raw_response=raw, latency=latency, tokens_used=tokens)

    async def meta_review(self, query: str, best: PlanAttempt, attempts: list[PlanAttempt], *,
                          trace_id: str | None = None) -> EscalationResult | None:
        if self._meta is None or self.escalation is None:
            return None
        others = [a for a in attempts if a is not best]
        reply, raw, latency, tokens, error = await self._ask(
            self._meta, self._variables(_JOB_META, query, best, others), trace_id)
        base = dict(trigger="max_attempts", triggers=["max_attempts"], model=self.escalation.name,
                    latency=latency, tokens_used=tokens)
        if reply is None:
            return EscalationResult(**base, panel_review=raw or "", final_verdict="", status="failed",
                                    error=error)
        verdict = "passed" if reply.passed else f"failed ({reply.failure_type or 'unspecified'})"
        fixes = "; ".join(f"{i.issue} -> {i.fix}" for i in reply.specific_issues)
        return EscalationResult(**base, panel_review=reply.critique, scores=reply.scores,
                                final_verdict=f"{verdict}; recommendation {reply.recommendation}"
                                + (f"; {fixes}" if fixes else ""))

    async def aclose(self) -> None:
        await self.model.aclose()
        if self.escalation is not None:
            await self.escalation.aclose()


def _latency(comps: list[Completion]) -> float:
    return round(sum(c.latency_ms for c in comps), 3)


def _tokens(comps: list[Completion]) -> int:
    return sum(c.input_tokens + c.output_tokens for c in comps)


def feedback_text(attempt: PlanAttempt, critique: str, issues: list[Issue], mode: str) -> str:
    """The feedback the planner gets: scores, the critique, the issues and their fixes."""
    overall = "n/a" if attempt.overall is None else f"{attempt.overall:.2f}"
    lines = [f"Attempt {attempt.attempt_number} failed evaluation (overall {overall})."]
    if attempt.failed_rules:
        lines.append("Below threshold: " + "; ".join(attempt.failed_rules) + ".")
    if critique:
        lines.append(f"Critique: {critique}")
    if issues:
        lines.append("Fix these issues:")
        lines += [f"- {i.issue}" + (f" -> {i.fix}" if i.fix else "") for i in issues]
    lines.append(f"Mode {mode}: {MODE_GUIDANCE.get(mode, '')}.")
    return "\n".join(lines)


def fallback_decision(attempt: PlanAttempt, error: str) -> IterationDecision:
    """Feedback from the panel's own critiques when the critic fails."""
    issues = [Issue(issue=rule, fix="raise this dimension") for rule in attempt.failed_rules]
    critique = " ".join(r.critique for r in attempt.evaluator_results if r.critique)
    mode: Mode = st.FULL_REGENERATION
    return IterationDecision(mode=mode, specific_issues=issues, critique=critique,
                             feedback_to_planner=feedback_text(attempt, critique, issues, mode),
                             status="failed", error=error)


# --- the loop -----------------------------------------------------------------------


def check_rules(scores: dict[str, float], overall: float, config: ResearchConfig) -> tuple[bool, list[str]]:
    """(passed, the dimension rules that fired) for one plan evaluation."""
    stage = config.stages.plan
    borderline = abs(overall - stage.pass_threshold) <= config.escalation.borderline
    fired: list[str] = []
    for key, dim in stage.dimensions.items():
        score = scores.get(key)
        if score is None or dim.threshold is None or score >= dim.threshold:
            continue
        if dim.rule in (st.RULE_ALWAYS, st.RULE_ITERATE) or (dim.rule == st.RULE_IF_BORDERLINE and borderline):
            fired.append(f"{key} {score:.2f} < {dim.threshold:g} ({dim.rule})")
    return overall >= stage.pass_threshold and not fired, fired


def next_mode(attempt_number: int, decision: IterationDecision, config: ResearchConfig) -> Mode:
    """The note's escalation rules: the critic's mode, then full_regeneration."""
    if attempt_number >= config.iteration.escalation_after_attempt:
        return st.FULL_REGENERATION
    return decision.recommended_mode or decision.mode


def best_attempt(attempts: list[PlanAttempt]) -> PlanAttempt | None:
    """The attempt with the highest overall (the latest of equals)."""
    scored = [a for a in attempts if a.overall is not None]
    return max(reversed(scored), key=lambda a: a.overall or 0.0) if scored else None


@dataclass
class PlanOutcome:
    """The plan the research goes on with, and its evaluation."""

    plan: Any
    evaluation: PlanEvaluation


class _Deadline:
    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self, cap: float | None = None) -> float:
        left = max(0.001, self.end - time.monotonic())
        return min(left, cap) if cap else left


async def evaluate_plan(query: str, planner: Planner, *, evaluator: st.StageEvaluator, config: ResearchConfig,
                        critic: PlanCritic | None = None, trace_id: str | None = None,
                        emit: Emit = ignore) -> PlanOutcome:
    """Plan, evaluate, and refine the plan (see the module docstring); ``emit`` gets the
    stage's events (:mod:`jurist.research.events`)."""
    outcome = await _evaluate_plan(query, planner, evaluator=evaluator, config=config, critic=critic,
                                   trace_id=trace_id, emit=emit)
    record = outcome.evaluation
    await emit(StageDone(stage="plan", overall=record.overall, passed=record.passed, attempts=len(record.attempts),
                         chosen_attempt=record.chosen_attempt, skipped=record.evaluation_skipped,
                         skip_reason=record.skip_reason, warnings=list(record.warnings)))
    return outcome


async def _evaluate_plan(query: str, planner: Planner, *, evaluator: st.StageEvaluator, config: ResearchConfig,
                         critic: PlanCritic | None, trace_id: str | None, emit: Emit) -> PlanOutcome:
    options = StageOptions.of(st.PLAN, config)
    dims = list(config.stages.plan.dimensions)
    record = PlanEvaluation()
    warnings = record.warnings
    first = await planner(query, None, None)  # the research's own call: its errors are the caller's
    if not options.enabled:
        record.evaluation_skipped, record.skip_reason = True, disabled(st.PLAN).reason
        await emit(Skipped(stage="plan", reason=record.skip_reason or ""))
        return PlanOutcome(first, record)
    iterate = config.evaluation.plan_evaluation.iteration_enabled
    max_attempts = record.max_attempts = config.max_attempts if iterate else 1
    per_attempt = config.iteration.attempt_seconds
    plan, mode, feedback = first, None, None
    for n in range(1, max_attempts + 1):
        clock = _Deadline(per_attempt)
        if n > 1:
            try:
                plan = await asyncio.wait_for(planner(query, feedback, mode), clock.left())
            except Exception as exc:  # the loop's own call failed: go on with the best attempt so far
                warnings.append(f"plan attempt {n}: the planner failed ({describe(exc)}); using the best attempt")
                logger.warning(warnings[-1])
                break
        attempt = PlanAttempt(attempt_number=n, plan=plan, mode=mode)
        await emit(AttemptStarted(stage="plan", attempt=n, max_attempts=max_attempts))
        started = time.perf_counter()
        limit = clock.left(options.timeout)
        try:
            result = await evaluate_subject(evaluator, st.PLAN, {"query": query, "plan": plan_text(plan)},
                                            trace_id=trace_id, timeout=limit)
        except CalibrationRequired:
            raise
        except Exception as exc:
            # Name the budget that ran out (the stage's timeout or the attempt's), not the few µs less left of it.
            bound = options.timeout if options.timeout and options.timeout <= limit else per_attempt
            reason = timed_out(bound) if isinstance(exc, asyncio.TimeoutError) else describe(exc)
            if n == 1:
                skip: Guarded[Any] = fail(options, reason, exc)  # raises ResearchBlocked on block
                record.evaluation_skipped, record.skip_reason = True, skip.reason
                if skip.warning:
                    warnings.append(skip.warning)
                attempt.evaluation_skipped, attempt.skip_reason = True, reason
                record.attempts.append(attempt)
                await emit(Skipped(stage="plan", attempt=n, reason=reason))
                return PlanOutcome(first, record)
            if options.fail_action == "block":
                fail(options, reason, exc)
            attempt.evaluation_skipped, attempt.skip_reason = True, reason
            record.attempts.append(attempt)
            warnings.append(f"plan attempt {n}: evaluation failed ({reason}); using the best attempt so far")
            logger.warning(warnings[-1])
            await emit(Skipped(stage="plan", attempt=n, reason=reason))
            break
        fill_stage(attempt, result, dims)
        attempt.passed, attempt.failed_rules = check_rules(result.scores, result.overall or 0.0, config)
        attempt.latency = round((time.perf_counter() - started) * 1000.0, 3)
        record.attempts.append(attempt)
        await emit(scored("plan", attempt, n, config, max_attempts=max_attempts, failed_rules=attempt.failed_rules))
        if attempt.passed or not iterate:
            break
        if n == max_attempts:
            record.meta_review = await _meta_review(critic, query, record.attempts, options, trace_id)
            break
        attempt.iteration_decision = await _critique(critic, query, attempt, record.attempts[:-1], clock, trace_id)
        mode = next_mode(n, attempt.iteration_decision, config)
        attempt.iteration_decision.mode = mode
        feedback = attempt.iteration_decision
        await emit(Iterating(stage="plan", attempt=n + 1, mode=mode, critique=feedback.critique,
                             issues=list(feedback.specific_issues), feedback=feedback.feedback_to_planner))
    chosen = next((a for a in record.attempts if a.passed), None) or best_attempt(record.attempts)
    if chosen is None:  # cannot happen: attempt 1 was scored or returned above
        return PlanOutcome(first, record)
    record.chosen_attempt, record.final_scores = chosen.attempt_number, dict(chosen.aggregated_scores)
    record.overall, record.passed = chosen.overall, chosen.passed
    record.total_iterations = sum(1 for a in record.attempts if not a.evaluation_skipped)
    record.escalated_to_large_model = record.meta_review is not None or any(a.escalation for a in record.attempts)
    record.unscored_dimensions = list(chosen.unscored_dimensions)
    record.scoring_note = unscored_note(record.unscored_dimensions)
    return PlanOutcome(chosen.plan, record)


async def _critique(critic: PlanCritic | None, query: str, attempt: PlanAttempt, history: list[PlanAttempt],
                    clock: _Deadline, trace_id: str | None) -> IterationDecision:
    if critic is None:
        return fallback_decision(attempt, "no critic configured")
    try:
        return await asyncio.wait_for(critic.critique(query, attempt, history, trace_id=trace_id), clock.left())
    except Exception as exc:  # a failed critic never stops the loop
        return fallback_decision(attempt, describe(exc))


async def _meta_review(critic: PlanCritic | None, query: str, attempts: list[PlanAttempt],
                       options: StageOptions, trace_id: str | None) -> EscalationResult | None:
    best = best_attempt(attempts)
    if critic is None or best is None:
        return None
    try:
        return await asyncio.wait_for(critic.meta_review(query, best, attempts, trace_id=trace_id),
                                      options.timeout)
    except Exception as exc:
        return EscalationResult(trigger="max_attempts", triggers=["max_attempts"], model="", panel_review="",
                                final_verdict="", status="failed", error=describe(exc))
