"""The evaluation API: sessions (list, one trace), metrics, the LLM call log, and
``POST /api/evaluate`` (a rubric evaluation of a posted session).

Every read runs off the event loop (``Store.aread``); all SQL is in
``jurist.store.dashboard``.
"""

from __future__ import annotations

import asyncio
import json
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from sqlalchemy.engine import Connection

from jurist.errors import InputError, NotFound, PayloadError
from jurist.payloads import read_payload
from jurist.server.auth import require_write
from jurist.server.errors import IsoDateTime, error_responses
from jurist.server.state import get_state
from jurist.store import dashboard as q
from jurist.store.queries import unknown_call_status

router = APIRouter(prefix="/api", tags=["evaluations"])

Kind = Literal["rubric", "gate", "research", "checklist"]


def _call_status_filter(status: str) -> str:
    problem = unknown_call_status(status)
    if problem is not None:
        raise ValueError(problem)
    return status


#: A filter on a call's status: a stored status (``CallStatus``) or ``failed`` (any failure).
CallStatusFilter = Annotated[str, AfterValidator(_call_status_filter)]
# Above any count of attempts, below what a database integer holds.
MAX_ITERATIONS = 1_000_000


class EvaluationSummary(BaseModel):
    """One evaluation as the explorer lists it (no payload)."""

    id: str
    kind: str
    subject_id: str
    title: str | None = Field(None, description="what it is about: a gate's question, a research query "
                                                "(at most 200 characters); None for the other kinds")
    trace_id: str | None
    status: str
    score: float | None
    max_score: float | None
    percentage: float | None
    score_normalised: float | None = Field(description="percentage / 100: the score on 0..1 every kind shares")
    passed: bool | None
    escalated: bool
    iterations: int
    max_attempts_hit: bool = Field(description="the loop used every attempt it was allowed (more than one) "
                                               "and the last did not pass")
    failure: str | None
    judge_model: str | None
    created_at: datetime


class EvaluationPage(BaseModel):
    total: int
    page: int
    page_size: int
    items: list[EvaluationSummary]


class EvaluationTrace(BaseModel):
    """One evaluation in full: its row with the payload (result.json, the gate's or research record,
    a checklist turn: each with its ``kind`` and ``version``), its score rows, every judge call with
    prompt and raw response, the patterns it belongs to."""

    evaluation: dict[str, Any]
    scores: list[dict[str, Any]]
    calls: list[dict[str, Any]]
    patterns: list[dict[str, Any]]
    payload_error: str | None = Field(
        None, description="why the payload could not be read as its kind's model (it is then returned as stored)")
    turn: dict[str, Any] | None = Field(
        None, description="a checklist turn's learner message: {message, message_seq, number, learner_messages} "
                          "(its text, its seq in the session, which of the learner's messages it is, of how many); "
                          "``calls`` are then that turn's: the judge's and the tutor's reply")


class Metrics(BaseModel):
    total: int
    passed: int
    judged: int = Field(description="evaluations with a pass rule (checklist turns have none)")
    pass_rate: float | None
    average_score: float | None
    failed: int
    distribution: list[q.ScoreBin]
    failures: list[q.FailureCount]
    trend: list[q.WeekFigures]
    by_kind: list[q.KindFigures]
    iterations: q.IterationFigures
    escalations: q.EscalationFigures
    calls: q.CallUsage


class CallPage(BaseModel):
    total: int
    page: int
    page_size: int
    items: list[dict[str, Any]]


def evaluation_filter(
    kind: Kind | None = Query(None, description="rubric | gate | research | checklist"),
    status: Literal["scored", "partial", "failed", "skipped"] | None = Query(None),
    failure: str | None = Query(None, max_length=200, description="the primary failure (a rubric or dimension key)"),
    escalated: bool | None = Query(None),
    passed: bool | None = Query(None),
    min_score: float | None = Query(None, ge=0.0, le=1.0, description="on 0..1"),
    max_score: float | None = Query(None, ge=0.0, le=1.0),
    min_iterations: int | None = Query(None, ge=1, le=MAX_ITERATIONS),
    max_iterations: int | None = Query(None, ge=1, le=MAX_ITERATIONS),
    max_attempts_hit: bool | None = Query(None, description="the loop used every attempt it was allowed and the "
                                                              "last did not pass"),
    since: IsoDateTime | None = Query(None, description="ISO date or date-time, inclusive"),
    until: IsoDateTime | None = Query(None, description="ISO date or date-time, exclusive"),
    pattern: str | None = Query(None, max_length=32, description="only the evaluations of this pattern"),
    subject_id: str | None = Query(None, max_length=300),
) -> q.EvaluationFilter:
    """The explorer's and the metrics' filters, validated (bad values are 422)."""
    if min_score is not None and max_score is not None and min_score > max_score:
        raise InputError(f"min_score {min_score} is above max_score {max_score}")
    if since is not None and until is not None and since > until:
        raise InputError("since must not be after until")
    return q.EvaluationFilter(since=since, until=until, kind=kind, status=status, failure=failure,
                              escalated=escalated, passed=passed, min_score=min_score, max_score=max_score,
                              min_iterations=min_iterations, max_iterations=max_iterations,
                              max_attempts_hit=max_attempts_hit, pattern_id=pattern, subject_id=subject_id)


@router.get("/evaluation/sessions", response_model=EvaluationPage, responses=error_responses(400, 422))
async def list_evaluations(
    request: Request,
    flt: q.EvaluationFilter = Depends(evaluation_filter),
    page: int = Query(1, ge=1, le=100_000),
    page_size: int = Query(50, ge=1, le=200),
) -> q.EvaluationPage:
    """Evaluations, newest first, filtered and paginated."""
    return await get_state(request).store.aread(q.list_page, flt, page=page, page_size=page_size)


@router.get("/evaluation/sessions/{evaluation_id}", response_model=EvaluationTrace,
            responses=error_responses(404, 422))
async def get_evaluation(request: Request, evaluation_id: str) -> dict[str, Any]:
    """The full trace of one evaluation (the research ``logId`` is its id)."""
    found: dict[str, Any] | None = await get_state(request).store.aread(_trace, evaluation_id)
    if found is None:
        raise NotFound(f"no evaluation with id {evaluation_id!r}")
    return found


def _trace(conn: Connection, evaluation_id: str) -> dict[str, Any] | None:
    """:func:`q.trace` with the payload read as its kind's model: a payload stored before
    ``kind`` and ``version`` existed comes back with them; one that no model reads comes
    back as stored, with ``payload_error``."""
    found: dict[str, Any] | None = q.trace(conn, evaluation_id)
    if found is None:
        return None
    ev = found["evaluation"]
    try:
        ev["payload"] = read_payload(ev["kind"], ev["payload"]).to_json()
    except PayloadError as exc:
        found["payload_error"] = str(exc)
    return found


@router.get("/evaluation/metrics", response_model=Metrics, responses=error_responses(400, 422))
async def metrics(request: Request, flt: q.EvaluationFilter = Depends(evaluation_filter)) -> q.Overview:
    """Aggregate metrics of the evaluations that match the filters."""
    return await get_state(request).store.aread(q.overview, flt)


@router.get("/calls", response_model=CallPage, tags=["calls"], responses=error_responses(400, 422))
async def list_calls(
    request: Request,
    purpose: str | None = Query(None, max_length=64),
    status: CallStatusFilter | None = Query(None, description="ok, error (the model call failed), parse_error "
                                                               "(its reply could not be read), or failed (either)"),
    model: str | None = Query(None, max_length=200),
    trace_id: str | None = Query(None, max_length=64),
    since: IsoDateTime | None = Query(None, description="ISO date or date-time, inclusive"),
    until: IsoDateTime | None = Query(None, description="ISO date or date-time, exclusive"),
    kind: Kind | None = Query(None, description="the calls of evaluations of this kind only "
                                                "(rubric | gate | research | checklist)"),
    page: int = Query(1, ge=1, le=100_000),
    page_size: int = Query(50, ge=1, le=200),
) -> dict[str, Any]:
    """The LLM call log, newest first: purpose, model, template, messages, raw response, tokens, latency."""
    found = await get_state(request).store.aread(
        q.call_page, page=page, page_size=page_size, purpose=purpose, status=status, model=model,
        trace_id=trace_id, since=since, until=until, kind=kind)
    return found.model_dump()


@router.get("/calls/{call_id}", tags=["calls"], responses=error_responses(404))
async def get_call(request: Request, call_id: str) -> dict[str, Any]:
    """One LLM call in full."""
    found = await get_state(request).store.aread(q.get_call, call_id)
    if found is None:
        raise NotFound(f"no LLM call with id {call_id!r}")
    return found.model_dump()


class EvaluateRequest(BaseModel):
    """A rubric evaluation of one posted session."""

    model_config = ConfigDict(extra="forbid")

    rubrics: dict[str, Any] | list[dict[str, Any]] = Field(
        description="the content of a rubrics file: {\"rubrics\": [...], \"scale\": [1, 5]} or a list of rubrics")
    session: list[dict[str, Any]] = Field(
        min_length=1, max_length=2000,
        description="the session's JSONL lines as objects: {\"role\": \"user\", \"content\": \"...\"}")
    session_id: str | None = Field(None, max_length=300)
    judge: str | None = Field(None, max_length=200, description="a model reference or alias (default: configured)")
    template: str | None = Field(None, pattern=r"^[A-Za-z0-9_.-]+@[0-9]{1,6}$",
                                 description="a prompt version of the prompt lab, e.g. rubric_judge@2 "
                                             "(default: the shipped rubric_judge)")


@router.post("/evaluate", dependencies=[Depends(require_write)], status_code=200,
             responses=error_responses(400, 401, 422, 502))
async def evaluate(request: Request, body: EvaluateRequest) -> dict[str, Any]:
    """Score the posted session against the posted rubrics; returns result.json (stored like any other)."""
    from jurist.rubrics.api import evaluate as run_evaluation
    from jurist.rubrics.models import parse_rubrics
    from jurist.rubrics.sessions import parse_session

    state = get_state(request)
    try:  # the body is JSON of the right shape whose rubrics or session do not hold: unprocessable (422)
        rubric_set = parse_rubrics(body.rubrics, "request body: rubrics", state.settings.score_scale)
        lines = [json.dumps(m) for m in body.session]
        session = await asyncio.to_thread(parse_session, lines, "request body: session",
                                          body.session_id or "posted",
                                          allow_private_image_urls=state.settings.allow_private_image_urls)
    except InputError as exc:
        raise HTTPException(422, str(exc)) from None
    return await run_evaluation(rubric_set, session, judge=body.judge, template=body.template,
                                settings=state.settings, store=state.store)
