"""Stage 2: retrieval evaluation. Logs the scores and flags severe failures.

The sources are judged against the query (and the plan that found them):
context recall, context precision and source quality. A stage overall or a
dimension below ``severe_threshold`` (0.5) sets ``flaggedSevere`` and adds a
"Retrieval quality warning" to the record's warnings; the research goes on.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr, ValidationError

from jurist.research import stages as st
from jurist.research.config import ResearchConfig
from jurist.research.events import (
    AttemptStarted, Emit, Flagged, Skipped, StageDone, dimension_scores, ignore, scored,
)
from jurist.research.failsafe import StageOptions, evaluate_subject, guarded, logger
from jurist.research.plan import plan_text
from jurist.research.records import RetrievalEvaluation, SourceEvaluation, fill_stage

_CONTENT_KEYS = ("content", "text", "snippet", "body", "summary")

SEVERE_HINTS = {
    "context_recall": "may be missing key sources",
    "context_precision": "many retrieved sources are off-topic",
    "source_quality": "sources may lack authority, recency or credibility",
}


def normalise_sources(sources: list[Any]) -> list[dict[str, Any]]:
    """Sources as dicts with ``id``, ``title``, ``url`` and ``content``: strings
    become content; dicts keep their fields (``text``/``snippet``/... count as
    content); a missing id is ``s1``, ``s2``, ..."""
    out: list[dict[str, Any]] = []
    for n, src in enumerate(sources, start=1):
        if isinstance(src, str):
            out.append({"id": f"s{n}", "title": None, "url": None, "content": src})
            continue
        data = dict(src) if isinstance(src, dict) else dict(getattr(src, "__dict__", {}) or {"content": str(src)})
        content = next((data[k] for k in _CONTENT_KEYS if isinstance(data.get(k), str)), "")
        out.append({**data, "id": str(data.get("id") or f"s{n}"), "title": data.get("title"),
                    "url": data.get("url"), "content": content})
    return out


def sources_text(sources: list[Any]) -> str:
    """The sources as a JSON array of {id, title, url, content}, for a judge."""
    keep = [{k: s.get(k) for k in ("id", "title", "url", "content")} for s in normalise_sources(sources)]
    return json.dumps(keep, indent=2, ensure_ascii=False, default=str)


class _Reported(BaseModel):
    """What an evaluator may report of each source in its raw response."""

    model_config = ConfigDict(extra="ignore")
    sources: list[Any] = Field(default_factory=list)


class _SourceRelevance(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: StrictStr | StrictInt
    relevance: StrictFloat | StrictInt  # a number; true and false are not


def _source_relevance(section: RetrievalEvaluation) -> dict[str, float]:
    """Per-source relevance, when an evaluator reported it in its raw response
    (``{"sources": [{"id": ..., "relevance": ...}]}``, as the local judge does); an entry
    without an id or a number is left out."""
    found: dict[str, float] = {}
    for r in section.evaluator_results:
        try:
            reported = _Reported.model_validate_json(r.raw_response)
        except ValidationError:
            continue
        for entry in reported.sources:
            try:
                source = _SourceRelevance.model_validate(entry)
            except ValidationError:
                continue
            found.setdefault(str(source.id), float(source.relevance))
    return found


async def evaluate_retrieval(query: str, plan: Any, sources: list[Any], *, evaluator: st.StageEvaluator,
                             config: ResearchConfig, trace_id: str | None = None, search_attempt: int = 1,
                             emit: Emit = ignore) -> RetrievalEvaluation:
    """Evaluate the retrieved sources; never raises unless failAction is block. ``search_attempt``
    numbers a search made again after a severe flag; ``emit`` gets the stage's events."""
    section = await _evaluate(query, plan, sources, evaluator=evaluator, config=config, trace_id=trace_id,
                              search_attempt=search_attempt, emit=emit)
    await emit(StageDone(stage="retrieval", overall=section.overall, passed=section.passed, attempts=search_attempt,
                         chosen_attempt=search_attempt, skipped=section.evaluation_skipped,
                         skip_reason=section.skip_reason, warnings=list(section.warnings)))
    return section


async def _evaluate(query: str, plan: Any, sources: list[Any], *, evaluator: st.StageEvaluator,
                    config: ResearchConfig, trace_id: str | None, search_attempt: int, emit: Emit
                    ) -> RetrievalEvaluation:
    options = StageOptions.of(st.RETRIEVAL, config)
    stage = config.stages.retrieval
    section = RetrievalEvaluation()
    normal = normalise_sources(sources)
    section.source_details = [SourceEvaluation(source_id=s["id"], title=s["title"], url=s["url"]) for s in normal]
    subject = {"query": query, "plan": plan_text(plan), "sources": sources_text(sources)}
    if options.enabled:
        await emit(AttemptStarted(stage="retrieval", attempt=search_attempt))
    outcome = await guarded(options, lambda: evaluate_subject(evaluator, st.RETRIEVAL, subject, trace_id=trace_id))
    if not outcome.ok or outcome.value is None:
        section.evaluation_skipped, section.skip_reason = True, outcome.reason
        section.warnings += [outcome.warning] if outcome.warning else []
        await emit(Skipped(stage="retrieval", attempt=search_attempt, reason=outcome.reason or "skipped"))
        return section
    result = outcome.value
    fill_stage(section, result, list(stage.dimensions))
    section.scores = dict(result.scores)
    overall = result.overall or 0.0
    section.passed = overall >= stage.pass_threshold
    section.severe_dimensions = [k for k, v in result.scores.items() if v < stage.severe_threshold]
    section.flagged_severe = overall < stage.severe_threshold or bool(section.severe_dimensions)
    relevance = _source_relevance(section)
    for detail in section.source_details:
        detail.relevance = relevance.get(detail.source_id)
    await emit(scored("retrieval", section, search_attempt, config))
    if section.flagged_severe:
        parts = [f"{k} {result.scores[k]:.2f} - {SEVERE_HINTS.get(k, 'below the severe threshold')}"
                 for k in section.severe_dimensions] or [f"overall {overall:.2f}"]
        message = "Retrieval quality warning: " + "; ".join(parts)
        section.warnings.append(message)
        logger.warning(message)
        severe = dimension_scores(st.RETRIEVAL, {k: result.scores[k] for k in section.severe_dimensions}, config)
        for d in severe:
            d.threshold, d.below, d.hint = stage.severe_threshold, True, SEVERE_HINTS.get(d.key)
        await emit(Flagged(stage="retrieval", overall=section.overall, dimensions=severe, message=message))
    return section
