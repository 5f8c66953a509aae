"""``GET /api/health``."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel

import jurist

router = APIRouter(tags=["health"])


class Health(BaseModel):
    status: str
    version: str


@router.get("/api/health", response_model=Health, summary="Liveness and version")
async def health() -> Health:
    return Health(status="ok", version=jurist.__version__)
