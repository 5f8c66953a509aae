"""Scoring one session against every rubric of a set, and its result.json.

All rubrics of a session are judged in parallel (the limiter bounds the
calls). A rubric that fails is ``evaluation_failed`` with its reason; the
weighted total is over the rubrics that were scored.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Iterable, Protocol

from jurist.ids import new_id
from jurist.judges.outcome import OK
from jurist.rubrics.judging import RubricJudge, unseen_note
from jurist.rubrics.models import RubricSet
from jurist.rubrics.results import (ImagesNote, ResultSummary, RubricResult, RubricScore, Transcript, TranscriptTurn,
                                    Truncation)
from jurist.rubrics.sessions import ChatSession, FormattedSession, format_session
from jurist.store.rows import ColumnValue, EvaluationRow, Facets

# A session passes when its weighted total is at least this share of the scale.
PASS_PERCENTAGE = 70.0
# Characters of a session's turns the store keeps with its evaluation (what the pattern detector mines).
TRANSCRIPT_CHARS = 20_000


class EvaluationSink(Protocol):
    """Where evaluations go (a :class:`~jurist.store.Store`): queued, or durably (batches)."""

    def save_evaluation(self, evaluation: EvaluationRow, score_rows: list[dict[str, ColumnValue]]) -> None:
        ...

    async def asave_evaluation(self, evaluation: EvaluationRow, score_rows: list[dict[str, ColumnValue]]) -> None:
        """Write the evaluation (once per id) and return when it is committed."""
        ...

    def evaluation_ids(self, ids: Iterable[str]) -> set[str]:
        """Which of these evaluation ids are stored."""
        ...


@dataclass
class ScoredSession:
    """A session's result with its store row and score rows, not yet saved."""

    session: ChatSession
    result: RubricResult
    row: EvaluationRow
    score_rows: list[dict[str, ColumnValue]]


def _rescale(score: float, src: tuple[float, float], dst: tuple[float, float]) -> float:
    if src == dst:
        return score
    return dst[0] + (score - src[0]) / (src[1] - src[0]) * (dst[1] - dst[0])


def _round(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(x, nd)


def aggregate(rubric_set: RubricSet, outcomes: list[RubricScore]) -> ResultSummary:
    """The result's ``summary``: weighted mean over the scored rubrics (each by its
    :attr:`~RubricScore.final_score`, from its rubric's scale), on the set's scale."""
    hi = rubric_set.scale[1]
    scales = {r.id: rubric_set.scale_of(r) for r in rubric_set.rubrics}
    scored = [(o, score) for o in outcomes if o.status == OK and (score := o.final_score) is not None]
    total_weight = sum(o.weight for o, _ in scored)
    total = (
        sum(_rescale(score, scales[o.rubric_id], rubric_set.scale) * o.weight for o, score in scored) / total_weight
        if total_weight > 0 else None
    )
    return ResultSummary(
        total_score=_round(total),
        max_score=hi,
        percentage=_round(total / hi * 100.0, 2) if total is not None and hi else None,
        rubrics_evaluated=len(scored),
        rubrics_failed=len(outcomes) - len(scored),
    )


def build_result(rubric_set: RubricSet, session: ChatSession, outcomes: list[RubricScore], *,
                 trace_id: str, judge_model: str, formatted: FormattedSession, sees_images: bool = False) -> RubricResult:
    """result.json's content; a session with images says whether the judge (a vision model:
    ``sees_images``) was sent them."""
    summary = aggregate(rubric_set, outcomes)
    failed = summary.rubrics_failed
    status = "scored" if failed == 0 else ("failed" if summary.rubrics_evaluated == 0 else "partial")
    optional: dict[str, Any] = {}
    if formatted.truncated:
        optional["truncated"] = Truncation(omitted_chars=formatted.omitted_chars)
    if session.images:
        count = len(session.images)
        optional["images"] = (ImagesNote(count=count, judge_model=judge_model) if sees_images
                              else ImagesNote(count=count, not_seen=unseen_note(count)))
    return RubricResult(
        session_id=session.session_id,
        evaluated_at=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        rubrics_version=rubric_set.version, status=status, judge_model=judge_model, trace_id=trace_id,
        rubric_scores=outcomes, summary=summary, **optional,
    )


@dataclass
class SessionEvaluator:
    """Scores sessions against a rubric set with one judge."""

    rubric_set: RubricSet
    judge: RubricJudge
    store: EvaluationSink | None = None
    char_budget: int = 60_000
    rubric_timeout: float = 120.0
    allow_private_image_urls: bool = False  # sessions read for it take image URLs at private addresses

    async def evaluate(self, session: ChatSession) -> RubricResult:
        """Score ``session`` against every rubric (in parallel); queue its store row; return its result.json."""
        scored = await self.score(session)
        if self.store is not None:
            self.store.save_evaluation(scored.row, scored.score_rows)
        return scored.result

    async def score(self, session: ChatSession) -> ScoredSession:
        """Score ``session`` against every rubric (in parallel); the caller saves the rows."""
        trace_id = new_id()
        formatted = format_session(session, self.char_budget)
        outcomes = await asyncio.gather(*(
            self.judge.score(r, self.rubric_set.scale_of(r), session, formatted,
                             trace_id=trace_id, timeout=self.rubric_timeout)
            for r in self.rubric_set.rubrics
        ))
        result = build_result(self.rubric_set, session, list(outcomes), trace_id=trace_id,
                              judge_model=self.judge.judge_model(session), formatted=formatted,
                              sees_images=self.judge.visual is not None)
        return ScoredSession(session, result, evaluation_row(result, session), [_score_row(o) for o in outcomes])


def evaluation_row(result: RubricResult, session: ChatSession) -> EvaluationRow:
    """The ``evaluations`` row (kind ``rubric``) of a result; its payload is the result with the
    session's transcript (:func:`transcript_of`), its id the result's trace id (a result file
    names its row)."""
    s = result.summary
    payload = result.model_copy(update={"transcript": transcript_of(session)})
    return EvaluationRow(
        id=result.trace_id or new_id(), subject_id=session.session_id, trace_id=result.trace_id, status=result.status,
        score=s.total_score, max_score=s.max_score, percentage=s.percentage, judge_model=result.judge_model,
        rubrics_version=result.rubrics_version, source=session.source, payload=payload, **facets(result),
    )


def transcript_of(session: ChatSession, budget: int = TRANSCRIPT_CHARS) -> Transcript:
    """The session's turns within ``budget`` characters: over it, every turn longer than one
    length (the largest that fits) is cut to it, so the short turns stay whole."""
    lengths = [len(m.content) for m in session.messages]
    cap = max(lengths, default=0)
    if sum(lengths) > budget:
        left, n = budget, len(lengths)
        for k, length in enumerate(sorted(lengths)):
            if length * (n - k) > left:
                cap = left // (n - k)
                break
            left -= length
    turns = [TranscriptTurn(role=m.role, content=m.content[:cap]) for m in session.messages]
    return Transcript(turns=turns, omitted_chars=sum(max(0, length - cap) for length in lengths))


def facets(result: RubricResult) -> Facets:
    """The dashboard's columns: passed (total >= PASS_PERCENTAGE) and the primary failure.

    The failure of a session that did not pass is its lowest-scoring rubric
    (relative to that rubric's scale); a failed evaluation, or a passing one
    with a rubric that could not be scored, is ``evaluation_failed``.
    """
    pct = result.summary.percentage
    if pct is None:
        return {"passed": None, "failure": "evaluation_failed", "escalated": False, "iterations": 1}
    passed = pct >= PASS_PERCENTAGE
    failure = None
    if not passed:
        scored = [(r, r.final_score) for r in result.rubric_scores if r.status == OK and r.final_score is not None]
        failure = min(scored, key=lambda rs: rs[1] / (rs[0].max_score or 1.0))[0].rubric_id if scored else None
    elif result.status != "scored":
        failure = "evaluation_failed"
    return {"passed": passed, "failure": failure, "escalated": False, "iterations": 1}


def _score_row(o: RubricScore) -> dict[str, ColumnValue]:
    """The store's ``scores`` row of a rubric's outcome: the values result.json shows, its status by the
    file's name, and the judge's template hash and last call."""
    return {
        "key": o.rubric_id,
        "name": o.rubric_name,
        "score": o.final_score,
        "max_score": o.max_score,
        "weight": o.weight,
        "status": o.file_status,
        "reason": o.reasoning,
        "judge_model": o.judge_model,
        "template_hash": o.template_hash,
        "input_tokens": o.tokens.input,
        "output_tokens": o.tokens.output,
        "latency_ms": o.latency_ms,
        "call_id": o.call_ids[-1] if o.call_ids else None,
    }
