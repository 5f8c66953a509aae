"""``POST /v1/messages``: Anthropic's Messages API, gated, over the chat-completions path.

The request is translated into a chat completions body (:func:`chat_body`):
``system`` becomes the system message, ``tool_use`` blocks the assistant's
``tool_calls``, ``tool_result`` blocks tool messages (before the rest of their
user turn), images ``image_url`` parts, ``stop_sequences`` ``stop``,
``tool_choice`` any/tool/none ``required``/a function/``none``,
``output_config.format`` ``response_format``. The gated answer
(:func:`jurist.server.proxy.gated_chat`) is written back as a ``message``
(content blocks ``text`` and ``tool_use``; ``stop_reason`` ``end_turn``,
``max_tokens``, ``tool_use``, ``refusal``) or as the Messages SSE events
(``message_start``, ``content_block_start``, ``content_block_delta`` with
``text_delta`` / ``input_json_delta``, ``content_block_stop``,
``message_delta``, ``message_stop``) as the ``anthropic`` SDK reads them.

jurist's record is the top-level ``jurist`` field of the message (and of
``message_delta`` when streamed) and its events are named SSE events
(``event: jurist.evaluation``). Errors are Anthropic's ``{"type": "error",
"error": {"type", "message"}}`` with the status; a failure mid-stream is an
``event: error``, which makes the SDK raise.

Strict input: a field the Messages API does not define is a 400 naming the
closest one; a field it defines that a chat-completions upstream cannot honour
(``thinking``, server tools, documents ...) is a 400 naming it. The caching
hints (``cache_control``) and a tool result's ``is_error`` have no
chat-completions form: they are accepted and listed in the record's
``translation.not_relayed``, never dropped without a word.

The caller's ``x-api-key`` is the upstream key when it sends no
``Authorization`` header (as the chat path uses ``Authorization``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import partial
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, JsonValue, ValidationError

from jurist.ids import new_id
from jurist.jsonfiles import unknown_name
from jurist.server.errors import anthropic_error
from jurist.server.proxy import ProxyState, gated_chat
from jurist.server.proxy_relay import (Failed, Finish, JoinedCall, JuristEvent, Piece, Refusal, Refused, Text,
                                       ToolCalls, ToolPiece, as_object, as_string, body_problem, gathered, known_keys,
                                       relayed_error, tool_result_texts, translated, unsupported)
from jurist.server.proxy_relay import answer as relayed_answer

#: ``finish_reason`` -> ``stop_reason``.
STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "function_call": "tool_use",
                "content_filter": "refusal"}
BLOCK_TYPES = ("text", "image", "tool_use", "tool_result")


class MessagesBody(BaseModel):
    """A ``POST /v1/messages`` body: the fields the Messages API defines (an unknown one is refused
    with the closest name); those a chat-completions upstream cannot honour are refused when set."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    model: str = Field(min_length=1)
    max_tokens: int = Field(ge=1)
    messages: list[dict[str, Any]] = Field(min_length=1)
    system: str | list[dict[str, Any]] | None = None
    stream: bool | None = None
    stop_sequences: list[str] | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    metadata: dict[str, Any] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: dict[str, Any] | None = None
    output_config: dict[str, Any] | None = None
    thinking: dict[str, Any] | None = None
    cache_control: dict[str, Any] | None = None
    # Defined by the API; refused when set (see UNSUPPORTED).
    service_tier: str | None = None
    container: JsonValue = None
    context_management: JsonValue = None
    mcp_servers: JsonValue = None
    diagnostics: JsonValue = None
    inference_geo: str | None = None
    speed: str | None = None
    user_profile_id: str | None = None
    workspace_id: str | None = None
    # jurist's own: resume a failed request (note 004).
    is_continuation: bool = Field(default=False, validation_alias=AliasChoices("is_continuation", "isContinuation"))


UNSUPPORTED = {
    "service_tier": "a chat-completions upstream has no Anthropic service tiers",
    "container": "code execution containers run on Anthropic's servers",
    "context_management": "the upstream does not manage context for you",
    "mcp_servers": "MCP servers are called by Anthropic's servers; run the tools in your own loop",
    "diagnostics": "not a chat-completions option",
    "inference_geo": "not a chat-completions option",
    "speed": "not a chat-completions option",
    "user_profile_id": "not a chat-completions option",
    "workspace_id": "not a chat-completions option",
}


class Translation:
    """One request's translation: what had no chat-completions form and was accepted without it."""

    def __init__(self) -> None:
        self.not_relayed: list[JsonValue] = []

    def note(self, where: str, why: str) -> None:
        self.not_relayed.append({"field": where, "why": why})

    def cache(self, block: Mapping[str, Any], where: str) -> None:
        if block.get("cache_control") is not None:
            self.note(f"{where}.cache_control", "a caching hint: a chat-completions upstream caches prefixes itself")

    def record(self) -> dict[str, JsonValue]:
        return {"api": "messages", "not_relayed": list(self.not_relayed)}


def _text_block(block: Mapping[str, Any], where: str, t: Translation) -> str:
    known_keys(block, where, ("type", "text", "cache_control", "citations"))
    if block.get("citations"):
        raise unsupported(f"{where}.citations", "chat completions has no citations")
    t.cache(block, where)
    return as_string(block.get("text"), f"{where}.text")


def _image(block: Mapping[str, Any], where: str, t: Translation) -> dict[str, Any]:
    known_keys(block, where, ("type", "source", "cache_control", "transformations"))
    if block.get("transformations") is not None:
        raise unsupported(f"{where}.transformations", "chat completions does not transform images")
    t.cache(block, where)
    source = as_object(block.get("source"), f"{where}.source")
    kind = source.get("type")
    if kind == "base64":
        known_keys(source, f"{where}.source", ("type", "media_type", "data"))
        url = (f"data:{as_string(source.get('media_type'), f'{where}.source.media_type')};base64,"
               f"{as_string(source.get('data'), f'{where}.source.data')}")
    elif kind == "url":
        known_keys(source, f"{where}.source", ("type", "url"))
        url = as_string(source.get("url"), f"{where}.source.url")
    elif kind == "file":
        raise unsupported(f"{where}.source", "files stored at Anthropic cannot be read: send base64 data or a url")
    else:
        raise Refused(f"invalid request: {where}.source: " + unknown_name(str(kind), ("base64", "url"),
                                                                          what="source type"), f"{where}.source")
    return {"type": "image_url", "image_url": {"url": url}}


def _tool_result(block: Mapping[str, Any], where: str, t: Translation) -> dict[str, Any]:
    known_keys(block, where, ("type", "tool_use_id", "content", "is_error", "cache_control", "toolset_name"))
    if block.get("toolset_name") is not None:
        raise unsupported(f"{where}.toolset_name", "chat completions has plain function tools only")
    t.cache(block, where)
    if block.get("is_error"):
        t.note(f"{where}.is_error", "chat completions has no error flag on a tool result: its text went as it is")
    content = block.get("content", "")
    if isinstance(content, list):
        content = tool_result_texts(content, f"{where}.content", "text", lambda part, at: _text_block(part, at, t))
    elif not isinstance(content, str):
        raise Refused(f"invalid request: {where}.content must be a string or a list of blocks", f"{where}.content")
    return {"role": "tool", "tool_call_id": as_string(block.get("tool_use_id"), f"{where}.tool_use_id"),
            "content": content}


def _tool_use(block: Mapping[str, Any], where: str, t: Translation) -> dict[str, Any]:
    known_keys(block, where, ("type", "id", "name", "input", "cache_control", "caller", "toolset_name"))
    for name in ("caller", "toolset_name"):
        if block.get(name) is not None:
            raise unsupported(f"{where}.{name}", "chat completions has plain function tools only")
    t.cache(block, where)
    arguments = json.dumps(as_object(block.get("input"), f"{where}.input"), ensure_ascii=False)
    return {"id": as_string(block.get("id"), f"{where}.id"), "type": "function",
            "function": {"name": as_string(block.get("name"), f"{where}.name"), "arguments": arguments}}


def _blocks(content: Any, where: str) -> list[Mapping[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise Refused(f"invalid request: {where} must be a string or a list of blocks", where)
    blocks = [as_object(b, f"{where}[{i}]") for i, b in enumerate(content)]
    for i, block in enumerate(blocks):
        kind = block.get("type")
        if kind not in BLOCK_TYPES:
            if isinstance(kind, str) and kind in ("document", "search_result", "thinking", "redacted_thinking",
                                                  "server_tool_use", "container_upload") or \
                    isinstance(kind, str) and kind.endswith("_tool_result"):
                raise unsupported(f"{where}[{i}]", f"a {kind!r} block has no chat-completions form")
            raise Refused(f"invalid request: {where}[{i}]: " + unknown_name(str(kind), BLOCK_TYPES,
                                                                            what="block type"), f"{where}[{i}].type")
    return blocks


def _turn(message: Mapping[str, Any], where: str, t: Translation) -> list[dict[str, Any]]:
    """One Messages turn as chat messages (a user turn's tool results first, as tool messages)."""
    known_keys(message, where, ("role", "content"))
    role = message.get("role")
    blocks = _blocks(message.get("content"), f"{where}.content")
    at = f"{where}.content"
    if role == "assistant":
        texts, calls = [], []
        for i, block in enumerate(blocks):
            if block["type"] == "text":
                texts.append(_text_block(block, f"{at}[{i}]", t))
            elif block["type"] == "tool_use":
                calls.append(_tool_use(block, f"{at}[{i}]", t))
            else:
                raise unsupported(f"{at}[{i}]", f"an assistant turn holds text and tool_use blocks, not "
                                                 f"{block['type']!r}")
        turn: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
        if calls:
            turn["tool_calls"] = calls
        elif turn["content"] is None:
            turn["content"] = ""
        return [turn]
    if role == "system":
        return [{"role": "system", "content": "".join(_text_block(b, f"{at}[{i}]", t) if b["type"] == "text"
                                                      else _system_only(f"{at}[{i}]") for i, b in enumerate(blocks))}]
    if role != "user":
        raise Refused(f"invalid request: {where}: " + unknown_name(str(role), ("user", "assistant"), what="role"),
                      f"{where}.role")
    results: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for i, block in enumerate(blocks):
        kind = block["type"]
        if kind == "tool_result":
            results.append(_tool_result(block, f"{at}[{i}]", t))
        elif kind == "text":
            parts.append({"type": "text", "text": _text_block(block, f"{at}[{i}]", t)})
        elif kind == "image":
            parts.append(_image(block, f"{at}[{i}]", t))
        else:
            raise unsupported(f"{at}[{i}]", "a user turn holds text, image and tool_result blocks, not tool_use")
    if len(parts) == 1 and parts[0]["type"] == "text":
        return [*results, {"role": "user", "content": parts[0]["text"]}]
    return [*results, {"role": "user", "content": parts}] if parts else results


def _system_only(where: str) -> str:
    raise unsupported(where, "a system turn holds text only")


def _system(system: str | list[dict[str, Any]], t: Translation) -> str:
    if isinstance(system, str):
        return system
    texts = []
    for i, block in enumerate(system):
        if block.get("type") != "text":
            raise unsupported(f"system[{i}]", "system holds text blocks only")
        texts.append(_text_block(block, f"system[{i}]", t))
    return "\n\n".join(texts)


def _tools(tools: list[dict[str, Any]], t: Translation) -> list[dict[str, Any]]:
    out = []
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        if tool.get("type") not in (None, "custom"):
            raise unsupported(where, f"a {tool.get('type')!r} tool runs on Anthropic's servers; chat completions "
                                      "has function tools only (tools with name, description and input_schema)")
        known_keys(tool, where, ("type", "name", "description", "input_schema", "cache_control", "strict",
                            "allowed_callers", "defer_loading", "eager_input_streaming", "input_examples"))
        for name in ("allowed_callers", "defer_loading", "eager_input_streaming", "input_examples"):
            if tool.get(name) is not None:
                raise unsupported(f"{where}.{name}", "not an option of a chat-completions function tool")
        t.cache(tool, where)
        function: dict[str, Any] = {"name": as_string(tool.get("name"), f"{where}.name"),
                                    "parameters": as_object(tool.get("input_schema"), f"{where}.input_schema")}
        if tool.get("description") is not None:
            function["description"] = tool["description"]
        if tool.get("strict") is not None:
            function["strict"] = tool["strict"]
        out.append({"type": "function", "function": function})
    return out


def _tool_choice(choice: dict[str, Any], chat: dict[str, Any]) -> None:
    kind = choice.get("type")
    if kind == "none":
        known_keys(choice, "tool_choice", ("type",))
        chat["tool_choice"] = "none"
        return
    if kind == "tool":
        known_keys(choice, "tool_choice", ("type", "name", "disable_parallel_tool_use"))
        chat["tool_choice"] = {"type": "function", "function": {"name": as_string(choice.get("name"),
                                                                                 "tool_choice.name")}}
    elif kind in ("auto", "any"):
        known_keys(choice, "tool_choice", ("type", "disable_parallel_tool_use"))
        chat["tool_choice"] = "auto" if kind == "auto" else "required"
    else:
        raise Refused("invalid request: tool_choice: " + unknown_name(str(kind), ("auto", "any", "tool", "none"),
                                                                      what="type"), "tool_choice.type")
    if choice.get("disable_parallel_tool_use"):
        chat["parallel_tool_calls"] = False


def _output_config(config: dict[str, Any], chat: dict[str, Any]) -> None:
    known_keys(config, "output_config", ("effort", "format"))
    if config.get("effort") is not None:
        chat["reasoning_effort"] = config["effort"]
    fmt = config.get("format")
    if fmt is None:
        return
    fmt = as_object(fmt, "output_config.format")
    known_keys(fmt, "output_config.format", ("type", "schema"))
    if fmt.get("type") != "json_schema":
        raise Refused("invalid request: output_config.format: " + unknown_name(str(fmt.get("type")), ("json_schema",),
                                                                               what="type"), "output_config.format")
    chat["response_format"] = {"type": "json_schema", "json_schema": {
        "name": "output", "schema": as_object(fmt.get("schema"), "output_config.format.schema")}}


def chat_body(raw: dict[str, Any]) -> tuple[MessagesBody, dict[str, Any], Translation]:
    """The Messages request ``raw`` read strictly, the chat completions body that asks the same, and
    what had no chat-completions form."""
    try:
        body = MessagesBody.model_validate(raw)
    except ValidationError as exc:
        raise body_problem(exc, MessagesBody) from None
    for name, why in UNSUPPORTED.items():
        if getattr(body, name) is not None:
            raise unsupported(name, why)
    t = Translation()
    if body.thinking is not None and body.thinking.get("type") != "disabled":
        raise unsupported("thinking", "a chat-completions upstream returns no thinking blocks "
                                       "(output_config.effort is forwarded as reasoning_effort)")
    if body.cache_control is not None:
        t.note("cache_control", "a caching hint: a chat-completions upstream caches prefixes itself")
    messages: list[dict[str, Any]] = []
    if body.system:
        messages.append({"role": "system", "content": _system(body.system, t)})
    for i, message in enumerate(body.messages):
        messages.extend(_turn(message, f"messages[{i}]", t))
    chat: dict[str, Any] = {"model": body.model, "messages": messages, "max_tokens": body.max_tokens}
    if body.stream:
        chat["stream"] = True
    for name in ("temperature", "top_p", "top_k"):
        if getattr(body, name) is not None:
            chat[name] = getattr(body, name)
    if body.stop_sequences:
        chat["stop"] = body.stop_sequences
    if body.metadata is not None:
        known_keys(body.metadata, "metadata", ("user_id",))
        if body.metadata.get("user_id") is not None:
            chat["user"] = as_string(body.metadata["user_id"], "metadata.user_id")
    if body.tools:
        chat["tools"] = _tools(body.tools, t)
    if body.tool_choice is not None:
        _tool_choice(body.tool_choice, chat)
    if body.output_config is not None:
        _output_config(body.output_config, chat)
    if body.is_continuation:
        chat["is_continuation"] = True
    return body, chat, t


# --- the answer ---------------------------------------------------------------------------------


def error_body(status: int, message: str, *, extra: Mapping[str, JsonValue] | None = None,
               jurist: dict[str, JsonValue] | None = None) -> dict[str, JsonValue]:
    """Anthropic's error shape (:func:`jurist.server.errors.anthropic_error`, which the server's door
    and error handlers use on this route too)."""
    return anthropic_error(status, message, extra=extra, jurist=jurist)


def error_response(failed: Failed) -> JSONResponse:
    """A failure in Anthropic's shape; the fields of OpenAI's object besides its type (code, param, the
    continue fields) are kept in ``error``."""
    extra = {k: v for k, v in failed.error.items() if k not in ("message", "type") and v is not None}
    return JSONResponse(error_body(failed.status, failed.message, extra=extra, jurist=failed.jurist),
                        status_code=failed.status, headers=failed.headers)


def _stop_reason(finish: Finish, calls: ToolCalls) -> str:
    reason = STOP_REASONS.get(finish.reason or "", "end_turn")
    return "tool_use" if calls.calls and reason == "end_turn" else reason


def _input(call: JoinedCall) -> dict[str, JsonValue] | Failed:
    text = call.arguments.strip()
    try:
        value = json.loads(text) if text else {}
    except ValueError as exc:
        value = exc
    if not isinstance(value, dict):
        return Failed(502, {"message": f"the upstream's call of tool {call.name!r} has arguments that are not a "
                                       f"JSON object: {text[:200]!r}", "type": "api_error", "code": "bad_gateway"})
    return value


class Shape:
    """What a ``message`` takes from its request."""

    def __init__(self, body: MessagesBody, translation: Translation) -> None:
        self.body = body
        self.translation = translation
        self.id = f"msg_{new_id()}"

    def usage(self, finish: Finish | None) -> dict[str, JsonValue]:
        usage = finish.usage if finish is not None else None
        if usage is None:
            return {"input_tokens": 0, "output_tokens": 0}
        return {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens}

    def jurist(self, finish: Finish) -> dict[str, JsonValue] | None:
        """The record, with what the translation could not relay and whether the usage is known."""
        if finish.jurist is None and not self.translation.not_relayed and finish.usage is not None:
            return None
        record = dict(finish.jurist or {})
        translation = self.translation.record()
        if finish.usage is None:
            translation["usage"] = "not reported by the upstream (0 shown)"
        record["translation"] = translation
        return record

    def message(self, content: list[JsonValue], finish: Finish | None, stop_reason: str | None) -> dict[str, JsonValue]:
        return {"id": self.id, "type": "message", "role": "assistant", "model": self.body.model,
                "content": content, "stop_reason": stop_reason, "stop_sequence": None,
                "usage": self.usage(finish)}


def message_object(shape: Shape, pieces: list[Piece]) -> dict[str, JsonValue] | Failed:
    """A non-streamed answer's pieces as a ``message`` (or its failure); a refusal's text is its text
    (the Messages API has no refusal block: ``stop_reason`` says it)."""
    answer = gathered(pieces)
    if isinstance(answer, Failed):
        return answer
    finish, calls, text = answer.finish, answer.calls, answer.text + answer.refusal
    content: list[JsonValue] = []
    if text:
        content.append({"type": "text", "text": text, "citations": None})
    for call in calls.calls.values():
        value = _input(call)
        if isinstance(value, Failed):
            return Failed(value.status, value.error, finish.jurist)
        content.append({"type": "tool_use", "id": call.id or f"toolu_{new_id()}", "name": call.name,
                        "input": value})
    message = shape.message(content, finish, _stop_reason(finish, calls))
    jurist = shape.jurist(finish)
    if jurist is not None:
        message["jurist"] = jurist
    return message


class MessagesStream:
    """Writes one answer's Messages SSE events from its pieces."""

    def __init__(self, shape: Shape) -> None:
        self.shape = shape
        self.index = -1  # the open content block (-1: none yet)
        self.open: str | None = None  # "text" or the tool call index's key
        self.calls = ToolCalls()
        self.blocks: dict[int, int] = {}  # tool call index -> content block index

    @staticmethod
    def event(kind: str, data: Mapping[str, JsonValue]) -> str:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"

    def start(self) -> str:
        return self.event("message_start", {"message": self.shape.message([], None, None)})

    def _stop(self) -> str:
        if self.open is None:
            return ""
        self.open = None
        return self.event("content_block_stop", {"index": self.index})

    def text(self, piece: Text | Refusal) -> str:
        text = piece.text
        if not text:
            return ""
        out = ""
        if self.open != "text":
            out += self._stop()
            self.index += 1
            self.open = "text"
            out += self.event("content_block_start", {"index": self.index,
                                                      "content_block": {"type": "text", "text": "", "citations": None}})
        return out + self.event("content_block_delta", {"index": self.index,
                                                        "delta": {"type": "text_delta", "text": text}})

    def refusal(self, piece: Refusal) -> str:
        """A refusal's text is the message's text: the Messages API has no refusal block (stop_reason says it)."""
        return self.text(piece)

    def tool(self, piece: ToolPiece) -> str:
        call, new = self.calls.add(piece)
        out = ""
        if new:
            out += self._stop()
            self.index += 1
            self.open = f"tool:{piece.index}"
            self.blocks[piece.index] = self.index
            call.id = call.id or f"toolu_{new_id()}"
            out += self.event("content_block_start", {"index": self.index, "content_block": {
                "type": "tool_use", "id": call.id, "name": call.name, "input": {}}})
        if piece.arguments:
            out += self.event("content_block_delta", {"index": self.blocks[piece.index], "delta": {
                "type": "input_json_delta", "partial_json": piece.arguments}})
        return out

    def jurist(self, piece: JuristEvent) -> str:
        kind = f"jurist.{piece.kind}"
        return self.event(kind, {"data": piece.data})

    def finish(self, piece: Finish) -> str:
        for call in self.calls.calls.values():
            value = _input(call)
            if isinstance(value, Failed):
                return self.failed(Failed(value.status, value.error, piece.jurist))
        delta: dict[str, JsonValue] = {"delta": {"stop_reason": _stop_reason(piece, self.calls), "stop_sequence": None},
                                       "usage": self.shape.usage(piece)}
        jurist = self.shape.jurist(piece)
        if jurist is not None:
            delta["jurist"] = jurist
        return self._stop() + self.event("message_delta", delta) + self.event("message_stop", {})

    def failed(self, piece: Failed) -> str:
        """``jurist.error`` (the continue fields), then ``error``, on which the SDK raises."""
        body = json.loads(bytes(error_response(piece).body))
        return self.event("jurist.error", {"data": body}) + f"event: error\ndata: {json.dumps(body)}\n\n"


async def answer(shape: Shape, gated: Response) -> Response:
    """The gated chat answer ``gated`` written as the Messages API answers."""
    return await relayed_answer(gated, build=partial(message_object, shape), events=partial(MessagesStream, shape),
                                error_response=error_response)


def with_api_key(request: Request) -> Request:
    """The request with ``x-api-key`` as its ``Authorization: Bearer`` when it has no ``Authorization``:
    the key the anthropic SDK sends is the one the chat path passes upstream."""
    key = request.headers.get("x-api-key")
    if not key or request.headers.get("authorization"):
        return request
    scope = dict(request.scope)
    scope["headers"] = [*request.scope["headers"], (b"authorization", f"Bearer {key}".encode("latin-1"))]
    return Request(scope, request.receive)


def _refused(exc: Refused) -> JSONResponse:
    return JSONResponse(error_body(exc.status, exc.message, extra={"param": exc.param} if exc.param else None),
                        status_code=exc.status)


def build_router(proxy: ProxyState) -> APIRouter:
    router = APIRouter(tags=["proxy"])

    @router.post("/v1/messages")
    async def messages(request: Request) -> Response:
        """Anthropic's Messages API, gated: translated to chat completions for the upstream."""
        translation = await translated(request, chat_body, unreadable=lambda raw: error_response(relayed_error(raw)),
                                       refused=_refused)
        if isinstance(translation, Response):
            return translation
        body, chat, t = translation
        gated = await gated_chat(proxy, with_api_key(request), chat)
        return await answer(Shape(body, t), gated)

    return router


__all__ = ["MessagesBody", "MessagesStream", "Shape", "answer", "build_router", "chat_body", "error_body",
           "message_object"]
