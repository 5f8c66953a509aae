"""The gated chat-completions answer read back as typed pieces, for the proxy's other APIs.

The Responses API (:mod:`jurist.server.proxy_responses`) and the Messages API
(:mod:`jurist.server.proxy_messages`) are translations over
:func:`jurist.server.proxy.gated_chat`: each turns its request into a chat
completions body, lets the gate answer it, and writes what comes back in its
own shapes. What comes back is read here, once for both:

* a ``chat.completion`` (JSON) as :func:`completion_pieces`;
* its SSE stream (chunks, jurist's named ``event: jurist.*`` events, an error
  frame, ``data: [DONE]``) as :func:`stream_pieces`, an async iterator;
* an error status (OpenAI's error object, or the upstream's own body) as
  :func:`relayed_error`.

What both do the same way is here too: reading the request strictly
(:func:`translated`, :func:`known_keys`, :func:`unsupported` ...) and writing
the answer (:func:`answer`: a JSON object built from the pieces, or SSE events
from a :class:`PieceWriter`, or the API's error).

The pieces: :class:`Text` (answer text, with its log probabilities when asked),
:class:`Refusal`, :class:`ToolPiece` (a piece of a tool call, OpenAI's stream
form), :class:`JuristEvent`, then :class:`Finish` (finish reason, usage, the
``jurist`` record) or :class:`Failed` (a status and OpenAI's error object). A
stream that ends with neither is :class:`Failed` (502): never an answer
passed as complete without saying so.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, Union

from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, JsonValue, ValidationError

from jurist.jsonfiles import error_problem, reported_errors, unknown_name
from jurist.server.proxy import read_json
from jurist.server.proxy_sse import error_object

#: Upstream headers a translated answer keeps (what the caller's client reads on an error).
KEPT_HEADERS = ("retry-after", "x-request-id", "x-jurist-trace-id")


class Refused(Exception):
    """A request the proxy cannot translate: ``status`` (400), what is wrong, and the field (``param``)."""

    def __init__(self, message: str, param: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.status = status


T = TypeVar("T")


def known_keys(obj: Mapping[str, Any], where: str, known: tuple[str, ...]) -> None:
    """Refuse a key of ``obj`` (at ``where``) that is not in ``known``, naming the closest one."""
    for key in obj:
        if key not in known:
            raise Refused(f"invalid request: {where}: {unknown_name(str(key), known)}", where)


def unsupported(where: str, why: str) -> Refused:
    """A field the API defines that the proxy cannot honour, and why."""
    return Refused(f"{where} is not supported by the proxy: {why}", where)


def as_object(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise Refused(f"invalid request: {where} must be an object", where)
    return value


def as_string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise Refused(f"invalid request: {where} must be a string", where)
    return value


def body_problem(exc: ValidationError, model: type[BaseModel]) -> Refused:
    """A request body that ``model`` refused, in one sentence per problem (unknown fields first)."""
    errors = reported_errors(exc.errors(), model)
    param = ".".join(str(p) for p in errors[0]["loc"]) or None
    return Refused("invalid request: " + "; ".join(error_problem(e, model) for e in errors), param)


def tool_result_texts(parts: list[Any], where: str, kind: str,
                      text_of: Callable[[Mapping[str, Any], str], str]) -> list[dict[str, Any]]:
    """A tool result's list of parts (at ``where``) as chat-completions text parts: each must be an
    object of type ``kind`` (a chat-completions tool result holds text only), its text read by ``text_of``."""
    out: list[dict[str, Any]] = []
    for i, part in enumerate(parts):
        at = f"{where}[{i}]"
        part = as_object(part, at)
        if part.get("type") != kind:
            raise unsupported(at, "a chat-completions tool result holds text only")
        out.append({"type": "text", "text": text_of(part, at)})
    return out


async def translated(request: Request, translate: Callable[[dict[str, Any]], T], *,
                     unreadable: Callable[[JSONResponse], Response],
                     refused: Callable[[Refused], Response]) -> T | Response:
    """The request's JSON body through ``translate``; or the API's error: ``unreadable`` for a body
    that is not a JSON object, ``refused`` for one ``translate`` refuses."""
    raw = await read_json(request)
    if isinstance(raw, JSONResponse):
        return unreadable(raw)
    try:
        return translate(raw)
    except Refused as exc:
        return refused(exc)


@dataclass(frozen=True)
class Text:
    text: str
    logprobs: list[JsonValue] | None = None  # OpenAI's logprobs.content entries for this text


@dataclass(frozen=True)
class Refusal:
    text: str


@dataclass(frozen=True)
class ToolPiece:
    """A piece of tool call ``index``: its id and name (usually on the first piece), more of its arguments."""

    index: int
    id: str | None
    name: str | None
    arguments: str


@dataclass(frozen=True)
class JuristEvent:
    kind: str  # evaluation, thinking, revision, done ...
    data: JsonValue


@dataclass(frozen=True)
class Usage:
    input_tokens: int
    output_tokens: int
    total_tokens: int


@dataclass(frozen=True)
class Finish:
    reason: str | None  # stop, length, tool_calls, content_filter
    usage: Usage | None
    jurist: dict[str, JsonValue] | None
    id: str | None = None  # the chat completion's id
    extra: dict[str, JsonValue] = field(default_factory=dict)  # system_fingerprint, service_tier


@dataclass(frozen=True)
class Failed:
    status: int
    error: dict[str, JsonValue]  # OpenAI's error object: message, type, param, code, and more
    jurist: dict[str, JsonValue] | None = None
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def message(self) -> str:
        message = self.error.get("message")
        return message if isinstance(message, str) else f"HTTP {self.status}"


Piece = Union[Text, Refusal, ToolPiece, JuristEvent, Finish, Failed]


def kept_headers(response: Response) -> dict[str, str]:
    return {name: response.headers[name] for name in KEPT_HEADERS if name in response.headers}


def with_trace(headers: dict[str, str], jurist: Mapping[str, Any] | None) -> dict[str, str]:
    """``headers`` with ``X-Jurist-Trace-Id`` from the record when the answer did not carry it."""
    trace_id = jurist.get("trace_id") if jurist is not None else None
    if isinstance(trace_id, str) and "x-jurist-trace-id" not in headers:
        return {**headers, "x-jurist-trace-id": trace_id}
    return headers


def _usage(data: Any) -> Usage | None:
    if not isinstance(data, Mapping):
        return None
    prompt, completion = data.get("prompt_tokens"), data.get("completion_tokens")
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return None
    total = data.get("total_tokens")
    return Usage(prompt, completion, total if isinstance(total, int) else prompt + completion)


def _jurist(data: Any) -> dict[str, JsonValue] | None:
    return data if isinstance(data, dict) else None


def _extra(data: Mapping[str, Any]) -> dict[str, JsonValue]:
    return {k: data[k] for k in ("system_fingerprint", "service_tier") if data.get(k) is not None}


def relayed_error(response: Response) -> Failed:
    """An error answer (status >= 400) as :class:`Failed`: OpenAI's error object as it came, or one
    that holds the body's text (an upstream body in another shape)."""
    body = bytes(response.body)
    try:
        data: Any = json.loads(body)
    except ValueError:
        data = None
    headers = kept_headers(response)
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        jurist = _jurist(data.get("jurist"))
        return Failed(response.status_code, dict(data["error"]), jurist, with_trace(headers, jurist))
    if isinstance(data, dict) and isinstance(data.get("detail"), str):  # a FastAPI error
        return Failed(response.status_code, error_object(response.status_code, data["detail"]), None, headers)
    text = body.decode("utf-8", "replace").strip() or f"HTTP {response.status_code}"
    return Failed(response.status_code, error_object(response.status_code, text[:2000]), None, headers)


def _message_pieces(message: Mapping[str, Any], logprobs: Any) -> list[Piece]:
    pieces: list[Piece] = []
    content = message.get("content")
    if isinstance(content, str) and content:
        entries = logprobs.get("content") if isinstance(logprobs, Mapping) else None
        pieces.append(Text(content, list(entries) if isinstance(entries, list) else None))
    refusal = message.get("refusal")
    if isinstance(refusal, str) and refusal:
        pieces.append(Refusal(refusal))
    calls = message.get("tool_calls")
    for index, call in enumerate(calls if isinstance(calls, list) else []):
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping):
            continue
        arguments = function.get("arguments")
        pieces.append(ToolPiece(index, _text(call.get("id")), _text(function.get("name")),
                                arguments if isinstance(arguments, str) else ""))
    return pieces


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def completion_pieces(data: Mapping[str, Any]) -> list[Piece]:
    """A ``chat.completion`` as pieces, ending in :class:`Finish` (or :class:`Failed` when it has no choice)."""
    choices = data.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], Mapping) else None
    if choice is None or not isinstance(choice.get("message"), Mapping):
        return [Failed(502, error_object(502, "the gated answer holds no choice", code="bad_gateway"),
                       _jurist(data.get("jurist")))]
    finish = choice.get("finish_reason")
    return [*_message_pieces(choice["message"], choice.get("logprobs")),
            Finish(finish if isinstance(finish, str) else None, _usage(data.get("usage")), _jurist(data.get("jurist")),
                   _text(data.get("id")), _extra(data))]


def _events(buffer: str) -> tuple[list[tuple[str | None, str]], str]:
    """The complete SSE events at the start of ``buffer`` as (event name, data), and the rest."""
    out: list[tuple[str | None, str]] = []
    while "\n\n" in buffer:
        block, buffer = buffer.split("\n\n", 1)
        name: str | None = None
        data: list[str] = []
        for line in block.splitlines():
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
        if data:
            out.append((name, "\n".join(data)))
    return out, buffer


def _chunk_pieces(name: str | None, chunk: Mapping[str, Any], finish: dict[str, Any]) -> Iterable[Piece]:
    """The pieces of one stream chunk; the finish reason, usage and record are kept in ``finish``."""
    if isinstance(chunk.get("error"), dict):  # jurist.error: OpenAI's error object, and the event's data
        event = chunk.get("jurist_event")
        data = event.get("data") if isinstance(event, Mapping) else None
        status = data.get("status") if isinstance(data, Mapping) else None
        error = dict(chunk["error"])
        yield Failed(status if isinstance(status, int) and status >= 400 else 502, error,
                     _jurist(data) if isinstance(data, dict) else None)
        return
    event = chunk.get("jurist_event")
    if name and name.startswith("jurist.") and isinstance(event, Mapping):
        yield JuristEvent(name.removeprefix("jurist."), event.get("data"))
    if chunk.get("usage") is not None:
        finish["usage"] = _usage(chunk.get("usage"))
    if isinstance(chunk.get("jurist"), dict):
        finish["jurist"] = chunk["jurist"]
    finish.setdefault("id", _text(chunk.get("id")))
    finish.update(_extra(chunk))
    choices = chunk.get("choices")
    for choice in choices if isinstance(choices, list) else []:
        if not isinstance(choice, Mapping) or choice.get("index", 0) != 0:
            continue
        delta = choice.get("delta")
        if isinstance(delta, Mapping):
            content = delta.get("content")
            if isinstance(content, str) and content:
                logprobs = choice.get("logprobs")
                entries = logprobs.get("content") if isinstance(logprobs, Mapping) else None
                yield Text(content, list(entries) if isinstance(entries, list) else None)
            refusal = delta.get("refusal")
            if isinstance(refusal, str) and refusal:
                yield Refusal(refusal)
            calls = delta.get("tool_calls")
            for call in calls if isinstance(calls, list) else []:
                if not isinstance(call, Mapping):
                    continue
                function: Mapping[str, Any] = call["function"] if isinstance(call.get("function"), Mapping) else {}
                index = call.get("index", 0)
                arguments = function.get("arguments")
                yield ToolPiece(index if isinstance(index, int) else 0, _text(call.get("id")),
                                _text(function.get("name")), arguments if isinstance(arguments, str) else "")
        if isinstance(choice.get("finish_reason"), str):
            finish["reason"] = choice["finish_reason"]


async def stream_pieces(response: StreamingResponse) -> AsyncGenerator[Piece, None]:
    """The pieces of a gated SSE answer, as they come; the last is :class:`Finish` or :class:`Failed`."""
    finish: dict[str, Any] = {}
    buffer = ""
    done = False
    try:
        async for part in response.body_iterator:
            buffer += part if isinstance(part, str) else bytes(part).decode("utf-8")
            events, buffer = _events(buffer)
            for name, data in events:
                if data.strip() == "[DONE]":
                    done = True
                    break
                try:
                    chunk = json.loads(data)
                except ValueError:
                    continue
                if not isinstance(chunk, Mapping):
                    continue
                for piece in _chunk_pieces(name, chunk, finish):
                    yield piece
                    if isinstance(piece, Failed):
                        return
            if done:
                break
    finally:
        closing = getattr(response.body_iterator, "aclose", None)
        if closing is not None:
            await closing()
        if response.background is not None:
            await response.background()
    if "reason" not in finish and not done:
        yield Failed(502, error_object(502, "the gated answer ended before it was complete", code="bad_gateway"),
                     _jurist(finish.get("jurist")))
        return
    yield Finish(finish.get("reason"), finish.get("usage"), _jurist(finish.get("jurist")), finish.get("id"),
                 {k: v for k, v in finish.items() if k in ("system_fingerprint", "service_tier")})


def json_body(response: Response) -> Any:
    """The JSON of a non-streamed answer (None: not JSON)."""
    try:
        return json.loads(bytes(response.body))
    except ValueError:
        return None


class ToolCalls:
    """Tool calls joined from their pieces, OpenAI's way: the first id and name of each index,
    the arguments concatenated."""

    def __init__(self) -> None:
        self.calls: dict[int, JoinedCall] = {}

    def add(self, piece: ToolPiece) -> tuple[JoinedCall, bool]:
        """Add ``piece``; returns its call and whether the piece began it."""
        call = self.calls.get(piece.index)
        new = call is None
        if call is None:
            call = self.calls[piece.index] = JoinedCall(piece.id or "", piece.name or "")
        else:
            if not call.id and piece.id:
                call.id = piece.id
            if not call.name and piece.name:
                call.name = piece.name
        if piece.arguments:
            call.parts.append(piece.arguments)
        return call, new


@dataclass
class JoinedCall:
    """One tool call joined from its pieces (the arguments kept as pieces: joining is linear)."""

    id: str
    name: str
    parts: list[str] = field(default_factory=list)

    @property
    def arguments(self) -> str:
        return "".join(self.parts)


@dataclass
class Gathered:
    """A non-streamed answer's pieces joined: its text, its refusal, the text's log probabilities,
    its tool calls, and how it finished."""

    finish: Finish
    text: str
    refusal: str
    logprobs: list[JsonValue]
    calls: ToolCalls


def gathered(pieces: list[Piece]) -> Gathered | Failed:
    """The pieces of :func:`completion_pieces` joined (or the failure they end in)."""
    text: list[str] = []
    refusal: list[str] = []
    logprobs: list[JsonValue] = []
    calls = ToolCalls()
    for piece in pieces:
        match piece:
            case Text():
                text.append(piece.text)
                logprobs.extend(piece.logprobs or [])
            case Refusal():
                refusal.append(piece.text)
            case ToolPiece():
                calls.add(piece)
            case Finish():
                return Gathered(piece, "".join(text), "".join(refusal), logprobs, calls)
            case Failed():
                return piece
    raise AssertionError("completion_pieces ends in Finish or Failed")


class PieceWriter(Protocol):
    """Writes one streamed answer's SSE events, in an API's own shapes, from its pieces."""

    def start(self) -> str: ...
    def text(self, piece: Text) -> str: ...
    def refusal(self, piece: Refusal) -> str: ...
    def tool(self, piece: ToolPiece) -> str: ...
    def jurist(self, piece: JuristEvent) -> str: ...
    def finish(self, piece: Finish) -> str: ...
    def failed(self, piece: Failed) -> str: ...


async def written(out: PieceWriter, pieces: AsyncGenerator[Piece, None]) -> AsyncIterator[str]:
    """The SSE events ``out`` writes for ``pieces``, as they come."""
    async with contextlib.aclosing(pieces):  # a client that leaves closes the gated stream
        yield out.start()
        async for piece in pieces:
            match piece:
                case Text():
                    yield out.text(piece)
                case Refusal():
                    yield out.refusal(piece)
                case ToolPiece():
                    yield out.tool(piece)
                case JuristEvent():
                    yield out.jurist(piece)
                case Finish():
                    yield out.finish(piece)
                case Failed():
                    yield out.failed(piece)


async def answer(gated: Response, *, build: Callable[[list[Piece]], dict[str, JsonValue] | Failed],
                 events: Callable[[], PieceWriter], error_response: Callable[[Failed], Response]) -> Response:
    """The gated chat answer ``gated`` written as another API answers: an error status as
    ``error_response``, a stream as the events of ``events()``, a completion as ``build`` makes it of
    its pieces (the upstream's kept headers, and the record's trace id, on each)."""
    if gated.status_code >= 400:
        return error_response(relayed_error(gated))
    headers = kept_headers(gated)
    if isinstance(gated, StreamingResponse):
        return StreamingResponse(written(events(), stream_pieces(gated)), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", **headers})
    data = json_body(gated)
    result = build(completion_pieces(data if isinstance(data, dict) else {}))
    if isinstance(result, Failed):
        return error_response(result)
    jurist = result.get("jurist")
    return JSONResponse(result, headers=with_trace(headers, jurist if isinstance(jurist, dict) else None))


__all__ = ["Failed", "Finish", "Gathered", "JoinedCall", "JuristEvent", "Piece", "PieceWriter", "Refusal", "Refused",
           "Text", "ToolCalls", "ToolPiece", "Usage", "answer", "as_object", "as_string", "body_problem",
           "completion_pieces", "gathered", "json_body", "kept_headers", "known_keys", "relayed_error",
           "stream_pieces", "tool_result_texts", "translated", "unsupported", "with_trace", "written"]
