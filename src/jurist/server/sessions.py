"""What the tutor routes need from a checklist session, and where sessions live.

The routes talk to a :class:`TutorSession` (the protocol below) made by a
:class:`SessionFactory`. The production factory,
:func:`jurist.server.checklist_adapter.checklist_session_factory`, wraps
:class:`jurist.checklist.ChecklistSession`; tests inject fakes.

Nothing here ever exposes the judge's hidden feedback, observations,
confidences or scores: a session yields only the tutor's reply, the visible
conversation and the progress counts.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable


@dataclass(frozen=True)
class VisibleMessage:
    role: Literal["user", "assistant"]
    content: str


@dataclass(frozen=True)
class TurnResult:
    """The visible part of one turn: the reply and the progress counts."""

    response: str
    completed: bool
    recalled_count: int
    total_points: int


@runtime_checkable
class TutorSession(Protocol):
    @property
    def session_id(self) -> str: ...

    @property
    def recalled_count(self) -> int: ...

    @property
    def total_points(self) -> int: ...

    @property
    def completed(self) -> bool: ...

    def visible_messages(self) -> list[VisibleMessage]: ...

    def opening(self) -> str | None:
        """A greeting shown before the first message (not part of the conversation)."""
        ...

    async def process_user_message(self, content: str) -> TurnResult: ...


class SessionFactory(Protocol):
    async def start(self, points: Path, learner: str) -> TutorSession: ...

    async def resume(self, session_id: str, points: Path, learner: str) -> TutorSession | None: ...


class SessionCache:
    """Live sessions by id, newest kept, each with a lock so turns never interleave
    (a reconnect, or a second tab, reuses the same object)."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._items: OrderedDict[str, tuple[str, str, TutorSession, asyncio.Lock]] = OrderedDict()
        self._closing: set[asyncio.Task[None]] = set()

    def get(self, session_id: str, points: str, learner: str) -> TutorSession | None:
        item = self._items.get(session_id)
        if item is None or item[:2] != (points, learner):
            return None  # a session belongs to one checklist and one learner
        self._items.move_to_end(session_id)
        return item[2]

    def put(self, points: str, learner: str, session: TutorSession) -> None:
        old = self._items.get(session.session_id)
        lock = old[3] if old is not None else asyncio.Lock()
        self._items[session.session_id] = (points, learner, session, lock)
        self._items.move_to_end(session.session_id)
        while len(self._items) > self.size:
            _, (_, _, evicted, _) = self._items.popitem(last=False)
            self._close_later(evicted)

    def _close_later(self, session: TutorSession) -> None:
        """Close an evicted session's model clients in the background."""
        aclose = getattr(session, "aclose", None)
        if aclose is not None:
            task = asyncio.get_running_loop().create_task(aclose())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    async def aclose(self) -> None:
        """Close every live session (at server shutdown)."""
        sessions = [item[2] for item in self._items.values()]
        self._items.clear()
        for session in sessions:
            aclose = getattr(session, "aclose", None)
            if aclose is not None:
                await aclose()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)

    def lock(self, session_id: str) -> asyncio.Lock:
        item = self._items.get(session_id)
        return item[3] if item is not None else asyncio.Lock()


def visible(messages: list[Any]) -> list[VisibleMessage]:
    """Keep user and assistant messages only (dicts or objects with role/content)."""
    out: list[VisibleMessage] = []
    for m in messages:
        role = m.get("role") if isinstance(m, dict) else getattr(m, "role", None)
        content = m.get("content") if isinstance(m, dict) else getattr(m, "content", None)
        role = getattr(role, "value", role)
        if role in ("user", "assistant") and isinstance(content, str):
            out.append(VisibleMessage(role=role, content=content))
    return out
