"""The research query and its session log, in the shapes of the research design note.

Routes::

    POST /api/research/query          run the server's research pipeline on one query and answer with
                                      {logId, answer, sources, metadata, evaluation} (write)
    GET  /api/logs/sessions/{logId}   the session's log with its evaluation data (the trace of
                                      GET /api/evaluation/sessions/{logId})

The query runs the same :class:`~jurist.research.ResearchPipeline` as ``POST
/api/research/evaluate`` (``create_app(research_pipeline=...)``), through the same
:meth:`ResearchEvaluation.run`, with the server's :class:`~jurist.server.research_live.LiveResearch`
as its event sink: while the request waits, the run can be followed on its live page.
The difference is that the request waits for the answer. A query is refused (429) while
``MAX_RUNNING`` runs are going on, counting the runs started by ``POST /api/research/evaluate``. ``evaluation`` is the
record's summary (:meth:`EvaluationRecord.summary`), whose ``details`` is the URL of
the full trace. Evaluation is advisory: a stage whose evaluation failed is reported
in ``evaluationSkipped`` / ``skipReason`` and the answer is returned all the same; a
failure of the pipeline itself (its planner, search or synthesiser) is a 502 that
names the run.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Literal

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request
from fastapi import Path as PathParam
from fastapi.encoders import jsonable_encoder
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from jurist.errors import NotFound, ResearchBlocked, UsageError
from jurist.jsonfiles import Number
from jurist.research.evaluation import ResearchPipeline
from jurist.server import api_evaluations
from jurist.server.api_evaluations import EvaluationTrace
from jurist.server.auth import require_write
from jurist.server.errors import error_responses
from jurist.server.research_live import MAX_DECISION_TIMEOUT_S, MAX_RUNNING, live_research
from jurist.server.state import get_state

log = logging.getLogger("jurist.server")

router = APIRouter(tags=["research"])


class _Camel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class QueryRequest(BaseModel):
    """One research query for the server's pipeline."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=20_000, description="the user's research question")
    decision_timeout: Number | None = Field(
        None, gt=0, le=MAX_DECISION_TIMEOUT_S,
        description="after a severe retrieval flag, seconds to wait for proceed / retry (POST "
                    f"/api/research/{{logId}}/decision; at most {MAX_DECISION_TIMEOUT_S}); default: no question, "
                    "the run proceeds")
    decision_default: Literal["proceed", "retry"] = Field("proceed", description="the choice after the time-out")


class QueryEvaluation(_Camel):
    """The note's ``evaluation`` field: each stage's overall score (None: not scored), the plan
    attempts, whether any stage's evaluation was skipped and why, where the full trace is."""

    plan_score: float | None
    retrieval_score: float | None
    answer_score: float | None
    overall_score: float | None
    iterations: int
    evaluation_skipped: bool
    skip_reason: str | None = None
    details: str = Field(description="the URL of the full trace (GET it)")


class QueryMetadata(_Camel):
    """About the run: the query, its id, the plan the sources were searched with, the time the
    whole pipeline took, its warnings and decisions, and where to see it."""

    query: str
    query_id: str
    trace_id: str
    plan: Any = Field(description="the plan the pipeline searched with (the chosen attempt's), as JSON")
    duration_ms: float
    warnings: list[str]
    decisions: list[dict[str, Any]]
    live: str = Field(description="the run's live page")
    record: str = Field(description="the stored evaluation's page")


class QueryResponse(_Camel):
    """The research response with its ``evaluation``."""

    log_id: str
    answer: str
    sources: list[Any] = Field(description="the sources the answer was written from, as JSON")
    metadata: QueryMetadata
    evaluation: QueryEvaluation


def _pipeline(request: Request) -> ResearchPipeline:
    pipeline: ResearchPipeline | None = request.app.state.research_pipeline
    if pipeline is None:
        raise NotFound("this server has no research pipeline to run: start it from Python with "
                       "create_app(research_pipeline=ResearchPipeline(planner, search, synthesiser)) "
                       "(see docs/research.md, \"Live view\")")
    return pipeline


@router.post("/api/research/query", dependencies=[Depends(require_write)], response_model=QueryResponse,
             response_model_by_alias=True, responses=error_responses(400, 401, 404, 422, 429, 502))
async def research_query(request: Request, body: QueryRequest) -> QueryResponse:
    """Run the server's research pipeline on ``query`` (plan with its evaluation loop, search,
    retrieval evaluation, answer) and answer with the result and its ``evaluation`` scores;
    the run is on record under ``logId`` (``GET /api/logs/sessions/{logId}``)."""
    pipeline = _pipeline(request)
    live = live_research(request.app)
    app_state = request.app.state
    if live.running() + app_state.research_queries >= MAX_RUNNING:
        raise HTTPException(429, f"{MAX_RUNNING} research runs are going on; try again when one has finished")
    app_state.research_queries += 1
    try:
        return await _query(request, pipeline, body)
    finally:
        app_state.research_queries -= 1


async def _query(request: Request, pipeline: ResearchPipeline, body: QueryRequest) -> QueryResponse:
    live = live_research(request.app)
    evaluation = await asyncio.to_thread(  # it may read the research configuration from jurist.yaml
        pipeline.start, runtime=get_state(request).runtime, events=live, decision_timeout=body.decision_timeout,
        decision_default=body.decision_default)
    log_id = evaluation.log_id
    live.open(log_id, body.query)
    started = time.perf_counter()
    try:
        async with evaluation:
            result = await evaluation.run(body.query, pipeline.planner, pipeline.search, pipeline.synthesiser)
    except UsageError:
        raise
    except Exception as exc:  # the pipeline's own code failed: on record as the run's error event
        log.warning("research query %s stopped: %s: %s", log_id, type(exc).__name__, exc)
        why = str(exc) if isinstance(exc, ResearchBlocked) else type(exc).__name__
        raise HTTPException(502, f"the research pipeline stopped ({why}); its events: /api/research/{log_id}") from None
    rec = result.record
    return QueryResponse(
        log_id=log_id, answer=result.answer, sources=jsonable_encoder(result.sources),
        metadata=QueryMetadata(
            query=rec.user_query, query_id=rec.query_id, trace_id=rec.trace_id or log_id,
            plan=jsonable_encoder(result.plan), duration_ms=round((time.perf_counter() - started) * 1000.0, 3),
            warnings=list(rec.warnings), decisions=[d.to_json() for d in rec.decisions],
            live=f"/evaluation/research/{log_id}/live", record=f"/evaluation/research/{log_id}"),
        evaluation=QueryEvaluation.model_validate(rec.summary()),
    )


@router.get("/api/logs/sessions/{log_id}", response_model=EvaluationTrace, tags=["evaluations"],
            responses=error_responses(404, 422))
async def session_log(request: Request, log_id: str = PathParam(min_length=1, max_length=64)) -> dict[str, Any]:
    """A session's log with its evaluation data: the evaluation row and its payload (for a research
    session, the record), its score rows, every LLM call with prompt and raw response, its patterns
    (the same as ``GET /api/evaluation/sessions/{logId}``)."""
    return await api_evaluations.get_evaluation(request, log_id)


def install(app: FastAPI) -> None:
    """Serve these routes on ``app`` (after :func:`jurist.server.research_live.install`)."""
    app.state.research_queries = 0  # queries being answered: with the live runs, at most MAX_RUNNING
    app.include_router(router)


__all__ = ["QueryResponse", "install", "router"]
