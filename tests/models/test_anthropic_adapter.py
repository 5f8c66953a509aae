"""AnthropicChat against the scripted provider on 127.0.0.1 (no SDK patching)."""

from __future__ import annotations

import asyncio
import time
from typing import AsyncIterator

import pytest

from jurist.errors import AuthFailed, ConfigError, ModelTimeout, ModelUnavailable, RateLimited, RequestRejected
from jurist.models.anthropic import AnthropicChat, split_messages
from jurist.models.base import ChatModel, ChatRequest
from jurist.models.messages import UserMessage
from jurist.testing import ProviderServer, Reply


def ask(text: str = "Rate this.", **kw: object) -> ChatRequest:
    return ChatRequest(messages=[{"role": "system", "content": "You judge."}, {"role": "user", "content": text}], **kw)


@pytest.fixture
async def chat(server: ProviderServer) -> AsyncIterator[AnthropicChat]:
    adapter = AnthropicChat("claude-test", base_url=server.anthropic_base_url, api_key="test-key")
    yield adapter
    await adapter.aclose()


async def test_complete_returns_text_and_usage(chat: AnthropicChat, server: ProviderServer) -> None:
    server.script(Reply(text="hello", input_tokens=21, output_tokens=4))
    out = await chat.complete(ask(max_tokens=77))
    assert (out.text, out.model, out.input_tokens, out.output_tokens, out.finish_reason) == (
        "hello", "anthropic/claude-test", 21, 4, "end_turn",
    )  # fmt: skip
    (req,) = server.requests
    assert req["path"] == "/v1/messages"
    body = req["json"]
    assert body["model"] == "claude-test" and body["max_tokens"] == 77
    assert body["system"] == "You judge."
    assert body["messages"] == [{"role": "user", "content": "Rate this."}]


async def test_identity_and_protocol(chat: AnthropicChat, server: ProviderServer) -> None:
    assert isinstance(chat, ChatModel)
    assert chat.name == "anthropic/claude-test"
    assert chat.endpoint == server.anthropic_base_url


async def test_no_native_schema_mode_and_default_max_tokens(chat: AnthropicChat, server: ProviderServer) -> None:
    await chat.complete(ask(response_schema={"type": "object"}, max_tokens=None))
    body = server.requests[0]["json"]
    assert body["max_tokens"] == 1024
    assert not {"response_format", "output_config", "tools"} & body.keys()


async def test_messages_are_reshaped_for_the_messages_api(chat: AnthropicChat, server: ProviderServer) -> None:
    request = ChatRequest(
        messages=[
            {"role": "system", "content": "Rules."},
            {"role": "user", "content": "a"},
            {"role": "user", "content": "b"},
            {"role": "assistant", "content": "c"},
            {"role": "tool", "content": "42"},
            {"role": "system", "content": "More rules."},
            {"role": "user", "content": "d"},
        ]
    )
    await chat.complete(request)
    body = server.requests[0]["json"]
    assert body["system"] == "Rules.\n\nMore rules."
    assert body["messages"] == [
        {"role": "user", "content": "a\n\nb"},
        {"role": "assistant", "content": "c"},
        {"role": "user", "content": "[tool result] 42\n\nd"},
    ]


def test_split_messages_without_system() -> None:
    assert split_messages((UserMessage(content="hi"),)) == ("", [UserMessage(content="hi")])


async def test_no_system_parameter_when_there_is_none(chat: AnthropicChat, server: ProviderServer) -> None:
    await chat.complete(ChatRequest(messages=[{"role": "user", "content": "hi"}]))
    assert "system" not in server.requests[0]["json"]


async def test_stream_yields_text_deltas(chat: AnthropicChat, server: ProviderServer) -> None:
    server.script(Reply(text="Fine answer, well sourced."))
    deltas = [d async for d in chat.stream(ask())]
    assert len(deltas) > 1 and "".join(deltas) == "Fine answer, well sourced."
    assert server.requests[0]["json"]["stream"] is True


async def test_stream_error_event_is_unavailable(chat: AnthropicChat, server: ProviderServer) -> None:
    body = (
        'event: message_start\ndata: {"type": "message_start", "message": {"id": "m", "type": "message", '
        '"role": "assistant", "model": "claude-test", "content": [], "stop_reason": null, "stop_sequence": null, '
        '"usage": {"input_tokens": 1, "output_tokens": 1}}}\n\n'
        'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}\n\n'
    )
    server.script(Reply(body=body))
    with pytest.raises(ModelUnavailable, match="Overloaded"):
        [d async for d in chat.stream(ask())]


async def test_stream_error_status(chat: AnthropicChat, server: ProviderServer) -> None:
    server.script(Reply(status=529))
    with pytest.raises(ModelUnavailable):
        [d async for d in chat.stream(ask())]


async def test_429_with_retry_after(chat: AnthropicChat, server: ProviderServer) -> None:
    server.script(Reply(status=429, headers={"Retry-After": "3"}))
    with pytest.raises(RateLimited) as info:
        await chat.complete(ask())
    assert info.value.retry_after == 3.0 and info.value.status == 429


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (500, ModelUnavailable),
        (529, ModelUnavailable),
        (401, AuthFailed),
        (403, AuthFailed),
        (400, RequestRejected),
        (404, RequestRejected),
        (422, RequestRejected),
    ],
)
async def test_status_mapping(chat: AnthropicChat, server: ProviderServer, status: int, error: type) -> None:
    server.script(Reply(status=status))
    with pytest.raises(error) as info:
        await chat.complete(ask())
    assert type(info.value) is error and info.value.status == status
    assert info.value.model == "anthropic/claude-test"


async def test_auth_failure_says_what_to_set(chat: AnthropicChat, server: ProviderServer) -> None:
    server.script(Reply(status=401))
    with pytest.raises(AuthFailed, match="ANTHROPIC_API_KEY"):
        await chat.complete(ask())


async def test_hang_with_short_timeout_is_model_timeout(chat: AnthropicChat, server: ProviderServer) -> None:
    server.script(Reply(hang=True))
    started = time.monotonic()
    with pytest.raises(ModelTimeout):
        await chat.complete(ask(), timeout=0.3)
    assert time.monotonic() - started < 3


async def test_dropped_connection_is_unavailable(chat: AnthropicChat, server: ProviderServer) -> None:
    server.script(Reply(drop=True))
    with pytest.raises(ModelUnavailable):
        await chat.complete(ask())


@pytest.mark.parametrize("body", ['{"content": [', "not json", '{"unexpected": 1}', "[]"])
async def test_malformed_body_is_unavailable(chat: AnthropicChat, server: ProviderServer, body: str) -> None:
    server.script(Reply(body=body))
    with pytest.raises(ModelUnavailable):
        await chat.complete(ask())


@pytest.mark.parametrize("text", [None, ""])
async def test_empty_content_becomes_empty_text(chat: AnthropicChat, server: ProviderServer, text: str | None) -> None:
    server.script(Reply(text=text))
    assert (await chat.complete(ask())).text == ""


async def test_concurrent_calls_are_in_flight_together(chat: AnthropicChat, server: ProviderServer) -> None:
    server.default = Reply(delay=0.3)
    await asyncio.gather(*(chat.complete(ask(f"item {i}")) for i in range(6)))
    assert server.peak_in_flight == 6 and server.in_flight == 0


async def test_the_address_and_key_given_are_used_and_the_environment_is_not_read(
        server: ProviderServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "from-the-environment")
    chat = AnthropicChat("claude-test", base_url=server.anthropic_base_url, api_key="given-key")
    try:
        assert chat.endpoint == server.anthropic_base_url
        assert (await chat.complete(ask())).text
    finally:
        await chat.aclose()
    assert "from-the-environment" not in server.requests[0]["headers"].values()
    assert AnthropicChat("claude-test", api_key="k").endpoint == "https://api.anthropic.com"  # not ANTHROPIC_BASE_URL


def test_missing_key_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        AnthropicChat("claude-haiku-4-5")


async def test_images_go_as_image_blocks_base64_or_url(chat: AnthropicChat, server: ProviderServer) -> None:
    from jurist.models.images import from_data_url, from_url
    from tests.images import GIF, data_url

    gif, remote = from_data_url(data_url(GIF, "image/gif")), from_url("https://example.com/chart.png")
    request = ChatRequest(messages=[{"role": "system", "content": "You judge."}, {"role": "user", "content": "a"},
                                    {"role": "user", "content": "b"}], images=(gif, remote))
    await chat.complete(request)
    body = server.requests[0]["json"]
    assert body["system"] == "You judge."
    assert body["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "a\n\nb"},
        {"type": "text", "text": "[image 1]"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/gif", "data": gif.base64_data}},
        {"type": "text", "text": "[image 2]"},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/chart.png"}},
    ]}]
