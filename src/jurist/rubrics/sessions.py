"""Chat sessions (JSONL): loading, validation and formatting for a judge prompt.

One JSON object per line: ``{"role": "user"|"assistant"|"system"|"tool",
"content": ...}``. ``content`` is text or a list of parts: ``{"type": "text",
"text": ...}``, images (OpenAI's ``{"type": "image_url", "image_url": {"url":
...}}``, Anthropic's ``{"type": "image", "source": {"type": "base64" | "url",
...}}``), whose URL is a data URL, an http(s) URL or a file path relative to
the session's folder (see :mod:`jurist.models.images` for the checks); other
parts become a placeholder. An image stays in the text as ``[image 2:
image/png, 12,345 bytes]`` (numbered through the session) and its checked data
in :attr:`Message.images`: a vision judge is sent the images, any other judge
reads the placeholders. A session holds at most :data:`MAX_SESSION_IMAGES`
images of at most :data:`MAX_SESSION_IMAGE_BYTES` together. A ``session_id`` on any line
(or a line holding only ``{"session_id": ...}``) names the session; otherwise
the file name does. The id must fit the store (at most 300 characters, no
control characters): a bad one is an input error before any judge call.

A line holds only known fields (:class:`MessageLine`, :class:`HeaderLine`): besides
``role`` and ``content``, the OpenAI message fields ``name``, ``tool_calls`` and
``tool_call_id``, and on any line ``session_id`` and ``metadata`` (free, never read).
Anything else is an error naming the closest known field (``s1.jsonl:1: unknown field
'contnet' (did you mean 'content'?)``). A turn needs content (text or parts) or
``tool_calls``: one with neither is an error. An assistant turn's tool calls are shown
to the judge after its text, one per line: ``[tool call search: {"q": "coffee"}]``.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from jurist.errors import InputError
from jurist.jsonfiles import jsonl_objects, line_problem
from jurist.models.images import Image, from_base64, resolve_image
from jurist.judges.prompting import TURN_ROLES, escape_turn_markers, quote, turn_header
from jurist.rubrics.naming import id_problem, shorten
from jurist.store.tables import SUBJECT_ID_LENGTH

ROLES = TURN_ROLES
TAG = "chat_session"
OPEN, CLOSE = f"<{TAG}>", f"</{TAG}>"
MAX_SESSION_IMAGES = 20  # images in one session
MAX_SESSION_IMAGE_BYTES = 20 * 1024 * 1024  # their bytes together


class _Line(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    session_id: Any = None  # the session's id (any JSON value, read as text)
    metadata: Any = None  # the user's own data: free, never read


class HeaderLine(_Line):
    """A line without a role: the session's id (and an export's ``id``, ``type``, never read)."""

    id: Any = None
    type: Any = None


class MessageLine(_Line):
    """One turn, as OpenAI's chat messages write it."""

    role: str
    content: Any = None  # text, or a list of parts (checked by _content)
    name: str | None = None
    tool_calls: list[dict[str, object]] | None = None  # an assistant turn's calls, as OpenAI writes them
    tool_call_id: str | None = None  # the call a tool turn answers


HEADER_FIELDS = frozenset(HeaderLine.model_fields)


def _line(obj: dict[str, object], source: str, n: int) -> HeaderLine | MessageLine:
    """A session line validated: a header line (no role, header fields only) or a turn."""
    model: type[HeaderLine] | type[MessageLine] = (
        HeaderLine if "role" not in obj and set(obj) <= HEADER_FIELDS else MessageLine)
    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        raise InputError(line_problem(exc, model, "line"), file=source, line=n) from None


def _tool_calls_text(calls: list[dict[str, object]], file: str, line: int) -> list[str]:
    """An assistant turn's tool calls as the judge reads them: ``[tool call search: {"q": "x"}]``
    (``?`` for a call without a name); a name that is not text is an InputError."""
    out: list[str] = []
    for i, call in enumerate(calls):
        function = call.get("function")
        if not isinstance(function, dict):
            function = {}
        name = function.get("name")
        if name is not None and not isinstance(name, str):
            raise InputError(f"tool_calls[{i}].function.name must be text, not {type(name).__name__}",
                             file=file, line=line)
        arguments = function.get("arguments")
        if arguments is not None and not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        out.append(f"[tool call {name or '?'}: {arguments or ''}]")
    return out


@dataclass
class Message:
    role: str
    content: str
    name: str | None = None
    images: list[Image] = field(default_factory=list)  # the images of its content, in order


@dataclass
class ChatSession:
    session_id: str
    messages: list[Message]
    source: str | None = None
    #: The reference answer(s) a dataset item expects (any one is acceptable); empty when there is none.
    #: A rubric whose template uses ``{expected}`` compares the last answer with them.
    expected: tuple[str, ...] = ()

    def text_of(self, role: str) -> str:
        return "\n".join(m.content for m in self.messages if m.role == role)

    @property
    def images(self) -> tuple[Image, ...]:
        """Every image of the session, in order (image ``i`` is the ``[image i: ...]`` placeholder)."""
        return tuple(image for m in self.messages for image in m.images)


@dataclass
class _ImageCount:
    """The images read so far in a session, against its bounds."""

    count: int = 0
    size: int = 0

    def add(self, image: Image, file: str, line: int) -> int:
        self.count += 1
        self.size += image.size or 0
        if self.count > MAX_SESSION_IMAGES:
            raise InputError(f"the session has more than {MAX_SESSION_IMAGES} images", file=file, line=line)
        if self.size > MAX_SESSION_IMAGE_BYTES:
            raise InputError(f"the session's images have more than {MAX_SESSION_IMAGE_BYTES:,} bytes together",
                             file=file, line=line)
        return self.count


def _image_of(part: dict[str, object], root: Path | None, file: str, line: int, allow_private: bool) -> Image | None:
    """The image of a content part (None: the part is not an image); ``allow_private``: a URL at a
    private address is taken (:func:`~jurist.models.images.from_url`)."""
    kind = part.get("type")
    what = f"the {kind} part"
    if kind in ("image_url", "input_image"):
        ref = part.get("image_url")
        if isinstance(ref, dict):
            ref = ref.get("url")
        if not isinstance(ref, str) or not ref:
            raise InputError(f"{what} has no url (\"image_url\": {{\"url\": ...}})", file=file, line=line)
        return resolve_image(ref, root, what, file=file, line=line, allow_private=allow_private)
    if kind == "image":
        source = part.get("source")
        kind = source.get("type") if isinstance(source, dict) else None
        if kind == "base64" and isinstance(source, dict) and isinstance(source.get("data"), str):
            return from_base64(source["data"], what, file=file, line=line)
        if kind == "url" and isinstance(source, dict) and isinstance(source.get("url"), str):
            return resolve_image(source["url"], root, what, file=file, line=line, allow_private=allow_private)
        raise InputError(f"{what} needs a source of type base64 (with data) or url (with url)", file=file, line=line)
    return None


def _content(content: Any, root: Path | None, count: _ImageCount, file: str, line: int,
             allow_private: bool) -> tuple[str, list[Image]]:
    if content is None:
        return "", []
    if isinstance(content, str):
        return content, []
    if isinstance(content, list):
        parts: list[str] = []
        images: list[Image] = []
        for n, part in enumerate(content, 1):
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and part.get("type") == "text":
                text = part.get("text", "")
                if not isinstance(text, str):
                    raise InputError(f"content part {n}: \"text\" must be text, got {type(text).__name__}",
                                     file=file, line=line)
                parts.append(text)
            elif not isinstance(part, dict):
                raise InputError(f"content part {n} must be text or an object (a text or image part), "
                                 f"got {type(part).__name__}", file=file, line=line)
            else:
                image = _image_of(part, root, file, line, allow_private)
                if image is None:
                    parts.append(f"[{part.get('type', 'attachment')}]")
                else:
                    parts.append(f"[image {count.add(image, file, line)}: {image.label()}]")
                    images.append(image)
        return "\n".join(parts), images
    raise InputError(f"content must be text or a list of parts, got {type(content).__name__}", file=file, line=line)


def parse_session(lines: list[str] | Any, source: str, default_id: str, root: Path | None = None, *,
                  allow_private_image_urls: bool = False) -> ChatSession:
    """Parse JSONL lines; a bad line is reported with its number. Image files are read from
    ``root`` (the session file's folder; ``None``: image files are refused); an image URL at
    a private address is refused unless ``allow_private_image_urls``. Blocking when there are
    image files or URLs (a host name is resolved): call it off the event loop."""
    messages: list[Message] = []
    count = _ImageCount()
    session_id: str | None = None
    id_line: int | None = None
    for n, obj in jsonl_objects(lines, source):
        line = _line(obj, source, n)
        if line.session_id is not None:
            sid = str(line.session_id)
            if session_id is not None and sid != session_id:
                raise InputError(f"session_id {sid!r} differs from {session_id!r} earlier in the file", file=source, line=n)
            session_id, id_line = sid, n
        if isinstance(line, HeaderLine):
            continue
        if line.role not in ROLES:
            raise InputError(f"role {line.role!r} is not one of {', '.join(ROLES)}", file=source, line=n)
        if line.content is None and not line.tool_calls:
            raise InputError("the turn has no content (and no tool_calls): give its text as \"content\"",
                             file=source, line=n)
        text, images = _content(line.content, root, count, source, n, allow_private_image_urls)
        if line.tool_calls:
            calls = _tool_calls_text(line.tool_calls, source, n)
            text = "\n".join([text, *calls] if text else calls)
        messages.append(Message(line.role, text, line.name, images))
    if not messages:
        raise InputError("the session has no messages", file=source)
    sid = session_id or default_id
    problem = id_problem(sid, SUBJECT_ID_LENGTH)
    if problem:
        what = "session_id" if session_id else "the session id (the file's name)"
        raise InputError(f"{what} {shorten(sid)!r} {problem}", file=source, line=id_line if session_id else None)
    return ChatSession(session_id=sid, messages=messages, source=source)


def load_session(path: str | Path, *, allow_private_image_urls: bool = False) -> ChatSession:
    """A session file (:func:`parse_session`, its images read beside it); an unreadable or
    bad one is an InputError naming the file and the line."""
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO in its place opens at once
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise InputError("not a regular file", file=str(p))
            with open(fd, encoding="utf-8", closefd=False) as fh:
                return parse_session(fh, str(p), p.stem, p.parent,
                                     allow_private_image_urls=allow_private_image_urls)
        finally:
            os.close(fd)
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
