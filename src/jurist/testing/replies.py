"""The reply bodies of the test servers, in the OpenAI and Anthropic wire formats.

:class:`Reply` is one scripted answer; the functions turn it into what an
endpoint sends for a request: a chat completion or its stream chunks, a
message or its stream events. Shared by the scripted server
(:mod:`jurist.testing.provider_server`) and the benchmarks' fixed one
(:mod:`jurist.testing.fixed_server`).
"""

from __future__ import annotations

import itertools
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

#: A wire body as sent: built here and written with ``json.dumps``, never read back.
Body = dict[str, object]

DEFAULT_TEXT = '{"score": 4, "reasoning": "ok"}'


@dataclass
class Reply:
    """One scripted answer. ``body`` (raw bytes) overrides everything else."""

    text: str | None = DEFAULT_TEXT  # message content
    status: int = 200
    delay: float = 0.0  # seconds before answering
    headers: dict[str, str] = field(default_factory=dict)  # e.g. {"Retry-After": "1"}
    body: str | bytes | None = None  # raw body (malformed or truncated JSON)
    hang: bool = False  # accept the request and never answer (until the server stops)
    drop: bool = False  # close the connection without any response
    input_tokens: int = 10
    output_tokens: int = 5
    finish_reason: str = "stop"
    # The reply's tokens with their log probabilities in the OpenAI form (the
    # entries of ``logprobs.content``, see :func:`token_logprobs`): sent when the
    # request asks for ``logprobs``, each cut to the request's ``top_logprobs``.
    logprobs: list[TokenLogprob] | None = None
    # An answer that calls tools (see :func:`tool_reply`): sent in OpenAI's message form,
    # ``{"id", "type": "function", "function": {"name", "arguments"}}`` each; streamed as
    # OpenAI streams them (the id and name first, then the arguments in pieces).
    tool_calls: list[ToolCall] | None = None
    message: str | None = None  # an error status's message (default: a scripted-by-the-test note)
    usage: bool = True  # a stream's usage chunk when asked for (some servers never send one)


@dataclass(frozen=True)
class ToolCall:
    """One tool call of a scripted answer; ``arguments`` is the JSON text the model writes."""

    id: str
    name: str
    arguments: str

    def wire(self) -> Body:
        """The call in OpenAI's message form."""
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass(frozen=True)
class TokenLogprob:
    """One token of a reply with its log probability and its alternatives (token, logprob), most likely first.

    ``bytes`` false leaves the ``bytes`` fields out, as some servers do."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()
    bytes: bool = True

    def wire(self, k: int) -> Body:
        """The entry of ``logprobs.content``, its alternatives cut to the first ``k``."""
        def entry(token: str, logprob: float) -> Body:
            return {"token": token, "logprob": logprob, **({"bytes": list(token.encode())} if self.bytes else {})}

        return {**entry(self.token, self.logprob), "top_logprobs": [entry(t, lp) for t, lp in self.top[:k]]}


@dataclass(frozen=True)
class WireRequest:
    """What a reply depends on in a request's JSON body (read once, where the body is parsed)."""

    model: object = "test-model"
    logprobs: bool = False
    top_logprobs: int = 0
    include_usage: bool = False

    @classmethod
    def of(cls, body: dict[str, Any]) -> "WireRequest":
        """Read a parsed request body (a JSON object)."""
        options = body.get("stream_options")
        return cls(model=body.get("model", "test-model"), logprobs=bool(body.get("logprobs")),
                   top_logprobs=int(body.get("top_logprobs") or 0),
                   include_usage=bool(isinstance(options, dict) and options.get("include_usage")))


def tool_call(name: str, arguments: dict[str, object] | str, call_id: str = "call_1") -> ToolCall:
    """One tool call (``arguments`` as the JSON text the model writes, or an object written as such)."""
    return ToolCall(call_id, name, arguments if isinstance(arguments, str) else json.dumps(arguments))


def tool_reply(*calls: ToolCall, text: str | None = None, **more: Any) -> Reply:
    """An answer that calls ``calls`` (:func:`tool_call`), with no text unless given: finish reason ``tool_calls``."""
    return Reply(text=text, tool_calls=list(calls), finish_reason="tool_calls", **more)


def token_logprobs(tokens: list[str], top: dict[int, dict[str, float]] | None = None, *,
                   logprob: float = 0.0) -> list[TokenLogprob]:
    """The logprobs of a reply made of ``tokens``: at position ``i`` the
    alternatives are ``top[i]`` (token -> logprob, most likely first), elsewhere the
    token alone; a token's own logprob is its entry in ``top[i]``, else ``logprob``."""
    out = []
    for i, token in enumerate(tokens):
        alternatives = (top or {}).get(i) or {token: logprob}
        out.append(TokenLogprob(token, alternatives.get(token, logprob), tuple(alternatives.items())))
    return out


_ANTHROPIC_STOP = {"stop": "end_turn", "length": "max_tokens"}
_counter = itertools.count(1)


def word_pieces(text: str | None) -> list[str]:
    """Split text into word-sized deltas (whitespace kept), as a stream would."""
    return re.findall(r"\s*\S+\s*|\s+", text) if text else []


def openai_completion(reply: Reply, req: WireRequest) -> Body:
    return {
        "id": f"chatcmpl-{next(_counter)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": req.model,
        "choices": [
            {
                "index": 0,
                "message": _message(reply),
                "finish_reason": reply.finish_reason,
                "logprobs": _logprobs(reply, req),
            }
        ],
        "usage": {
            "prompt_tokens": reply.input_tokens,
            "completion_tokens": reply.output_tokens,
            "total_tokens": reply.input_tokens + reply.output_tokens,
        },
    }


def _message(reply: Reply) -> Body:
    message: Body = {"role": "assistant", "content": reply.text}
    if reply.tool_calls:
        message["tool_calls"] = [call.wire() for call in reply.tool_calls]
    return message


def _tool_call_deltas(calls: list[ToolCall]) -> list[Body]:
    """The ``delta.tool_calls`` entries a stream sends for ``calls``: the head of each call, then its
    arguments in pieces of at most 8 characters."""
    out: list[Body] = []
    for index, call in enumerate(calls):
        out.append({"index": index, "id": call.id, "type": "function",
                    "function": {"name": call.name, "arguments": ""}})
        arguments = call.arguments
        out += [{"index": index, "function": {"arguments": arguments[i:i + 8]}} for i in range(0, len(arguments), 8)]
    return out


def _logprobs(reply: Reply, req: WireRequest) -> Body | None:
    """The choice's ``logprobs``: the reply's tokens, when asked for, with ``top_logprobs`` alternatives each."""
    if reply.logprobs is None or not req.logprobs:
        return None
    return {"content": [entry.wire(req.top_logprobs) for entry in reply.logprobs], "refusal": None}


def openai_chunks(reply: Reply, req: WireRequest) -> list[str]:
    base = {
        "id": f"chatcmpl-{next(_counter)}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": req.model,
    }

    def chunk(delta: Body, finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        return f"data: {json.dumps({**base, 'choices': [choice]})}\n\n"

    out = [chunk({"role": "assistant", "content": None if reply.tool_calls and not reply.text else ""})]
    out += [chunk({"content": piece}) for piece in word_pieces(reply.text)]
    out += [chunk({"tool_calls": [entry]}) for entry in _tool_call_deltas(reply.tool_calls or [])]
    out.append(chunk({}, reply.finish_reason))
    if reply.usage and req.include_usage:
        usage = {
            "prompt_tokens": reply.input_tokens,
            "completion_tokens": reply.output_tokens,
            "total_tokens": reply.input_tokens + reply.output_tokens,
        }
        out.append(f"data: {json.dumps({**base, 'choices': [], 'usage': usage})}\n\n")
    out.append("data: [DONE]\n\n")
    return out


def anthropic_message(reply: Reply, req: WireRequest) -> Body:
    return {
        "id": f"msg_{next(_counter)}",
        "type": "message",
        "role": "assistant",
        "model": req.model,
        "content": [{"type": "text", "text": reply.text}] if reply.text is not None else [],
        "stop_reason": _ANTHROPIC_STOP.get(reply.finish_reason, reply.finish_reason),
        "stop_sequence": None,
        "usage": {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens},
    }


def anthropic_events(reply: Reply, req: WireRequest) -> list[str]:
    def event(name: str, data: Body) -> str:
        return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n"

    message = anthropic_message(reply, req)
    message.update(content=[], stop_reason=None)
    message["usage"] = {"input_tokens": reply.input_tokens, "output_tokens": 1}
    out = [event("message_start", {"message": message})]
    out.append(event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}))
    out.append(event("ping", {}))
    for piece in word_pieces(reply.text):
        out.append(event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": piece}}))
    out.append(event("content_block_stop", {"index": 0}))
    stop = _ANTHROPIC_STOP.get(reply.finish_reason, reply.finish_reason)
    out.append(
        event(
            "message_delta",
            {"delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": reply.output_tokens}},
        )
    )
    out.append(event("message_stop", {}))
    return out
