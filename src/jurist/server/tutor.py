"""The tutor page (``GET /tutor``) and the checklist list (``GET /api/checklists``).

``/tutor?points=NAME&learner=NAME`` is the tutor; ``/tutor`` without either
parameter lists the checklists, explains the parameters and has a form that
starts the tutor.

The conversation itself runs over ``WS /tutor/ws`` (see :mod:`jurist.server.tutor_ws`).
The page shows the conversation only; the progress count (points recalled of all)
appears when the operator turns it on (``tutor_progress`` in the settings,
``jurist serve --tutor-progress``).
"""

from __future__ import annotations

import asyncio
from typing import Annotated, cast

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates
from pydantic import BaseModel

from jurist.server.checklists import NAME_PATTERN, describe_checklists, list_checklists
from jurist.server.errors import error_responses
from jurist.server.state import ServerState, get_state, require_checklist

LEARNER_PATTERN = r"^[\w][\w .@-]{0,63}$"
SESSION_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
# Scripts, styles and the socket from this origin only; no inline code.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

# The index's form starts the tutor with a GET to this server.
INDEX_CSP = CSP.replace("form-action 'none'", "form-action 'self'")

router = APIRouter(tags=["tutor"])

PointsName = Annotated[str | None, Query(description="A checklist name, e.g. 'caffeine' (letters, digits, '-', '_'); "
                                                   "without it, the page lists the checklists")]
LearnerName = Annotated[
    str | None, Query(min_length=1, max_length=64, pattern=LEARNER_PATTERN,
                      description="Who is learning (the spaced-repetition schedule is per learner)")
]
SessionId = Annotated[
    str | None, Query(pattern=SESSION_PATTERN, description="Continue this session instead of starting one")
]


class ChecklistList(BaseModel):
    checklists: list[str]


def templates(request: Request) -> Jinja2Templates:
    return cast(Jinja2Templates, request.app.state.templates)  # starlette's app state is untyped


@router.get("/api/checklists", response_model=ChecklistList, summary="Names usable as ?points=")
async def checklists(state: Annotated[ServerState, Depends(get_state)]) -> ChecklistList:
    return ChecklistList(checklists=await asyncio.to_thread(list_checklists, state.folders()))


@router.get(
    "/tutor",
    response_class=HTMLResponse,
    summary="The recall tutor page for one checklist and one learner",
    description="With `points` and `learner`: the tutor. Without either: a page that lists the checklists "
                "(`points`) and explains the parameters, with a form to start.",
    responses=error_responses(404, 422),
)
async def tutor_page(
    request: Request,
    state: Annotated[ServerState, Depends(get_state)],
    points: PointsName = None,
    learner: LearnerName = None,
    session_id: SessionId = None,
) -> HTMLResponse:
    if points is None or learner is None:
        return await tutor_index(request, state, points, learner)
    checklist = await require_checklist(state, points)
    response = templates(request).TemplateResponse(
        request,
        "tutor.html",
        {"checklist": checklist, "learner": learner, "session_id": session_id or "",
         "token_required": bool(state.settings.api_token), "show_progress": state.settings.tutor_progress},
    )
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    return response


async def tutor_index(request: Request, state: ServerState, points: str | None, learner: str | None) -> HTMLResponse:
    """``/tutor`` without a checklist or a learner: the checklists and what the parameters mean."""
    entries = await asyncio.to_thread(describe_checklists, state.folders())
    response = templates(request).TemplateResponse(request, "tutor_index.html", {
        "checklists": entries, "points": points, "learner": learner or "",
        "folders": [str(d) for d in state.checklist_dirs]})
    response.headers["Content-Security-Policy"] = INDEX_CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    return response


__all__ = ["NAME_PATTERN", "router"]
