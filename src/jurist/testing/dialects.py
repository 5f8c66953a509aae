"""More wire shapes of the scripted server: the OpenAI Responses API, Anthropic's
``tool_use`` blocks, and the way llama-cpp-python's server streams.

:class:`~jurist.testing.provider_server.ProviderServer` uses these for
``POST /v1/responses``, for a scripted :class:`Reply` with ``tool_calls`` on
``POST /v1/messages``, and when it is started with ``dialect="llama-cpp-python"``.
"""

from __future__ import annotations

import itertools
import json
import time
from typing import Any, Literal

from jurist.testing.replies import Body, Reply, WireRequest, word_pieces

#: How a scripted server speaks: as OpenAI does, or as llama-cpp-python's server does
#: (the tool call's id, type and name repeated in every streamed piece; no usage in a
#: stream, whatever the request asked; ``response_format: json_schema`` refused with a 500).
Dialect = Literal["openai", "llama-cpp-python"]
DIALECTS: tuple[Dialect, ...] = ("openai", "llama-cpp-python")

_ids = itertools.count(1)


_ANTHROPIC_STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


# -- llama-cpp-python's streams -----------------------------------------------------


def llama_cpp_chunks(chunks: list[str]) -> list[str]:
    """OpenAI stream chunks (``data: {...}`` lines) as llama-cpp-python's server sends
    them: every ``delta.tool_calls`` piece repeats its call's id, type and name (a client
    that joins names with ``+=`` gets ``nameName...``), and no usage chunk."""
    heads: dict[int, dict[str, Any]] = {}
    out: list[str] = []
    for line in chunks:
        if not line.startswith("data: {"):
            out.append(line)
            continue
        chunk = json.loads(line[len("data: "):])
        if not chunk.get("choices") and chunk.get("usage") is not None:
            continue  # llama-cpp-python never sends a usage chunk
        for choice in chunk.get("choices") or ():
            for piece in (choice.get("delta") or {}).get("tool_calls") or ():
                head = heads.setdefault(piece["index"], {})
                if "id" in piece:
                    head.update(id=piece["id"], type=piece.get("type", "function"),
                                name=(piece.get("function") or {}).get("name", ""))
                piece.update(id=head.get("id"), type=head.get("type", "function"))
                function = piece.setdefault("function", {})
                function["name"] = head.get("name", "")
                function.setdefault("arguments", "")
        out.append(f"data: {json.dumps(chunk)}\n\n")
    return out


# -- Anthropic tool_use --------------------------------------------------------------


def anthropic_tool_message(reply: Reply, req: WireRequest) -> Body:
    """A Messages API answer whose content holds the reply's text (if any) and a
    ``tool_use`` block per tool call; ``stop_reason: "tool_use"``."""
    content: list[Body] = [{"type": "text", "text": reply.text}] if reply.text else []
    content += [{"type": "tool_use", "id": call.id, "name": call.name, "input": json.loads(call.arguments or "{}")}
                for call in reply.tool_calls or ()]
    return {"id": f"msg_t{next(_ids)}", "type": "message", "role": "assistant", "model": req.model,
            "content": content, "stop_reason": _ANTHROPIC_STOP.get(reply.finish_reason, reply.finish_reason),
            "stop_sequence": None, "usage": {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens}}


def anthropic_tool_events(reply: Reply, req: WireRequest) -> list[str]:
    """The same answer as Messages API stream events: ``input_json_delta`` pieces of each call's input."""
    def event(name: str, data: Body) -> str:
        return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n"

    message = anthropic_tool_message(reply, req)
    start = {**message, "content": [], "stop_reason": None,
             "usage": {"input_tokens": reply.input_tokens, "output_tokens": 1}}
    out = [event("message_start", {"message": start})]
    index = 0
    if reply.text:
        out.append(event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}))
        out += [event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": piece}})
                for piece in word_pieces(reply.text)]
        out.append(event("content_block_stop", {"index": 0}))
        index = 1
    for call in reply.tool_calls or ():
        block = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
        out.append(event("content_block_start", {"index": index, "content_block": block}))
        args = call.arguments or "{}"
        out += [event("content_block_delta", {"index": index,
                                              "delta": {"type": "input_json_delta", "partial_json": args[i:i + 8]}})
                for i in range(0, len(args), 8)]
        out.append(event("content_block_stop", {"index": index}))
        index += 1
    out.append(event("message_delta", {"delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                                       "usage": {"output_tokens": reply.output_tokens}}))
    out.append(event("message_stop", {}))
    return out


# -- the OpenAI Responses API --------------------------------------------------------


def _output_items(reply: Reply) -> list[dict[str, Any]]:
    """A Responses API answer's output: a ``message`` item with the text, a ``function_call`` item per tool call."""
    output: list[dict[str, Any]] = []
    if reply.text is not None and (reply.text or not reply.tool_calls):
        output.append({"type": "message", "id": f"msg_{next(_ids)}", "status": "completed", "role": "assistant",
                       "content": [{"type": "output_text", "text": reply.text, "annotations": [], "logprobs": []}]})
    for call in reply.tool_calls or ():
        output.append({"type": "function_call", "id": f"fc_{next(_ids)}", "call_id": call.id, "name": call.name,
                       "arguments": call.arguments, "status": "completed"})
    return output


def responses_object(reply: Reply, req: dict[str, Any], output: list[dict[str, Any]] | None = None) -> Body:
    """A ``response`` object (``POST /v1/responses``, not streamed) for ``reply``: a
    ``message`` output item with the text, a ``function_call`` item per tool call; a
    ``length`` finish is ``status: "incomplete"`` (``max_output_tokens``)."""
    output = _output_items(reply) if output is None else output
    incomplete = reply.finish_reason == "length"
    return {
        "id": f"resp_{next(_ids)}", "object": "response", "created_at": int(time.time()),
        "status": "incomplete" if incomplete else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "error": None, "model": req.get("model", "test-model"), "output": output,
        "instructions": req.get("instructions"), "metadata": {}, "parallel_tool_calls": True,
        "previous_response_id": req.get("previous_response_id"),
        "temperature": req.get("temperature", 1.0), "top_p": 1.0, "tool_choice": req.get("tool_choice", "auto"),
        "tools": req.get("tools", []), "text": {"format": {"type": "text"}}, "truncation": "disabled",
        "usage": {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens,
                  "total_tokens": reply.input_tokens + reply.output_tokens,
                  "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}},
    }


def responses_events(reply: Reply, req: dict[str, Any]) -> list[str]:
    """The same answer as Responses API stream events, ``response.created`` to ``response.completed``
    (``response.incomplete`` for a ``length`` finish); text in word-sized deltas, arguments in pieces."""
    items = _output_items(reply)
    final = responses_object(reply, req, items)
    seq = itertools.count(0)

    def event(name: str, data: Body) -> str:
        return f"event: {name}\ndata: {json.dumps({'type': name, 'sequence_number': next(seq), **data})}\n\n"

    start = {**final, "status": "in_progress", "output": [], "incomplete_details": None}
    out = [event("response.created", {"response": start}), event("response.in_progress", {"response": start})]
    for index, item in enumerate(items):
        if item["type"] == "message":
            text = item["content"][0]["text"]
            out.append(event("response.output_item.added", {"output_index": index, "item": {
                **item, "status": "in_progress", "content": []}}))
            part = {"type": "output_text", "text": "", "annotations": []}
            out.append(event("response.content_part.added", {"item_id": item["id"], "output_index": index,
                                                             "content_index": 0, "part": part}))
            out += [event("response.output_text.delta", {"item_id": item["id"], "output_index": index,
                                                         "content_index": 0, "delta": piece, "logprobs": []})
                    for piece in word_pieces(text)]
            out.append(event("response.output_text.done", {"item_id": item["id"], "output_index": index,
                                                           "content_index": 0, "text": text, "logprobs": []}))
            out.append(event("response.content_part.done", {"item_id": item["id"], "output_index": index,
                                                            "content_index": 0, "part": {**part, "text": text}}))
        else:
            args = item["arguments"]
            out.append(event("response.output_item.added", {"output_index": index, "item": {
                **item, "status": "in_progress", "arguments": ""}}))
            out += [event("response.function_call_arguments.delta", {"item_id": item["id"], "output_index": index,
                                                                     "delta": args[i:i + 8]})
                    for i in range(0, len(args), 8)]
            out.append(event("response.function_call_arguments.done", {"item_id": item["id"], "output_index": index,
                                                                       "arguments": args}))
        out.append(event("response.output_item.done", {"output_index": index, "item": item}))
    done = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
    out.append(event(done, {"response": final}))
    return out
