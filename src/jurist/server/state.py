"""What the routes share: the runtime (settings, store, models), checklist folders, sessions."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from fastapi import HTTPException, Request, WebSocket

from jurist.config import Settings
from jurist.runtime import Runtime
from jurist.server.checklists import Checklist, bundled_dir, find_checklist, list_checklists, valid_name
from jurist.server.checklist_adapter import checklist_session_factory
from jurist.server.sessions import SessionCache, SessionFactory
from jurist.store import Store

@dataclass
class ServerState:
    runtime: Runtime
    checklist_dirs: list[Path]
    tutor_model: str | None = None
    judge_model: str | None = None
    factory_given: SessionFactory | None = None
    sessions: SessionCache = field(default_factory=SessionCache)
    _factory: SessionFactory | None = None

    @property
    def settings(self) -> Settings:
        return self.runtime.settings

    @property
    def store(self) -> Store:
        """The runtime's store: the one given, else one opened at start-up (closed on shutdown)."""
        return self.runtime.store

    @property
    def factory(self) -> SessionFactory:
        if self.factory_given is not None:
            return self.factory_given
        if self._factory is None:
            self._factory = checklist_session_factory(self.settings, self.store, self.tutor_model, self.judge_model)
        return self._factory

    def folders(self) -> list[Path]:
        return [*self.checklist_dirs, bundled_dir()]

    def checklist(self, name: str) -> Checklist | None:
        return find_checklist(name, self.folders())

    async def aopen(self) -> None:
        """Open the store off the event loop (at start-up)."""
        await self.runtime.astore()

    async def aclose(self) -> None:
        """Close the store the runtime opened (a given one is flushed and left open)."""
        await self.runtime.aclose()


def get_state(request: Request) -> ServerState:
    return cast(ServerState, request.app.state.jurist)  # starlette's app state is untyped


def ws_state(websocket: WebSocket) -> ServerState:
    return cast(ServerState, websocket.app.state.jurist)


async def require_checklist(state: ServerState, name: str) -> Checklist:
    """The checklist called ``name``, or a 404 saying which names exist (file reads off the loop)."""
    if not valid_name(name):
        raise HTTPException(404, f"no checklist named {name!r}: names use letters, digits, '-' and '_' only")
    found = await asyncio.to_thread(state.checklist, name)
    if found is None:
        known = ", ".join(await asyncio.to_thread(list_checklists, state.folders())) or "none"
        raise HTTPException(404, f"no checklist named {name!r}; available: {known}")
    return found
