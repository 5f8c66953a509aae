"""The chat page (``GET /chat``) over the gate proxy, and the stored gate record of one request
(``GET /api/gate/{trace_id}``).

The page (``templates/chat.html``, ``static/chat.js``) talks to the proxy's own
``POST /v1/chat/completions`` as any client would, streaming, with a trace id it
chooses (``X-Jurist-Trace-Id``); it shows each answer's evaluations and every LLM
call of the request from the ``jurist`` record, then from the stored record (with
feedback off the evaluation lands there after ``done``), and offers **Continue**
after an error (note 004's ``showContinueButton`` / ``continueContext``, resent with
``isContinuation``). Served from this server only (no CDN), under the tutor page's
Content-Security-Policy; all text from the model or the user is set as text.
"""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, Field

from jurist.errors import NotFound, PayloadError, StoreError
from jurist.payloads import read_payload
from jurist.server.errors import error_responses
from jurist.server.state import get_state
from jurist.server.tutor import CSP, templates
from jurist.store import queries

#: Trace ids the page makes (32 hex digits) and any a client sends, within the store's column.
TRACE_PATTERN = r"^[A-Za-z0-9_.:-]{1,64}$"
MODEL_PATTERN = r"^[^\x00-\x1f]{1,200}$"
MAX_WAIT_S = 25.0  # the longest a record request is held open

log = logging.getLogger("jurist.server.chat")
page_router = APIRouter(include_in_schema=False)
router = APIRouter(prefix="/api", tags=["evaluations"])


class GateRecordResponse(BaseModel):
    """The stored record of one gated request: the gate's payload (what the proxy returns as its
    ``jurist`` field, with the evaluations that ran after ``done``), and its evaluation's id."""

    evaluation_id: str
    status: str
    record: dict[str, Any] = Field(description="the GateRecord: answer, attempts, evaluations, evaluations_list, "
                                               "llm_calls, accept_reason, error, continue_context ...")


@page_router.get("/chat", response_class=HTMLResponse)
async def chat_page(
    request: Request,
    model: Annotated[str | None, Query(pattern=MODEL_PATTERN, description="the upstream model to ask")] = None,
) -> HTMLResponse:
    """A person chats through the gate: answers, their evaluations, every LLM call, Continue after an error."""
    state = get_state(request)
    response = templates(request).TemplateResponse(
        request, "chat.html",
        {"model": model or "", "token_required": bool(state.settings.api_token)})
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    return response


@router.get("/gate/{trace_id}", response_model=GateRecordResponse, responses=error_responses(404, 422))
async def gate_record(
    request: Request,
    trace_id: Annotated[str, Path(pattern=TRACE_PATTERN)],
    wait: Annotated[float, Query(ge=0, le=MAX_WAIT_S, description=(
        "seconds to wait for an evaluation still running after done (feedback off)"))] = 0,
) -> GateRecordResponse:
    """The stored record of the gated request with this trace id (the proxy's ``X-Jurist-Trace-Id``).
    With feedback off it is stored when the judge has answered, after ``done``: ``wait`` holds the
    request until then (at most that long). 404 when there is no such record."""
    state = get_state(request)
    if wait:
        proxy = getattr(request.app.state, "proxy", None)
        if proxy is not None:
            await proxy.settle(trace_id, wait)
        try:
            await state.store.aflush()  # what the gate queued before done is written
        except StoreError as exc:  # an earlier write failed: said here, the read goes on
            log.warning("the store reported a failed write: %s", exc)
    rows = await state.store.aread(queries.list_evaluations, limit=1, kind="gate", subject_id=trace_id)
    if not rows:
        raise NotFound(f"no gate record for trace {trace_id!r}")
    row = rows[0]
    try:
        record = read_payload("gate", row["payload"]).to_json()
    except PayloadError:
        record = row["payload"] if isinstance(row["payload"], dict) else {}
    return GateRecordResponse(evaluation_id=row["id"], status=row["status"], record=record)
