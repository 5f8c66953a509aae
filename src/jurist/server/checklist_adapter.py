"""Adapter from :class:`jurist.checklist.ChecklistSession` to the server's TutorSession.

The one place the server touches the checklist capability. Model resolution
is the capability's own (``tutor_ref``: alias ``tutor``, else ``strong``, else
the configured judge; ``checklist_judge_ref``: alias ``fast``, else the
configured judge); explicit references passed to ``create_app`` win.
Only the reply and the counts cross this boundary: the judge's feedback,
observations, confidences and scores stay in the session and the store.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from jurist.checklist import ChecklistSession, load_checklist
from jurist.config import Settings
from jurist.errors import InputError
from jurist.server.sessions import SessionFactory, TurnResult, VisibleMessage, visible
from jurist.store import Store


class ChecklistTutorSession:
    """A :class:`ChecklistSession` seen through the server's TutorSession protocol."""

    def __init__(self, session: ChecklistSession) -> None:
        self._session = session

    @property
    def session_id(self) -> str:
        return self._session.session_id

    @property
    def recalled_count(self) -> int:
        return self._session.recalled_count

    @property
    def total_points(self) -> int:
        return self._session.total_points

    @property
    def completed(self) -> bool:
        return self._session.completed

    def opening(self) -> str | None:
        return self._session.opening()

    def visible_messages(self) -> list[VisibleMessage]:
        return visible(self._session.visible_messages())

    async def aclose(self) -> None:
        await self._session.aclose()

    async def process_user_message(self, content: str) -> TurnResult:
        r = await self._session.process_user_message(content)
        return TurnResult(response=r.response, completed=r.completed, recalled_count=r.recalled_count,
                          total_points=r.total_points)


class ChecklistSessionFactory:
    def __init__(
        self, settings: Settings, store: Store, *, tutor_model: str | None = None, judge_model: str | None = None
    ) -> None:
        self.settings = settings
        self.store = store
        self.tutor_model = tutor_model
        self.judge_model = judge_model

    async def start(self, points: Path, learner: str) -> ChecklistTutorSession:
        session = await ChecklistSession.start(
            points, store=self.store, learner=learner, tutor=self.tutor_model, judge=self.judge_model,
            settings=self.settings,
        )
        return ChecklistTutorSession(session)

    async def resume(self, session_id: str, points: Path, learner: str) -> ChecklistTutorSession | None:
        """The stored session, if it belongs to this learner and this checklist; else None."""
        try:
            session = await ChecklistSession.resume(
                session_id, store=self.store, tutor=self.tutor_model, judge=self.judge_model, settings=self.settings
            )
        except InputError:
            return None
        if session.learner != learner or session.title != (await asyncio.to_thread(load_checklist, points)).title:
            await session.aclose()
            return None
        return ChecklistTutorSession(session)


def checklist_session_factory(
    settings: Settings, store: Store, tutor_model: str | None = None, judge_model: str | None = None
) -> SessionFactory:
    """Sessions backed by :class:`jurist.checklist.ChecklistSession`, kept in ``store``."""
    return ChecklistSessionFactory(settings, store, tutor_model=tutor_model, judge_model=judge_model)
