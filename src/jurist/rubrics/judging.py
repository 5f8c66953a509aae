"""Scoring one rubric against one session, with an LLM judge or the local judge.

Both return a :class:`RubricOutcome`: a score on the rubric's scale, or
``evaluation_failed`` with the reason. Item-based rubrics are graded item by
item; their score is points earned over points possible (the positive
points), clipped to [0, 1] and mapped onto the scale.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from jurist.judges import OK, Judge, PromptTemplate, Verdict, parse_items, parse_score
from jurist.models.base import MeaningJudge
from jurist.models.model import CallSink, Model, record_meaning_call
from jurist.rubrics.models import Rubric
from jurist.rubrics.sessions import ChatSession, FormattedSession

PURPOSE = "rubric_judge"
SCORED = "scored"
EVALUATION_FAILED = "evaluation_failed"  # result.json's name for a failed outcome

SCORE_SCHEMA = {
    "type": "object",
    "properties": {"score": {"type": "number"}, "reasoning": {"type": "string"}},
    "required": ["score", "reasoning"],
    "additionalProperties": False,
}
ITEMS_SCHEMA = {
    "type": "object",
    "properties": {
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"id": {"type": "string"}, "met": {"type": "boolean"}, "reasoning": {"type": "string"}},
                "required": ["id", "met", "reasoning"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["items"],
    "additionalProperties": False,
}


@dataclass
class RubricOutcome:
    rubric: Rubric
    status: str  # scored | evaluation_failed
    score: float | None
    scale: tuple[float, float]
    reasoning: str
    judge_model: str
    template_hash: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    latency_ms: float = 0.0
    call_ids: list[str] = field(default_factory=list)
    cached: bool = False
    items: list[dict[str, Any]] | None = None


def item_score(rubric: Rubric, met: dict[str, bool], scale: tuple[float, float]) -> float:
    """Points earned over points possible, clipped to [0, 1], on ``scale``."""
    items = rubric.items or []
    possible = sum(i.points for i in items if i.points > 0)
    earned = sum(i.points for i in items if met.get(i.id))
    frac = min(1.0, max(0.0, earned / possible))
    lo, hi = scale
    return round(lo + frac * (hi - lo), 4)


def _item_reasoning(rubric: Rubric, met: dict[str, bool]) -> str:
    got = [i.id for i in rubric.items or [] if met.get(i.id)]
    missed = [i.id for i in rubric.items or [] if not met.get(i.id)]
    return f"criteria met: {', '.join(got) or 'none'}; not met: {', '.join(missed) or 'none'}"


class LLMRubricJudge:
    """One judge call per rubric through a chat model."""

    def __init__(self, model: Model, free_template: PromptTemplate, items_template: PromptTemplate, *,
                 temperature: float = 0.0, seed: int | None = 0, max_tokens: int = 1024) -> None:
        self.model = model
        self.name = model.name
        common = dict(purpose=PURPOSE, temperature=temperature, seed=seed, max_tokens=max_tokens)
        self._free = Judge(model, free_template, schema=SCORE_SCHEMA, schema_name="rubric_score",
                           format_hint="", **common)
        self._items = Judge(model, items_template, schema=ITEMS_SCHEMA, schema_name="rubric_items",
                            format_hint='{"items": [{"id": "<criterion id>", "met": true, "reasoning": "<one sentence>"}]}',
                            **common)

    async def score(self, rubric: Rubric, scale: tuple[float, float], session: ChatSession,
                    formatted: FormattedSession, *, trace_id: str, timeout: float) -> RubricOutcome:
        lo, hi = scale
        variables = dict(
            rubric_name=rubric.name,
            rubric_description=rubric.description,
            scoring_criteria=rubric.criteria_text(),
            rubric_items=rubric.items_text(),
            chat_session=formatted.text,
            score_min=f"{lo:g}",
            score_max=f"{hi:g}",
        )
        if rubric.item_based:
            ids = [i.id for i in rubric.items or []]
            verdict: Verdict[Any] = await self._items.verdict(
                variables, lambda text: parse_items(text, ids), trace_id=trace_id, timeout=timeout
            )
        else:
            hint = (
                f'{{"score": <number from {lo:g} to {hi:g}>, "reasoning": "<2-3 sentences>"}}\n'
                f"or the two lines\nSCORE: <number from {lo:g} to {hi:g}>\nREASONING: <2-3 sentences>"
            )
            verdict = await self._free.verdict(
                variables, lambda text: parse_score(text, scale), trace_id=trace_id, timeout=timeout,
                format_hint=hint,
            )
        out = RubricOutcome(
            rubric=rubric, status=EVALUATION_FAILED, score=None, scale=scale, reasoning=verdict.reason or "",
            judge_model=verdict.judge_model, template_hash=verdict.template_hash,
            input_tokens=verdict.input_tokens, output_tokens=verdict.output_tokens,
            latency_ms=verdict.latency_ms, call_ids=verdict.call_ids, cached=verdict.cached,
        )
        if verdict.status != OK:
            return out
        out.status = SCORED
        if rubric.item_based:
            replies = verdict.value
            met = {k: v.met for k, v in replies.items()}
            out.score = item_score(rubric, met, scale)
            out.reasoning = _item_reasoning(rubric, met)
            out.items = [
                {"id": i.id, "text": i.text, "points": i.points, "met": met[i.id], "reasoning": replies[i.id].reasoning}
                for i in rubric.items or []
            ]
        else:
            out.score = verdict.value.score
            out.reasoning = verdict.value.reasoning
        return out


class LocalRubricJudge:
    """The offline embedding judge: scores item-based rubrics, refuses free-form ones."""

    def __init__(self, judge: MeaningJudge, sink: CallSink | None = None) -> None:
        self.judge = judge
        self.name = judge.name
        self.sink = sink

    async def score(self, rubric: Rubric, scale: tuple[float, float], session: ChatSession,
                    formatted: FormattedSession, *, trace_id: str, timeout: float) -> RubricOutcome:
        out = RubricOutcome(rubric=rubric, status=EVALUATION_FAILED, score=None, scale=scale, reasoning="",
                            judge_model=self.name)
        if not rubric.item_based:
            out.reasoning = f"the local judge cannot score free-form rubric {rubric.id}; configure an LLM judge"
            return out
        items = rubric.items or []
        text = session.text_of("assistant")
        started = time.perf_counter()
        error, checks = None, None
        try:
            checks = await asyncio.wait_for(self.judge.expresses(text, [i.text for i in items]), timeout)
        except asyncio.TimeoutError:
            error = f"timed out after {timeout:g} s"
        except Exception as exc:  # the local judge failing is a failed evaluation, not a crash
            error = f"{type(exc).__name__}: {exc}"
        out.latency_ms = round((time.perf_counter() - started) * 1000.0, 3)
        out.call_ids = [record_meaning_call(
            self.sink, purpose=PURPOSE, model=self.name, trace_id=trace_id, latency_ms=out.latency_ms, error=error,
            request={"question": "expresses", "statements": [i.text for i in items], "text": text},
            response=None if checks is None else [
                {"statement": c.statement, "expressed": c.expressed, "confidence": round(c.confidence, 4)}
                for c in checks],
        )]
        if checks is None:
            out.reasoning = error or "the local judge failed"
            return out
        met = {i.id: c.expressed for i, c in zip(items, checks)}
        out.status = SCORED
        out.score = item_score(rubric, met, scale)
        out.reasoning = _item_reasoning(rubric, met)
        out.items = [
            {"id": i.id, "text": i.text, "points": i.points, "met": c.expressed,
             "confidence": round(c.confidence, 4), "evidence": c.evidence}
            for i, c in zip(items, checks)
        ]
        return out
