"""Live research evaluations: the event stream, the proceed / retry decision, the live page.

:class:`LiveResearch` is a sink for :class:`~jurist.research.ResearchEvaluation`'s
``events=`` that keeps each run's events in memory (for readers that come late
or reconnect) and tells the readers following it. A run reaches it two ways:

* ``POST /api/research/evaluate`` starts one of the server's research pipeline
  (``create_app(research_pipeline=ResearchPipeline(planner, search, synthesiser))``)
  in the background and returns its id (202);
* an application that runs its research in this process passes the server's
  ``LiveResearch`` (``create_app(research_live=live)``, or :func:`live_research`)
  as ``events=`` of its own ``ResearchEvaluation``.

Routes::

    POST /api/research/evaluate              start a run (write)          -> 202 {log_id, live, events, ...}
    GET  /api/research/{id}                  the run so far (JSON)
    GET  /api/research/{id}/events           its events as server-sent events (history first; resumes
                                             after Last-Event-ID / ?after=N; ends after done or error)
    POST /api/research/{id}/decision         {"decision": N, "choice": "proceed" | "retry"}: answer decision N,
                                             the seq of the decision event that asked it (write)
    POST /api/research/{id}/cancel           end a run started here, recorded as cancelled (write)
    GET  /evaluation/research/{id}/live      the live page (a finished run no longer held: the stored page)

Writes pass the guard like every other (token, same origin, JSON). Runs are
held in memory only: a restart forgets them (their records are in the store).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

from fastapi import APIRouter, Depends, FastAPI, Header, HTTPException, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, JsonValue

from jurist.errors import NotFound
from jurist.jsonfiles import Number
from jurist.research.evaluation import ResearchEvaluation, ResearchPipeline
from jurist.research.events import Choice, DecisionRequested, Decided, Done, Failed, ResearchEvent
from jurist.research.events import Started as RunStarted
from jurist.server.auth import require_write
from jurist.server.dashboard import not_found, render
from jurist.server.errors import error_responses
from jurist.server.state import get_state
from jurist.store import dashboard as q

log = logging.getLogger("jurist.server")

KEEP_FINISHED = 100  # finished runs held for late readers; older ones are read from the store
MAX_RUNNING = 8  # runs started by POST /api/research/evaluate at once
MAX_DECISION_TIMEOUT_S = 600  # a run waiting for a decision holds one of those places that long at most
CANCEL_WAIT_S = 10.0  # how long POST .../cancel waits for the run to end
HEARTBEAT_S = 15.0  # an SSE comment when nothing happened, so proxies keep the stream open
LOG_ID = r"^[A-Za-z0-9-]{1,32}$"


@dataclass
class _Run:
    log_id: str
    query: str | None = None
    events: list[ResearchEvent] = field(default_factory=list)  # as they came; JSON data only when sent
    pending: DecisionRequested | None = None  # the decision awaiting an answer
    finished: bool = False
    cancelled: bool = False  # ended by POST .../cancel
    readers: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = field(default_factory=list)

    @property
    def status(self) -> str:
        if self.finished:
            if self.cancelled and self.events and self.events[-1].type == "error":
                return "cancelled"
            return self.events[-1].type if self.events else "done"
        return "waiting" if self.pending is not None else "running"


class LiveResearch:
    """The research runs of this process and their events; a thread-safe event sink.

    ``live(event)`` files the event under its ``log_id``; a run's first event
    (or :meth:`open`) registers it. Readers in any event loop follow a run
    with :meth:`follow`; :meth:`decide` answers the decision it waits for.
    """

    def __init__(self, keep_finished: int = KEEP_FINISHED) -> None:
        self.keep_finished = keep_finished
        self._lock = threading.Lock()
        self._runs: OrderedDict[str, _Run] = OrderedDict()
        self._tasks: dict[str, asyncio.Task[Any]] = {}

    # -- the sink ------------------------------------------------------------------------
    def __call__(self, event: ResearchEvent) -> None:
        if not event.log_id:
            log.debug("a research event without a log id is not shown live: %r", event)
            return
        self._add(event.log_id, event)

    def _add(self, log_id: str, event: ResearchEvent) -> None:
        with self._lock:
            run = self._runs.get(log_id) or self._register(log_id)
            if run.finished:
                return
            run.events.append(event)
            if isinstance(event, RunStarted):
                run.query = event.query
            elif isinstance(event, DecisionRequested):
                run.pending = event
            elif isinstance(event, Decided):
                run.pending = None
            elif isinstance(event, (Done, Failed)):
                run.finished, run.pending = True, None
                self._evict()
            readers = list(run.readers)
        for loop, wake in readers:
            try:
                loop.call_soon_threadsafe(wake.set)
            except RuntimeError:  # that reader's loop is closed
                pass

    def _register(self, log_id: str, query: str | None = None) -> _Run:
        run = self._runs[log_id] = _Run(log_id, query)
        return run

    def _evict(self) -> None:
        finished = [k for k, r in self._runs.items() if r.finished]
        for key in finished[: max(0, len(finished) - self.keep_finished)]:
            del self._runs[key]

    def open(self, log_id: str, query: str | None = None) -> None:
        """Register a run before its first event (its page can be opened at once)."""
        with self._lock:
            if log_id not in self._runs:
                self._register(log_id, query)

    # -- readers -------------------------------------------------------------------------
    def snapshot(self, log_id: str) -> LiveRun | None:
        """The run so far: status, query, the decision it awaits, its events."""
        with self._lock:
            run = self._runs.get(log_id)
            if run is None:
                return None
            pending = run.pending.data() if run.pending is not None else None
            return LiveRun(log_id=log_id, query=run.query, status=run.status, pending_decision=pending,
                           events=[e.data() for e in run.events])

    def has(self, log_id: str) -> bool:
        with self._lock:
            return log_id in self._runs

    async def follow(self, log_id: str, after: int = 0) -> AsyncIterator[dict[str, JsonValue] | None]:
        """The run's events after sequence number ``after``, as they come; ``None`` is a
        heartbeat (nothing for ``HEARTBEAT_S``). Ends after ``done`` or ``error``."""
        wake = asyncio.Event()
        with self._lock:
            run = self._runs.get(log_id)
            if run is None:
                return
            reader = (asyncio.get_running_loop(), wake)
            run.readers.append(reader)
        try:
            while True:
                wake.clear()
                with self._lock:
                    batch = [e for e in run.events if e.seq > after]
                    finished = run.finished
                for event in batch:
                    yield event.data()
                    after = event.seq
                if finished:
                    return
                if not batch:
                    try:
                        await asyncio.wait_for(wake.wait(), HEARTBEAT_S)
                    except asyncio.TimeoutError:
                        yield None
        finally:
            with self._lock:
                run.readers.remove(reader)

    # -- decisions -----------------------------------------------------------------------
    def decide(self, log_id: str, decision: int, choice: Choice) -> DecisionMade:
        """Answer decision ``decision`` (the ``seq`` of the event that asked it) of run ``log_id``.
        NotFound: no such run; HTTPException 409: no such question was asked yet, or it is
        answered already (by the user, or by its time-out)."""
        with self._lock:
            run = self._runs.get(log_id)
            if run is None:
                raise NotFound(_unknown(log_id))
            asked = next((e for e in run.events if e.seq == decision), None)
            answer = next((e for e in run.events if isinstance(e, Decided) and e.seq > decision), None)
            pending, latest, finished = run.pending, run.events[-1].seq if run.events else 0, run.finished
        which = f"decision {decision} of research evaluation {log_id!r}"
        if not isinstance(asked, DecisionRequested):
            if asked is None and decision > latest:
                raise HTTPException(409, f"{which} has not been asked (its latest event is {latest}): "
                                         "answer the decision event you were shown, by its seq")
            raise HTTPException(409, f"event {decision} of research evaluation {log_id!r} is not a decision "
                                     "(answer a decision event, by its seq)")
        if pending is not asked or asked.resolve is None or not asked.resolve(choice):
            if answer is not None:
                by = "the user" if answer.by == "user" else "its time-out"
                told = f"{which} was already answered: {answer.choice}, by {by}"
            elif finished:
                told = f"{which} was not answered before the run ended"
            else:
                told = f"{which} was already answered (or its time ran out)"
            raise HTTPException(409, told + ("; the run has finished" if finished else ""))
        return DecisionMade(log_id=log_id, decision=decision, stage=asked.stage, choice=choice)

    def cancel(self, log_id: str) -> asyncio.Task[Any]:
        """Cancel a run started here (its place among the ``MAX_RUNNING`` is free once it has
        ended); returns its task. NotFound: no such run; HTTPException 409: it has finished,
        or it is an application's own run (not started here)."""
        with self._lock:
            run = self._runs.get(log_id)
            if run is None:
                raise NotFound(_unknown(log_id))
            task = self._tasks.get(log_id)
            if run.finished or task is None or task.done():
                if run.finished:
                    raise HTTPException(409, f"research evaluation {log_id!r} has finished ({run.status})")
                raise HTTPException(409, f"research evaluation {log_id!r} was not started with POST "
                                         "/api/research/evaluate (an application's own run, or a query "
                                         "answered in its own request): only those can be cancelled here")
            run.cancelled = True
        task.cancel(CANCELLED_BY_REQUEST)
        return task

    # -- runs started here ---------------------------------------------------------------
    def running(self) -> int:
        return sum(1 for t in self._tasks.values() if not t.done())

    def start(self, evaluation: ResearchEvaluation, pipeline: ResearchPipeline, query: str) -> None:
        """Run ``pipeline`` on ``query`` under ``evaluation`` in the background."""
        log_id = evaluation.log_id
        self.open(log_id, query)
        task = asyncio.create_task(_run(evaluation, pipeline, query), name=f"research-{log_id}")
        self._tasks[log_id] = task
        task.add_done_callback(lambda t: self._ended(log_id, t))

    def _ended(self, log_id: str, task: asyncio.Task[Any]) -> None:
        self._tasks.pop(log_id, None)
        error = None if task.cancelled() else task.exception()
        with self._lock:
            run = self._runs.get(log_id)
            if run is None or run.finished:
                return
            seq = run.events[-1].seq + 1 if run.events else 1
        if task.cancelled():
            reason = CANCELLED_BY_REQUEST if run.cancelled else "cancelled (the server stopped)"
        else:
            reason = str(error or "ended without a result")
        self._add(log_id, Failed(log_id=log_id, seq=seq, error=reason,
                                 error_type=type(error).__name__ if error else "Cancelled"))

    async def aclose(self) -> None:
        """Cancel the runs started here (at shutdown)."""
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _run(evaluation: ResearchEvaluation, pipeline: ResearchPipeline, query: str) -> None:
    try:
        async with evaluation:
            await evaluation.run(query, pipeline.planner, pipeline.search, pipeline.synthesiser)
    except Exception as exc:  # on record as the run's error event; the server goes on
        log.warning("research evaluation %s stopped: %s: %s", evaluation.log_id, type(exc).__name__, exc)


def install(app: FastAPI, pipeline: ResearchPipeline | None, live: LiveResearch | None) -> LiveResearch:
    """Serve the live routes on ``app``; returns its :class:`LiveResearch`."""
    app.state.research_live = live = live if live is not None else LiveResearch()
    app.state.research_pipeline = pipeline
    app.include_router(api)
    app.include_router(pages)
    return live


def live_research(app: FastAPI) -> LiveResearch:
    """The app's :class:`LiveResearch`: pass it as ``events=`` to show a run live."""
    live: LiveResearch = app.state.research_live
    return live


def _live(request: Request) -> LiveResearch:
    return live_research(request.app)


# -- the API ---------------------------------------------------------------------------------

api = APIRouter(prefix="/api/research", tags=["research"])


class StartRequest(BaseModel):
    """A research evaluation of the server's pipeline on one query."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=20_000, description="the user's research question")
    decision_timeout: Number = Field(30.0, gt=0, le=MAX_DECISION_TIMEOUT_S,
                                    description="seconds to wait for proceed / retry after a severe retrieval flag "
                                                f"(at most {MAX_DECISION_TIMEOUT_S}; the run holds one of the "
                                                f"{MAX_RUNNING} places meanwhile)")
    decision_default: Literal["proceed", "retry"] = Field("proceed", description="the choice after the time-out")


class Started(BaseModel):
    log_id: str
    live: str = Field(description="the live page")
    events: str = Field(description="the server-sent events")
    status: str = Field(description="the run so far, as JSON")
    decision: str = Field(description="where to POST proceed / retry")
    cancel: str = Field(description="where to POST to cancel the run")
    record: str = Field(description="the stored evaluation's page, once done")


class LiveRun(BaseModel):
    log_id: str
    query: str | None
    status: Literal["running", "waiting", "done", "error", "cancelled"]
    pending_decision: dict[str, JsonValue] | None
    events: list[dict[str, JsonValue]]


class DecisionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    decision: int = Field(ge=1, le=1_000_000_000,
                          description="the decision answered: the seq of the decision event that asked it")
    choice: Choice


class DecisionMade(BaseModel):
    log_id: str
    decision: int
    stage: str
    choice: Choice


class Cancelled(BaseModel):
    log_id: str
    status: Literal["cancelled"]


def _links(log_id: str) -> dict[str, str]:
    return {"log_id": log_id, "live": f"/evaluation/research/{log_id}/live", "events": f"/api/research/{log_id}/events",
            "status": f"/api/research/{log_id}", "decision": f"/api/research/{log_id}/decision",
            "cancel": f"/api/research/{log_id}/cancel", "record": f"/evaluation/research/{log_id}"}


@api.post("/evaluate", dependencies=[Depends(require_write)], status_code=202, response_model=Started,
          responses=error_responses(400, 401, 404, 422, 429))
async def start(request: Request, body: StartRequest) -> dict[str, str]:
    """Start a research evaluation of the server's pipeline on ``query`` in the background;
    follow it at ``live`` (the page) or ``events`` (server-sent events)."""
    pipeline: ResearchPipeline | None = request.app.state.research_pipeline
    if pipeline is None:
        raise NotFound("this server has no research pipeline to run: start it from Python with "
                       "create_app(research_pipeline=ResearchPipeline(planner, search, synthesiser)) "
                       "(see docs/research.md, \"Live view\")")
    live = _live(request)
    if live.running() + getattr(request.app.state, "research_queries", 0) >= MAX_RUNNING:  # queries count too
        raise HTTPException(429, f"{MAX_RUNNING} research evaluations are running; try again when one has finished")
    evaluation = await asyncio.to_thread(  # it may read the research configuration from jurist.yaml
        pipeline.start, runtime=get_state(request).runtime, events=live, decision_timeout=body.decision_timeout,
        decision_default=body.decision_default)
    live.start(evaluation, pipeline, body.query)
    return _links(evaluation.log_id)


CANCELLED_BY_REQUEST = "cancelled (POST /api/research/{id}/cancel)"


def _unknown(log_id: str) -> str:
    return (f"no live research evaluation with id {log_id!r} (finished ones are in the store: "
            f"GET /api/evaluation/sessions/{log_id})")


@api.get("/{log_id}", response_model=LiveRun, responses=error_responses(404, 422))
async def status(request: Request, log_id: str = PathParam(pattern=LOG_ID)) -> LiveRun:
    """A live run so far: its status (running, waiting for a decision, done, error) and its events."""
    found = _live(request).snapshot(log_id)
    if found is None:
        raise NotFound(_unknown(log_id))
    return found


def _sse(event: dict[str, JsonValue] | None) -> str:
    if event is None:
        return ": keep-alive\n\n"
    return f"id: {event['seq']}\nevent: {event['type']}\ndata: {json.dumps(event, ensure_ascii=False)}\n\n"


def _after(after: int | None, last_event_id: str | None) -> int:
    if after is not None:
        return after
    raw = (last_event_id or "").strip()
    return int(raw) if raw.isdigit() and len(raw) < 10 else 0


@api.get("/{log_id}/events", response_class=StreamingResponse,
         responses={200: {"content": {"text/event-stream": {}}, "description": "server-sent events"},
                    **error_responses(404, 422)})
async def events(
    request: Request,
    log_id: str = PathParam(pattern=LOG_ID),
    after: int | None = Query(None, ge=0, le=1_000_000, description="only the events after this sequence number"),
    last_event_id: str | None = Header(None, max_length=20),
) -> StreamingResponse:
    """The run's events as server-sent events (``event:`` the type, ``id:`` the sequence number,
    ``data:`` the event's JSON): those so far, then each as it happens; the stream ends after
    ``done`` or ``error``. A reconnecting EventSource resumes after its ``Last-Event-ID``."""
    live = _live(request)
    if not live.has(log_id):
        raise NotFound(_unknown(log_id))
    start_after = _after(after, last_event_id)

    async def stream() -> AsyncIterator[str]:
        yield "retry: 2000\n\n"
        async for event in live.follow(log_id, start_after):
            yield _sse(event)

    return StreamingResponse(stream(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


@api.post("/{log_id}/decision", dependencies=[Depends(require_write)], response_model=DecisionMade,
          responses=error_responses(401, 404, 409, 422))
async def decision(request: Request, body: DecisionRequest, log_id: str = PathParam(pattern=LOG_ID)
                   ) -> DecisionMade:
    """Answer the decision a run waits for after a severe retrieval flag: ``proceed`` with
    these sources, or ``retry`` the search. ``decision`` names the question answered (the
    ``seq`` of its ``decision`` event): 409 when that question was answered already (by the
    user or its time-out) or has not been asked."""
    return _live(request).decide(log_id, body.decision, body.choice)


@api.post("/{log_id}/cancel", dependencies=[Depends(require_write)], response_model=Cancelled,
          responses=error_responses(401, 404, 409, 422))
async def cancel(request: Request, log_id: str = PathParam(pattern=LOG_ID)) -> Cancelled:
    """End a run started with ``POST /api/research/evaluate``: its last event is an ``error``
    saying it was cancelled, its status ``cancelled``, and its place among the runs at once
    is free. 409 when it has finished."""
    task = _live(request).cancel(log_id)
    await asyncio.wait({task}, timeout=CANCEL_WAIT_S)
    return Cancelled(log_id=log_id, status="cancelled")


# -- the page --------------------------------------------------------------------------------

pages = APIRouter(prefix="/evaluation", include_in_schema=False)


@pages.get("/research/{log_id}/live", response_class=HTMLResponse)
async def live_page(request: Request, log_id: str) -> Response:
    live = _live(request)
    if not live.has(log_id):
        found = await get_state(request).store.aread(q.trace, log_id) if len(log_id) <= 64 else None
        if found is not None and found["evaluation"]["kind"] == "research":  # the row's kind column
            return RedirectResponse(f"/evaluation/research/{log_id}", status_code=303)
        return not_found(request, f"No research evaluation with id {log_id!r} is running here.")
    return render(request, "research_live.html", {
        "active": "explorer", "links": _links(log_id),
        "token_required": bool(get_state(request).settings.api_token)})


__all__ = ["LiveResearch", "install", "live_research"]
