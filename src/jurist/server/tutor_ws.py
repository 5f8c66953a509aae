"""``WS /tutor/ws``: the tutor conversation.

Connect with ``?points=<name>&learner=<name>`` and, to continue, ``&session_id=<id>``;
when the server has an API token, with it (``Authorization: Bearer``, or from a
browser the subprotocols ``jurist`` and ``jurist.bearer.<base64url(token)>``; see
:mod:`jurist.server.guard`).
Client frames: ``{"type": "message", "content": "..."}``.
Server frames: ``session``, ``history``, ``assistant_message``, ``progress``, ``error``
(see docs/server.md). The judge's feedback, observations, confidences and
scores are never sent: only the tutor's reply, and the progress counts when the
operator shows them (``tutor_progress``; off by default: the learner sees the
conversation only).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from typing import Literal

from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from jurist.errors import InputError, ModelError, UsageError
from jurist.jsonfiles import loads, validation_problems
from jurist.server.auth import ws_subprotocol
from jurist.server.checklists import Checklist, valid_name
from jurist.server.sessions import TurnResult, TutorSession
from jurist.server.state import ServerState, ws_state
from jurist.server.tutor import LEARNER_PATTERN, SESSION_PATTERN

log = logging.getLogger("jurist.server")
router = APIRouter()

MAX_CONTENT = 8000
CLOSE_NOT_FOUND = 4404  # unknown checklist or session
CLOSE_BAD_REQUEST = 4400  # bad query parameters
CLOSE_UNAVAILABLE = 4503  # the tutor cannot run (configuration)
CLOSE_INTERNAL = 1011


class ClientMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["message"]
    content: str = Field(min_length=1, max_length=MAX_CONTENT)

    @field_validator("content")
    @classmethod
    def no_nul(cls, content: str) -> str:
        if "\x00" in content:  # no database stores it: refused here, the same on SQLite and PostgreSQL
            raise ValueError("a NUL character (\\u0000) is not allowed in a message")
        return content


class _Frame(BaseModel):
    """A server frame, sent as its fields in this order."""

    model_config = ConfigDict(frozen=True)


class SessionFrame(_Frame):
    type: Literal["session"] = "session"
    session_id: str
    points: str
    title: str


class HistoryMessage(_Frame):
    role: Literal["user", "assistant"]
    content: str


class HistoryFrame(_Frame):
    type: Literal["history"] = "history"
    opening: str | None
    messages: list[HistoryMessage]


class AssistantFrame(_Frame):
    type: Literal["assistant_message"] = "assistant_message"
    content: str


class ProgressFrame(_Frame):
    type: Literal["progress"] = "progress"
    recalled: int
    total: int
    completed: bool


class ErrorFrame(_Frame):
    type: Literal["error"] = "error"
    message: str


async def send(websocket: WebSocket, frame: _Frame) -> None:
    await websocket.send_json(frame.model_dump())


def progress_frame(recalled: int, total: int, completed: bool) -> ProgressFrame:
    return ProgressFrame(recalled=recalled, total=total, completed=completed)


def error_frame(message: str) -> ErrorFrame:
    return ErrorFrame(message=message)


def parse_client(raw: str) -> ClientMessage | str:
    """The client's frame, or a message saying what is wrong with it."""
    try:
        data = loads(raw, "the frame")
    except json.JSONDecodeError:
        return 'not JSON: send {"type": "message", "content": "..."}'
    except InputError as exc:  # nested too deep, a lone surrogate, a number too long to read
        return f'bad frame ({exc.reason}): send {{"type": "message", "content": "..."}}'
    try:
        return ClientMessage.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(validation_problems(exc, ClientMessage))
        return f'bad frame ({problems}): send {{"type": "message", "content": "..."}} (1 to {MAX_CONTENT} characters)'


def check_query(points: str, learner: str, session_id: str | None) -> str | None:
    if not valid_name(points):
        return f"invalid checklist name {points!r}: use letters, digits, '-' and '_'"
    if not re.match(LEARNER_PATTERN, learner):
        return "invalid learner: 1 to 64 letters, digits, spaces, '.', '@', '-' or '_'"
    if session_id is not None and not re.match(SESSION_PATTERN, session_id):
        return "invalid session_id"
    return None


async def open_session(
    state: ServerState, checklist: Checklist, learner: str, session_id: str | None
) -> TutorSession | None:
    """Resume ``session_id`` (None when unknown) or start a new session."""
    if session_id:
        session = state.sessions.get(session_id, checklist.name, learner)
        if session is None:
            session = await state.factory.resume(session_id, checklist.path, learner)
    else:
        session = await state.factory.start(checklist.path, learner)
    if session is not None:
        state.sessions.put(checklist.name, learner, session)
    return session


async def _fail(websocket: WebSocket, message: str, code: int) -> None:
    await send(websocket, error_frame(message))
    await websocket.close(code=code)


@router.websocket("/tutor/ws", name="tutor_ws")
async def tutor_ws(websocket: WebSocket) -> None:
    # The guard has checked the host, the page's Origin and the token (a browser sends it as a subprotocol).
    await websocket.accept(subprotocol=ws_subprotocol(websocket.scope.get("subprotocols") or []))
    try:
        session = await connect(websocket, ws_state(websocket))
        if session is not None:
            await converse(websocket, ws_state(websocket), session)
    except WebSocketDisconnect:
        return


async def connect(websocket: WebSocket, state: ServerState) -> TutorSession | None:
    """Validate the query, open the session, send session/history (and progress when shown); None: refused
    and closed."""
    q = websocket.query_params
    points, learner, session_id = q.get("points", ""), q.get("learner", ""), q.get("session_id") or None
    problem = check_query(points, learner, session_id)
    if problem:
        await _fail(websocket, problem, CLOSE_BAD_REQUEST)
        return None
    try:
        checklist = await asyncio.to_thread(state.checklist, points)
        if checklist is None:
            await _fail(websocket, f"no checklist named {points!r}", CLOSE_NOT_FOUND)
            return None
        session = await open_session(state, checklist, learner, session_id)
    except UsageError as exc:
        await _fail(websocket, str(exc), CLOSE_UNAVAILABLE)
        return None
    except Exception as exc:  # never echo internals
        log.exception("tutor session could not start")
        await _fail(websocket, f"the tutor session could not start ({type(exc).__name__})", CLOSE_INTERNAL)
        return None
    if session is None:
        await _fail(websocket, f"no session {session_id!r} for this checklist and learner", CLOSE_NOT_FOUND)
        return None
    await send(websocket, SessionFrame(session_id=session.session_id, points=checklist.name, title=checklist.title))
    history = [HistoryMessage(role=m.role, content=m.content) for m in session.visible_messages()]
    await send(websocket, HistoryFrame(opening=session.opening(), messages=history))
    if state.settings.tutor_progress:
        await send(websocket, progress_frame(session.recalled_count, session.total_points, session.completed))
    return session


async def converse(websocket: WebSocket, state: ServerState, session: TutorSession) -> None:
    while True:
        message = await websocket.receive()
        if message["type"] == "websocket.disconnect":
            raise WebSocketDisconnect(message.get("code", 1000))
        raw = message.get("text")
        parsed = parse_client(raw) if raw is not None else "binary frames are not accepted: send JSON text"
        if isinstance(parsed, str):
            await send(websocket, error_frame(parsed))
            continue
        async with state.sessions.lock(session.session_id):
            result = await take_turn(session, parsed.content)
        if isinstance(result, str):
            await send(websocket, error_frame(result))
            continue
        await send(websocket, AssistantFrame(content=result.response))
        if state.settings.tutor_progress:
            await send(websocket, progress_frame(result.recalled_count, result.total_points, result.completed))


async def take_turn(session: TutorSession, content: str) -> TurnResult | str:
    """One turn, or an error message safe to show (never a model's hidden output)."""
    try:
        return await session.process_user_message(content)
    except UsageError as exc:
        return str(exc)
    except ModelError as exc:
        log.warning("tutor turn failed: %s: %s", type(exc).__name__, exc)
        return f"the tutor could not answer ({type(exc).__name__}); try again"
    except Exception:  # never crash the socket; never echo internals
        log.exception("tutor turn failed")
        return "the tutor could not answer (internal error); try again"
