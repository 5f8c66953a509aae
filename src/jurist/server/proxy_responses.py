"""``POST /v1/responses``: OpenAI's Responses API, gated, over the chat-completions path.

The request is translated into a chat completions body (:func:`chat_body`),
answered by :func:`jurist.server.proxy.gated_chat` (generated upstream, judged,
regenerated, recorded), and the answer written back as a ``response`` object
(:func:`response_object`) or the Responses SSE events, in the order the
``openai`` SDK's stream reader expects (:class:`ResponsesStream`):
``response.created``, ``response.in_progress``, ``response.output_item.added``,
``response.content_part.added``, ``response.output_text.delta`` ...,
``response.function_call_arguments.delta`` ..., the ``.done`` events,
``response.completed`` (``response.incomplete`` for a cut-off answer).

jurist's record goes in a top-level ``jurist`` field of the response, and its
events as named SSE events (``event: jurist.evaluation``, data ``{"type":
"jurist.evaluation", "sequence_number", "data"}``), which stock readers skip.

Strict input: a field the Responses API does not define is a 400 naming the
closest one; a field it defines that a chat-completions upstream cannot honour
(``previous_response_id``, hosted tools, ``background`` ...) is a 400 naming
the field, never dropped. Errors keep OpenAI's error shape.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from functools import partial
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, JsonValue, ValidationError

from jurist.ids import new_id
from jurist.jsonfiles import unknown_name
from jurist.server.proxy import ProxyState, gated_chat
from jurist.server.proxy_relay import (Failed, Finish, JoinedCall, JuristEvent, Piece, Refusal, Refused, Text,
                                       ToolCalls, ToolPiece, Usage, as_object, as_string, body_problem, gathered,
                                       known_keys, tool_result_texts, translated, unsupported)
from jurist.server.proxy_relay import answer as relayed_answer
from jurist.server.proxy_sse import openai_error

#: What ``include`` may ask for: log probabilities, and reasoning content (there are no reasoning items).
INCLUDABLE = ("message.output_text.logprobs", "reasoning.encrypted_content")
#: ``finish_reason`` -> ``incomplete_details.reason`` (the other reasons complete the response).
INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}
NOT_KEPT = ("the proxy's upstream speaks chat completions and keeps no responses or conversations: "
            "send the whole conversation in input")


class ResponsesBody(BaseModel):
    """A ``POST /v1/responses`` body: every field the Responses API defines (an unknown one is refused
    with the closest name); the ones a chat-completions upstream cannot honour are refused when set."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    model: str = Field(min_length=1)
    input: str | list[dict[str, Any]]
    instructions: str | None = None
    max_output_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = None
    top_p: float | None = None
    top_logprobs: int | None = Field(default=None, ge=0)
    stream: bool | None = None
    stream_options: dict[str, Any] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    text: dict[str, Any] | None = None
    metadata: dict[str, str] | None = None
    user: str | None = None
    safety_identifier: str | None = None
    prompt_cache_key: str | None = None
    service_tier: str | None = None
    include: list[str] | None = None
    store: bool | None = None
    reasoning: dict[str, Any] | None = None
    truncation: Literal["auto", "disabled"] | None = None
    # Defined by the API; refused when set (see UNSUPPORTED).
    previous_response_id: str | None = None
    conversation: JsonValue = None
    prompt: JsonValue = None
    background: bool | None = None
    background_options: JsonValue = None
    max_tool_calls: int | None = None
    context_management: JsonValue = None
    access_programs: JsonValue = None
    image: JsonValue = None
    moderation: JsonValue = None
    prompt_cache_options: JsonValue = None
    prompt_cache_retention: str | None = None
    # jurist's own: resume a failed request (note 004).
    is_continuation: bool = Field(default=False, validation_alias=AliasChoices("is_continuation", "isContinuation"))


#: Fields the Responses API defines that the proxy cannot honour, and why.
UNSUPPORTED = {
    "previous_response_id": NOT_KEPT,
    "conversation": NOT_KEPT,
    "prompt": "stored prompt templates live on OpenAI's servers: send the instructions and input themselves",
    "background": "background responses are not served: ask with stream or wait for the answer",
    "background_options": "background responses are not served",
    "max_tool_calls": "a chat-completions upstream has no limit on tool calls (the proxy's own is --max-iterations)",
    "context_management": "the upstream does not compact context",
    "access_programs": "not a chat-completions option",
    "image": "not a chat-completions option",
    "moderation": "the upstream moderates nothing for the proxy",
    "prompt_cache_options": "not a chat-completions option (prompt_cache_key is forwarded)",
    "prompt_cache_retention": "not a chat-completions option (prompt_cache_key is forwarded)",
}


# --- the request --------------------------------------------------------------------------------


def _input_part(part: Any, where: str, role: str) -> dict[str, Any]:
    """One content part of an input message as a chat-completions part."""
    part = as_object(part, where)
    kind = part.get("type")
    if kind in ("input_text", "output_text") or (kind == "text" and role == "assistant"):
        allowed = ("type", "text", "annotations", "logprobs") if kind == "output_text" else ("type", "text")
        known_keys(part, where, allowed)
        if part.get("annotations"):
            raise unsupported(f"{where}.annotations", "annotations cannot be sent to a chat-completions upstream")
        return {"type": "text", "text": as_string(part.get("text"), f"{where}.text")}
    if kind == "refusal" and role == "assistant":
        known_keys(part, where, ("type", "refusal"))
        return {"type": "refusal", "refusal": as_string(part.get("refusal"), f"{where}.refusal")}
    if role == "assistant":
        raise Refused(f"invalid request: {where}: " + unknown_name(str(kind), ("output_text", "refusal"),
                                                                    what="part type"), where)
    if kind == "input_image":
        known_keys(part, where, ("type", "image_url", "detail", "file_id"))
        if part.get("file_id") is not None:
            raise unsupported(f"{where}.file_id", "files stored at OpenAI cannot be read: send image_url "
                                                   "(an http(s) or data: URL)")
        url = as_string(part.get("image_url"), f"{where}.image_url")
        image: dict[str, Any] = {"url": url}
        detail = part.get("detail")
        if detail is not None and detail not in ("auto", "low", "high"):
            raise unsupported(f"{where}.detail", f"chat completions knows auto, low and high, not {detail!r}")
        if detail is not None:
            image["detail"] = detail
        return {"type": "image_url", "image_url": image}
    if kind == "input_file":
        known_keys(part, where, ("type", "file_data", "file_id", "filename", "file_url", "detail"))
        for name in ("file_url", "detail"):
            if part.get(name) is not None:
                raise unsupported(f"{where}.{name}", "chat completions takes a file's data, filename or file_id")
        file = {k: part[k] for k in ("file_data", "file_id", "filename") if part.get(k) is not None}
        return {"type": "file", "file": file}
    raise Refused(f"invalid request: {where}: " + unknown_name(str(kind), ("input_text", "input_image", "input_file"),
                                                                what="part type"), where)


def _message(item: Mapping[str, Any], where: str) -> dict[str, Any]:
    known_keys(item, where, ("type", "role", "content", "id", "status", "phase"))
    role = item.get("role")
    if role not in ("user", "assistant", "system", "developer"):
        raise Refused(f"invalid request: {where}: " + unknown_name(str(role), ("user", "assistant", "system",
                                                                              "developer"), what="role"), where)
    if item.get("phase") is not None:
        raise unsupported(f"{where}.phase", "chat completions has no message phases")
    content = item.get("content")
    if isinstance(content, str):
        return {"role": role, "content": content}
    if not isinstance(content, list):
        raise Refused(f"invalid request: {where}.content must be a string or a list of parts", f"{where}.content")
    parts = [_input_part(p, f"{where}.content[{i}]", str(role)) for i, p in enumerate(content)]
    if role in ("system", "developer") and any(p["type"] != "text" for p in parts):
        raise unsupported(f"{where}.content", "a system or developer message holds text only")
    return {"role": role, "content": parts}


def _input_text(part: Mapping[str, Any], where: str) -> str:
    known_keys(part, where, ("type", "text"))
    return as_string(part.get("text"), f"{where}.text")


def _tool_output(item: Mapping[str, Any], where: str) -> dict[str, Any]:
    known_keys(item, where, ("type", "call_id", "output", "id", "status", "name", "namespace", "caller"))
    for name in ("namespace", "caller"):
        if item.get(name) is not None:
            raise unsupported(f"{where}.{name}", "chat completions has plain function tools only")
    call_id = as_string(item.get("call_id"), f"{where}.call_id")
    output = item.get("output")
    if isinstance(output, list):
        parts = tool_result_texts(output, f"{where}.output", "input_text", _input_text)
        return {"role": "tool", "tool_call_id": call_id, "content": parts}
    return {"role": "tool", "tool_call_id": call_id, "content": as_string(output, f"{where}.output")}


def _function_call(item: Mapping[str, Any], where: str) -> dict[str, Any]:
    known_keys(item, where, ("type", "call_id", "name", "arguments", "id", "status", "namespace", "caller"))
    for name in ("namespace", "caller"):
        if item.get(name) is not None:
            raise unsupported(f"{where}.{name}", "chat completions has plain function tools only")
    return {"id": as_string(item.get("call_id"), f"{where}.call_id"), "type": "function",
            "function": {"name": as_string(item.get("name"), f"{where}.name"),
                         "arguments": as_string(item.get("arguments"), f"{where}.arguments")}}


ITEM_TYPES = ("message", "function_call", "function_call_output")


def chat_messages(body: ResponsesBody) -> list[dict[str, Any]]:
    """``instructions`` and ``input`` as chat messages: function calls join the assistant turn before
    them (one assistant message with its text and its tool calls), their outputs are tool messages."""
    messages: list[dict[str, Any]] = []
    if body.instructions:
        messages.append({"role": "system", "content": body.instructions})
    if isinstance(body.input, str):
        messages.append({"role": "user", "content": body.input})
        return messages
    for i, raw in enumerate(body.input):
        where = f"input[{i}]"
        kind = raw.get("type", "message")
        if kind == "message":
            messages.append(_message(raw, where))
        elif kind == "function_call":
            call = _function_call(raw, where)
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)
                if last.get("content") == "":
                    last["content"] = None
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            messages.append(_tool_output(raw, where))
        elif kind in ("reasoning", "item_reference", "compaction"):
            raise unsupported(f"{where}", f"an input item of type {kind!r} needs OpenAI's own servers; "
                                           "the proxy's upstream speaks chat completions")
        elif isinstance(kind, str) and kind.endswith(("_call", "_call_output", "_output")) or kind in (
                "mcp_list_tools", "mcp_approval_request", "mcp_approval_response", "additional_tools",
                "configuration_update", "compaction_trigger", "program", "program_output"):
            raise unsupported(f"{where}", f"{kind!r} items belong to hosted tools; chat completions has "
                                           "function tools only (function_call, function_call_output)")
        else:
            raise Refused(f"invalid request: {where}: " + unknown_name(str(kind), ITEM_TYPES, what="item type"),
                          f"{where}.type")
    if not messages:
        raise Refused("invalid request: input holds no message", "input")
    return messages


def _tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        if tool.get("type") != "function":
            raise unsupported(f"{where}", f"a {tool.get('type')!r} tool runs on OpenAI's servers; chat "
                                           "completions has function tools only")
        known_keys(tool, where, ("type", "name", "parameters", "strict", "description", "allowed_callers",
                            "defer_loading", "output_schema"))
        for name in ("allowed_callers", "defer_loading", "output_schema"):
            if tool.get(name) is not None:
                raise unsupported(f"{where}.{name}", "not an option of a chat-completions function tool")
        function = {"name": as_string(tool.get("name"), f"{where}.name")}
        for name in ("description", "parameters", "strict"):
            if tool.get(name) is not None:
                function[name] = tool[name]
        out.append({"type": "function", "function": function})
    return out


def _tool_choice(choice: str | dict[str, Any]) -> str | dict[str, Any]:
    if isinstance(choice, str):
        if choice not in ("none", "auto", "required"):
            raise Refused("invalid request: tool_choice: " + unknown_name(choice, ("none", "auto", "required"),
                                                                          what="value"), "tool_choice")
        return choice
    if choice.get("type") == "function":
        known_keys(choice, "tool_choice", ("type", "name"))
        return {"type": "function", "function": {"name": as_string(choice.get("name"), "tool_choice.name")}}
    raise unsupported("tool_choice", f"a tool choice of type {choice.get('type')!r}: chat completions chooses "
                                      "none, auto, required or one function")


def _response_format(text: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """``text`` as chat completions' ``response_format`` and other fields (``verbosity``)."""
    known_keys(text, "text", ("format", "verbosity"))
    more = {"verbosity": text["verbosity"]} if text.get("verbosity") is not None else {}
    fmt = text.get("format")
    if fmt is None:
        return None, more
    fmt = as_object(fmt, "text.format")
    kind = fmt.get("type")
    if kind in ("text", "json_object"):
        known_keys(fmt, "text.format", ("type",))
        return {"type": kind}, more
    if kind == "json_schema":
        known_keys(fmt, "text.format", ("type", "name", "schema", "description", "strict"))
        schema = {k: fmt[k] for k in ("name", "schema", "description", "strict") if fmt.get(k) is not None}
        return {"type": "json_schema", "json_schema": schema}, more
    raise Refused("invalid request: text.format: " + unknown_name(str(kind), ("text", "json_object", "json_schema"),
                                                                  what="format type"), "text.format.type")


def _checked(body: ResponsesBody) -> None:
    """Refuse what the Responses API defines and a chat-completions upstream cannot honour."""
    for name, why in UNSUPPORTED.items():
        value = getattr(body, name)
        if value is not None and value is not False:
            raise unsupported(name, why)
    if body.store:
        raise unsupported("store", "the proxy keeps no responses to fetch later (GET /v1/responses/{id} is not "
                                    "served): leave store out or set it to false; jurist's record of the request "
                                    "is stored under its trace id")
    if body.truncation == "auto":
        raise unsupported("truncation", "a chat-completions upstream does not truncate input for you")
    for i, name in enumerate(body.include or []):
        if name not in INCLUDABLE:
            raise unsupported(f"include[{i}]", f"{name!r} belongs to hosted tools or stored files "
                                                f"(the proxy can include {', '.join(INCLUDABLE)})")
    if body.reasoning is not None:
        known_keys(body.reasoning, "reasoning", ("effort", "summary", "generate_summary"))
        for name in ("summary", "generate_summary"):
            if body.reasoning.get(name) is not None:
                raise unsupported(f"reasoning.{name}", "chat completions returns no reasoning summaries")
    if body.stream_options is not None:
        known_keys(body.stream_options, "stream_options", ("include_obfuscation",))


def chat_body(raw: dict[str, Any]) -> tuple[ResponsesBody, dict[str, Any]]:
    """The Responses request ``raw`` read strictly, and the chat completions body that asks the same."""
    try:
        body = ResponsesBody.model_validate(raw)
    except ValidationError as exc:
        raise body_problem(exc, ResponsesBody) from None
    _checked(body)
    chat: dict[str, Any] = {"model": body.model, "messages": chat_messages(body)}
    if body.stream:
        chat["stream"] = True
    if body.max_output_tokens is not None:
        chat["max_tokens"] = body.max_output_tokens
    for name in ("temperature", "top_p", "parallel_tool_calls", "metadata", "user", "safety_identifier",
                 "prompt_cache_key", "service_tier"):
        value = getattr(body, name)
        if value is not None:
            chat[name] = value
    if body.tools:
        chat["tools"] = _tools(body.tools)
    if body.tool_choice is not None:
        chat["tool_choice"] = _tool_choice(body.tool_choice)
    if body.text is not None:
        fmt, more = _response_format(body.text)
        if fmt is not None:
            chat["response_format"] = fmt
        chat.update(more)
    if body.reasoning is not None and body.reasoning.get("effort") is not None:
        chat["reasoning_effort"] = body.reasoning["effort"]
    if "message.output_text.logprobs" in (body.include or []) or body.top_logprobs is not None:
        chat["logprobs"] = True
        if body.top_logprobs is not None:
            chat["top_logprobs"] = body.top_logprobs
    if body.is_continuation:
        chat["is_continuation"] = True
    return body, chat


# --- the answer ---------------------------------------------------------------------------------


def _usage(usage: Usage | None) -> dict[str, JsonValue] | None:
    if usage is None:
        return None  # the upstream reported none: not a made-up 0
    return {"input_tokens": usage.input_tokens, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": usage.output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage.total_tokens}


def _logprobs(entries: list[JsonValue] | None) -> list[JsonValue]:
    """Chat completions' ``logprobs.content`` entries as the Responses API's."""
    out: list[JsonValue] = []
    for entry in entries or []:
        if not isinstance(entry, dict):
            continue
        top = entry.get("top_logprobs")
        out.append({"token": entry.get("token"), "bytes": entry.get("bytes") or [], "logprob": entry.get("logprob"),
                    "top_logprobs": [{"token": t.get("token"), "bytes": t.get("bytes") or [],
                                      "logprob": t.get("logprob")}
                                     for t in (top if isinstance(top, list) else []) if isinstance(t, dict)]})
    return out


class Shape:
    """The parts of a ``response`` object that come from the request (echoed as the API does)."""

    def __init__(self, body: ResponsesBody) -> None:
        self.body = body
        self.id = f"resp_{new_id()}"
        self.created_at = int(time.time())
        self.logprobs = "message.output_text.logprobs" in (body.include or [])

    def response(self, status: str, output: list[JsonValue], *, usage: Usage | None = None,
                 incomplete: str | None = None, error: JsonValue = None,
                 jurist: dict[str, JsonValue] | None = None) -> dict[str, JsonValue]:
        b = self.body
        reasoning: dict[str, JsonValue] = {"effort": (b.reasoning or {}).get("effort"), "summary": None}
        out: dict[str, JsonValue] = {
            "id": self.id, "object": "response", "created_at": self.created_at, "status": status,
            "completed_at": int(time.time()) if status == "completed" else None,
            "error": error, "incomplete_details": {"reason": incomplete} if incomplete else None,
            "instructions": b.instructions, "max_output_tokens": b.max_output_tokens, "model": b.model,
            "output": output, "parallel_tool_calls": b.parallel_tool_calls is not False,
            "previous_response_id": None, "reasoning": reasoning, "store": False,
            "temperature": b.temperature, "text": b.text or {"format": {"type": "text"}},
            "tool_choice": b.tool_choice if b.tool_choice is not None else "auto",
            "tools": list[JsonValue](b.tools or []), "top_logprobs": b.top_logprobs, "top_p": b.top_p,
            "truncation": b.truncation or "disabled", "usage": _usage(usage), "user": b.user,
            "metadata": dict[str, JsonValue](b.metadata or {}), "service_tier": b.service_tier,
        }
        if jurist is not None:
            out["jurist"] = jurist
        return out

    def message(self, item_id: str, text: str, refusal: str, logprobs: list[JsonValue],
                status: str) -> dict[str, JsonValue]:
        content: list[JsonValue] = []
        if text or not refusal:
            content.append(self.text_part(text, logprobs))
        if refusal:
            content.append({"type": "refusal", "refusal": refusal})
        return {"id": item_id, "type": "message", "role": "assistant", "status": status, "content": content}

    def text_part(self, text: str, logprobs: list[JsonValue]) -> dict[str, JsonValue]:
        return {"type": "output_text", "text": text, "annotations": [],
                "logprobs": _logprobs(logprobs) if self.logprobs else []}

    @staticmethod
    def function_call(item_id: str, call: JoinedCall, status: str) -> dict[str, JsonValue]:
        return {"id": item_id, "type": "function_call", "call_id": call.id, "name": call.name,
                "arguments": call.arguments, "status": status}


def _status(finish: Finish) -> tuple[str, str | None]:
    incomplete = INCOMPLETE.get(finish.reason or "")
    return ("incomplete", incomplete) if incomplete else ("completed", None)


def response_object(shape: Shape, pieces: list[Piece]) -> dict[str, JsonValue] | Failed:
    """A non-streamed answer's pieces as a ``response`` object (or its failure)."""
    answer = gathered(pieces)
    if isinstance(answer, Failed):
        return answer
    finish, calls = answer.finish, answer.calls
    status, incomplete = _status(finish)
    output: list[JsonValue] = []
    if answer.text or answer.refusal or not calls.calls:
        output.append(shape.message(f"msg_{new_id()}", answer.text, answer.refusal, answer.logprobs, status))
    for call in calls.calls.values():
        call.id = call.id or f"call_{new_id()}"
        output.append(shape.function_call(f"fc_{new_id()}", call, "completed"))
    return shape.response(status, output, usage=finish.usage, incomplete=incomplete, jurist=finish.jurist)


def error_response(failed: Failed) -> JSONResponse:
    payload: dict[str, JsonValue] = {"error": failed.error}
    if failed.jurist is not None:
        payload["jurist"] = failed.jurist
    return JSONResponse(payload, status_code=failed.status, headers=failed.headers)


class ResponsesStream:
    """Writes one answer's Responses SSE events from its pieces (one sequence of numbers)."""

    def __init__(self, shape: Shape) -> None:
        self.shape = shape
        self.seq = 0
        self.output: list[JsonValue] = []  # the finished items, in output order
        self.next_index = 0
        # the open message item: (output index, id, text pieces, refusal pieces, logprobs)
        self.message: tuple[int, str, list[str], list[str], list[JsonValue]] | None = None
        self.calls = ToolCalls()
        self.call_items: dict[int, tuple[int, str]] = {}  # tool call index -> (output index, item id)
        self.slots: dict[int, JsonValue] = {}  # output index -> finished item

    def event(self, kind: str, **fields: JsonValue) -> str:
        data = {"type": kind, "sequence_number": self.seq, **fields}
        self.seq += 1
        return f"event: {kind}\ndata: {json.dumps(data)}\n\n"

    def start(self) -> str:
        response = self.shape.response("in_progress", [])
        return self.event("response.created", response=response) + self.event("response.in_progress",
                                                                               response=response)

    def text(self, piece: Text) -> str:
        out = ""
        if self.message is None:
            index, item_id = self.next_index, f"msg_{new_id()}"
            self.next_index += 1
            self.message = (index, item_id, [], [], [])
            item: dict[str, JsonValue] = {"id": item_id, "type": "message", "role": "assistant",
                                          "status": "in_progress", "content": []}
            out += self.event("response.output_item.added", output_index=index, item=item)
            out += self.event("response.content_part.added", item_id=item_id, output_index=index, content_index=0,
                              part=self.shape.text_part("", []))
        index, item_id, texts, _, logprobs = self.message
        texts.append(piece.text)
        logprobs.extend(piece.logprobs or [])
        shown = _logprobs(piece.logprobs) if self.shape.logprobs else []
        return out + self.event("response.output_text.delta", item_id=item_id, output_index=index, content_index=0,
                                delta=piece.text, logprobs=shown)

    def refusal(self, piece: Refusal) -> str:
        out = "" if self.message is not None else self.text(Text(""))
        assert self.message is not None
        self.message[3].append(piece.text)
        return out

    def close_message(self, status: str) -> str:
        if self.message is None:
            return ""
        index, item_id, texts, refusals, logprobs = self.message
        self.message = None
        text = "".join(texts)
        part = self.shape.text_part(text, logprobs)
        item = self.shape.message(item_id, text, "".join(refusals), logprobs, status)
        self.slots[index] = item
        return (self.event("response.output_text.done", item_id=item_id, output_index=index, content_index=0,
                           text=text, logprobs=part["logprobs"])
                + self.event("response.content_part.done", item_id=item_id, output_index=index, content_index=0,
                             part=part)
                + self.event("response.output_item.done", output_index=index, item=item))

    def tool(self, piece: ToolPiece) -> str:
        call, new = self.calls.add(piece)
        out = ""
        if new:
            out += self.close_message("completed")
            call.id = call.id or f"call_{new_id()}"
            index, item_id = self.next_index, f"fc_{new_id()}"
            self.next_index += 1
            self.call_items[piece.index] = (index, item_id)
            item: dict[str, JsonValue] = {"id": item_id, "type": "function_call", "call_id": call.id,
                                          "name": call.name, "arguments": "", "status": "in_progress"}
            out += self.event("response.output_item.added", output_index=index, item=item)
        index, item_id = self.call_items[piece.index]
        if piece.arguments:
            out += self.event("response.function_call_arguments.delta", item_id=item_id, output_index=index,
                              delta=piece.arguments)
        return out

    def close_calls(self) -> str:
        out = ""
        for key, (index, item_id) in self.call_items.items():
            call = self.calls.calls[key]
            item = self.shape.function_call(item_id, call, "completed")
            self.slots[index] = item
            out += self.event("response.function_call_arguments.done", item_id=item_id, output_index=index,
                              name=call.name, arguments=call.arguments)
            out += self.event("response.output_item.done", output_index=index, item=item)
        self.call_items = {}
        return out

    def jurist(self, piece: JuristEvent) -> str:
        kind = f"jurist.{piece.kind}"
        return self.event(kind, data=piece.data)

    def finish(self, piece: Finish) -> str:
        status, incomplete = _status(piece)
        out = self.close_message(status) + self.close_calls()
        output = [self.slots[i] for i in sorted(self.slots)]
        response = self.shape.response(status, output, usage=piece.usage, incomplete=incomplete, jurist=piece.jurist)
        return out + self.event("response.completed" if status == "completed" else "response.incomplete",
                                response=response)

    def failed(self, piece: Failed) -> str:
        """``response.failed``, then an ``error`` event whose top-level ``error`` makes a stock client raise."""
        code = piece.error.get("code")
        output = [self.slots[i] for i in sorted(self.slots)]
        error: dict[str, JsonValue] = {"code": code if isinstance(code, str) else "server_error",
                                       "message": piece.message}
        response = self.shape.response("failed", output, error=error, jurist=piece.jurist)
        return (self.event("response.failed", response=response)
                + self.event("error", code=code if isinstance(code, str) else None, message=piece.message,
                             param=piece.error.get("param"), error=piece.error, status=piece.status))


async def answer(body: ResponsesBody, gated: Response) -> Response:
    """The gated chat answer ``gated`` written as the Responses API answers."""
    shape = Shape(body)
    return await relayed_answer(gated, build=partial(response_object, shape), events=partial(ResponsesStream, shape),
                                error_response=error_response)


def _refused(exc: Refused) -> JSONResponse:
    return JSONResponse(openai_error(exc.status, exc.message, param=exc.param), status_code=exc.status)


def build_router(proxy: ProxyState) -> APIRouter:
    router = APIRouter(tags=["proxy"])

    @router.post("/v1/responses")
    async def responses(request: Request) -> Response:
        """OpenAI's Responses API, gated: translated to chat completions for the upstream."""
        translation = await translated(request, chat_body, unreadable=lambda raw: raw, refused=_refused)
        if isinstance(translation, Response):
            return translation
        body, chat = translation
        return await answer(body, await gated_chat(proxy, request, chat))

    return router


__all__ = ["ResponsesBody", "ResponsesStream", "Shape", "answer", "build_router", "chat_body", "chat_messages",
           "response_object"]
