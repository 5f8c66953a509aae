"""The scripted servers' wire bodies, byte for byte."""

import itertools
import json

import pytest

from jurist.testing import replies
from jurist.testing.fixed_server import reply_for
from jurist.testing.replies import Reply, TokenLogprob, WireRequest, token_logprobs, tool_call, tool_reply


@pytest.fixture(autouse=True)
def fixed_clock(monkeypatch):
    monkeypatch.setattr(replies.time, "time", lambda: 1700000000.0)
    monkeypatch.setattr(replies, "_counter", itertools.count(1))


def test_a_completion_with_tool_calls_and_logprobs():
    reply = tool_reply(tool_call("weather", {"city": "Paris"}, "call_a"), text="4",
                       logprobs=token_logprobs(["4"], {0: {"4": -0.1, "3": -2.5}}))
    body = replies.openai_completion(reply, WireRequest.of({"model": "m", "logprobs": True, "top_logprobs": 1}))
    assert json.dumps(body) == (
        '{"id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000, "model": "m", "choices": '
        '[{"index": 0, "message": {"role": "assistant", "content": "4", "tool_calls": [{"id": "call_a", "type": '
        '"function", "function": {"name": "weather", "arguments": "{\\"city\\": \\"Paris\\"}"}}]}, "finish_reason": '
        '"tool_calls", "logprobs": {"content": [{"token": "4", "logprob": -0.1, "bytes": [52], "top_logprobs": '
        '[{"token": "4", "logprob": -0.1, "bytes": [52]}]}], "refusal": null}}], "usage": {"prompt_tokens": 10, '
        '"completion_tokens": 5, "total_tokens": 15}}')


def test_a_logprob_without_bytes():
    reply = Reply(text="4", logprobs=[TokenLogprob("4", -0.1, bytes=False)])
    body = replies.openai_completion(reply, WireRequest.of({"logprobs": True, "top_logprobs": 5}))
    assert json.dumps(body["choices"]) == (  # type: ignore[index]
        '[{"index": 0, "message": {"role": "assistant", "content": "4"}, "finish_reason": "stop", "logprobs": '
        '{"content": [{"token": "4", "logprob": -0.1, "top_logprobs": []}], "refusal": null}}]')


def test_streamed_tool_calls_and_usage():
    raw = json.dumps({"stream": True, "stream_options": {"include_usage": True}}).encode()
    reply = tool_reply(tool_call("f", '{"a": 1, "bb": 2}', "c2"))
    assert reply_for(reply, "/v1/chat/completions", raw).decode().split("\r\n\r\n", 1)[1] == "".join(
        f"data: {chunk}\n\n" for chunk in [
            '{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000, "model": "test-model", '
            '"choices": [{"index": 0, "delta": {"role": "assistant", "content": null}, "finish_reason": null, '
            '"logprobs": null}]}',
            '{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000, "model": "test-model", '
            '"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c2", "type": "function", '
            '"function": {"name": "f", "arguments": ""}}]}, "finish_reason": null, "logprobs": null}]}',
            '{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000, "model": "test-model", '
            '"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{\\"a\\": 1,"}}'
            ']}, "finish_reason": null, "logprobs": null}]}',
            '{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000, "model": "test-model", '
            '"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": " \\"bb\\": 2"}}'
            ']}, "finish_reason": null, "logprobs": null}]}',
            '{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000, "model": "test-model", '
            '"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]}, '
            '"finish_reason": null, "logprobs": null}]}',
            '{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000, "model": "test-model", '
            '"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls", "logprobs": null}]}',
            '{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000, "model": "test-model", '
            '"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}',
            '[DONE]'])


def test_anthropic_events():
    events = replies.anthropic_events(Reply(text="hi there", finish_reason="length"), WireRequest.of({"model": "c"}))
    assert "".join(events) == (
        'event: message_start\ndata: {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": '
        '"assistant", "model": "c", "content": [], "stop_reason": null, "stop_sequence": null, "usage": '
        '{"input_tokens": 10, "output_tokens": 1}}}\n\n'
        'event: content_block_start\ndata: {"type": "content_block_start", "index": 0, "content_block": {"type": '
        '"text", "text": ""}}\n\n'
        'event: ping\ndata: {"type": "ping"}\n\n'
        'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 0, "delta": {"type": '
        '"text_delta", "text": "hi "}}\n\n'
        'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 0, "delta": {"type": '
        '"text_delta", "text": "there"}}\n\n'
        'event: content_block_stop\ndata: {"type": "content_block_stop", "index": 0}\n\n'
        'event: message_delta\ndata: {"type": "message_delta", "delta": {"stop_reason": "max_tokens", '
        '"stop_sequence": null}, "usage": {"output_tokens": 5}}\n\n'
        'event: message_stop\ndata: {"type": "message_stop"}\n\n')
