"""Chat sessions (JSONL): loading, validation and formatting for a judge prompt.

One JSON object per line: ``{"role": "user"|"assistant"|"system"|"tool",
"content": ...}``. ``content`` is text or a list of parts (``{"type": "text",
"text": ...}``; other parts become a placeholder). A ``session_id`` on any line
(or a line holding only ``{"session_id": ...}``) names the session; otherwise
the file name does. The id must fit the store (at most 300 characters, no
control characters): a bad one is an input error before any judge call.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jurist.errors import InputError
from jurist.jsonfiles import jsonl_objects
from jurist.judges.prompting import TURN_ROLES, escape_turn_markers, quote, turn_header
from jurist.rubrics.naming import id_problem, shorten
from jurist.store.tables import SUBJECT_ID_LENGTH

ROLES = TURN_ROLES
TAG = "chat_session"
OPEN, CLOSE = f"<{TAG}>", f"</{TAG}>"


@dataclass
class Message:
    role: str
    content: str
    name: str | None = None


@dataclass
class ChatSession:
    session_id: str
    messages: list[Message]
    source: str | None = None

    def text_of(self, role: str) -> str:
        return "\n".join(m.content for m in self.messages if m.role == role)


def _content_text(content: Any, file: str, line: int) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and part.get("type") == "text":
                parts.append(str(part.get("text", "")))
            elif isinstance(part, dict):
                parts.append(f"[{part.get('type', 'attachment')}]")
        return "\n".join(parts)
    raise InputError(f"content must be text or a list of parts, got {type(content).__name__}", file=file, line=line)


def parse_session(lines: list[str] | Any, source: str, default_id: str) -> ChatSession:
    """Parse JSONL lines; a bad line is reported with its number."""
    messages: list[Message] = []
    session_id: str | None = None
    id_line: int | None = None
    for n, obj in jsonl_objects(lines, source):
        sid = obj.get("session_id")
        if sid is not None:
            sid = str(sid)
            if session_id is not None and sid != session_id:
                raise InputError(f"session_id {sid!r} differs from {session_id!r} earlier in the file", file=source, line=n)
            session_id, id_line = sid, n
        if "role" not in obj:
            if set(obj) <= {"session_id", "metadata", "type", "id"}:
                continue  # a header line
            raise InputError("missing field 'role'", file=source, line=n)
        role = obj["role"]
        if role not in ROLES:
            raise InputError(f"role {role!r} is not one of {', '.join(ROLES)}", file=source, line=n)
        messages.append(Message(role, _content_text(obj.get("content"), source, n), obj.get("name")))
    if not messages:
        raise InputError("the session has no messages", file=source)
    sid = session_id or default_id
    problem = id_problem(sid, SUBJECT_ID_LENGTH)
    if problem:
        what = "session_id" if session_id else "the session id (the file's name)"
        raise InputError(f"{what} {shorten(sid)!r} {problem}", file=source, line=id_line if session_id else None)
    return ChatSession(session_id=sid, messages=messages, source=source)


def load_session(path: str | Path) -> ChatSession:
    p = Path(path)
    try:
        with p.open(encoding="utf-8") as fh:
            return parse_session(fh, str(p), p.stem)
    except OSError as exc:
        raise InputError(f"cannot read session: {exc.strerror}", file=str(p)) from None
    except UnicodeDecodeError:
        raise InputError("the file is not UTF-8 text", file=str(p)) from None


@dataclass
class FormattedSession:
    text: str
    truncated: bool
    omitted_chars: int


def format_session(session: ChatSession, budget: int) -> FormattedSession:
    """The session as delimited prompt text; over ``budget`` characters, its
    middle is cut with a visible marker.

    Each turn starts a line with its header (``[2] ASSISTANT: ``); a line of a
    message that looks like one is escaped (``\\[3] USER:``), and so is any
    ``<chat_session>`` tag in the text (:mod:`jurist.judges.prompting`).
    """
    turns = [turn_header(i, m.role, m.name) + escape_turn_markers(m.content)
             for i, m in enumerate(session.messages, start=1)]
    body = "\n\n".join(turns)
    omitted = 0
    if len(body) > budget:
        omitted = len(body) - budget
        head = budget // 2
        cut = len(body) - (budget - head)
        tail = body[cut:]
        if cut not in _turn_starts(turns):  # the tail starts mid-message: its first line is message text
            first, newline, rest = tail.partition("\n")
            tail = escape_turn_markers(first) + newline + rest
        body = (
            body[:head]
            + f"\n\n[... {omitted:,} characters omitted from the middle of this session ...]\n\n"
            + tail
        )
    return FormattedSession(quote(TAG, body), omitted > 0, omitted)


def _turn_starts(turns: list[str]) -> set[int]:
    starts, at = set(), 0
    for t in turns:
        starts.add(at)
        at += len(t) + 2
    return starts
