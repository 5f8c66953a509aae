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

from jurist.errors import InputError
from jurist.research import stages as st
from jurist.research.config import ResearchConfig
from jurist.research.events import (
    AttemptStarted, Emit, Flagged, Skipped, StageDone, dimension_scores, ignore, scored,
)
from jurist.research.failsafe import StageOptions, evaluate_subject, guarded, logger
from jurist.research.plan import plan_text
from jurist.research.records import RetrievalEvaluation, SourceEvaluation, fill_stage


SEVERE_HINTS = {
    "context_recall": "may be missing key sources",
    "context_precision": "many retrieved sources are off-topic",
    "source_quality": "sources may lack authority, recency or credibility",
}


class Source(BaseModel):
    """A retrieved source as the judges see it."""

    model_config = ConfigDict(frozen=True)
    id: str
    title: str | None = None
    url: str | None = None
    content: str = ""


class _GivenSource(BaseModel):
    """A source as the caller gives it: its own fields are kept out; ``text``, ``snippet``, ``body`` or
    ``summary`` count as content when there is no ``content`` string."""

    model_config = ConfigDict(extra="ignore")
    id: object = None
    title: str | None = None
    url: str | None = None
    content: object = None
    text: object = None
    snippet: object = None
    body: object = None
    summary: object = None

    def source(self, n: int) -> Source:
        texts = (self.content, self.text, self.snippet, self.body, self.summary)
        content = next((t for t in texts if isinstance(t, str)), "")
        return Source(id=str(self.id or f"s{n}"), title=self.title, url=self.url, content=content)


def normalise_sources(sources: list[object]) -> list[Source]:
    """Sources with ``id``, ``title``, ``url`` and ``content``: strings become content; dicts
    (or objects, by their attributes) give their fields (``text``/``snippet``/... count as
    content); a missing id is ``s1``, ``s2``, ...; a title or url that is not a string is an
    InputError."""
    out: list[Source] = []
    for n, src in enumerate(sources, start=1):
        if isinstance(src, str):
            out.append(Source(id=f"s{n}", content=src))
            continue
        data = dict(src) if isinstance(src, dict) else dict(getattr(src, "__dict__", {}) or {"content": str(src)})
        try:
            out.append(_GivenSource.model_validate(data).source(n))
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise InputError(f"source {n}: {problems}") from None
    return out


def sources_text(sources: list[object]) -> str:
    """The sources as a JSON array of {id, title, url, content}, for a judge."""
    keep = [s.model_dump() for s in normalise_sources(sources)]
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
    section.source_details = [SourceEvaluation(source_id=s.id, title=s.title, url=s.url) for s in normal]
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
