"""``GET /api/health``, and ``/`` sending a browser to the dashboard."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import RedirectResponse
from pydantic import BaseModel

import jurist

router = APIRouter(tags=["health"])


class Health(BaseModel):
    status: str
    version: str


@router.get("/api/health", response_model=Health, summary="Liveness and version")
async def health() -> Health:
    return Health(status="ok", version=jurist.__version__)


@router.get("/", include_in_schema=False)
async def root() -> RedirectResponse:
    """The server's front page is the dashboard."""
    return RedirectResponse("/evaluation", status_code=307)
