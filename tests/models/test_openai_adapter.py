"""OpenAIChat against the scripted provider on 127.0.0.1 (no SDK patching)."""

from __future__ import annotations

import asyncio
import time
from email.utils import formatdate
from typing import AsyncIterator

import pytest

from jurist.errors import (
    AuthFailed,
    ConfigError,
    ModelTimeout,
    ModelUnavailable,
    RateLimited,
    RequestRejected,
)
from jurist.models.base import ChatModel, ChatRequest
from jurist.models.openai import OpenAIChat, retry_after_seconds
from jurist.models.messages import openai_messages
from jurist.testing import ProviderServer, Reply
from jurist.testing.replies import token_logprobs

SCHEMA = {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]}


def ask(text: str = "Rate this.", **kw: object) -> ChatRequest:
    return ChatRequest(messages=[{"role": "system", "content": "You judge."}, {"role": "user", "content": text}], **kw)


@pytest.fixture
async def chat(server: ProviderServer) -> AsyncIterator[OpenAIChat]:
    adapter = OpenAIChat("gpt-test", base_url=server.base_url, api_key="test-key")
    yield adapter
    await adapter.aclose()


async def test_complete_returns_text_usage_and_sends_params(chat: OpenAIChat, server: ProviderServer) -> None:
    server.script(Reply(text="hello", input_tokens=12, output_tokens=3, finish_reason="length"))
    out = await chat.complete(ask(temperature=0.2, max_tokens=50, seed=7))
    assert (out.text, out.model, out.input_tokens, out.output_tokens, out.finish_reason) == (
        "hello", "openai/gpt-test", 12, 3, "length",
    )  # fmt: skip
    (req,) = server.requests
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["authorization"] == "Bearer test-key"
    body = req["json"]
    assert body["model"] == "gpt-test"
    assert body["messages"] == openai_messages(ask().messages)
    assert (body["temperature"], body["max_tokens"], body["seed"]) == (0.2, 50, 7)
    assert "response_format" not in body and "stream" not in body


async def test_identity_and_protocol(chat: OpenAIChat, server: ProviderServer) -> None:
    assert isinstance(chat, ChatModel)
    assert chat.name == "openai/gpt-test"
    assert chat.endpoint == server.base_url
    other = OpenAIChat("qwen3:14b", provider="ollama", base_url=server.base_url, api_key="x")
    assert other.name == "ollama/qwen3:14b"
    await other.aclose()


async def test_unset_params_are_not_sent(chat: OpenAIChat, server: ProviderServer) -> None:
    await chat.complete(ask(temperature=None, max_tokens=None))
    body = server.requests[0]["json"]
    assert not {"temperature", "max_tokens", "seed"} & body.keys()


async def test_structured_output_request_shape(chat: OpenAIChat, server: ProviderServer) -> None:
    await chat.complete(ask(response_schema=SCHEMA, schema_name="rubric_score"))
    assert server.requests[0]["json"]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "rubric_score", "schema": SCHEMA, "strict": False},
    }


async def test_prompt_mode_never_sends_the_schema(server: ProviderServer) -> None:
    chat = OpenAIChat("m", base_url=server.base_url, api_key="k", structured_output="prompt")
    try:
        await chat.complete(ask(response_schema=SCHEMA))
    finally:
        await chat.aclose()
    assert "response_format" not in server.requests[0]["json"]


async def test_json_object_schema_mode_sends_the_schema_inside_json_object(server: ProviderServer) -> None:
    chat = OpenAIChat("m", base_url=server.base_url, api_key="k", structured_output="json_object_schema")
    try:
        await chat.complete(ask(response_schema=SCHEMA))
        await chat.complete(ask())
    finally:
        await chat.aclose()
    assert server.requests[0]["json"]["response_format"] == {"type": "json_object", "schema": SCHEMA}
    assert "response_format" not in server.requests[1]["json"]  # no schema, nothing asked
    assert chat.schema_mode == "json_object_schema"


async def test_logprobs_are_asked_for_and_read_back(chat: OpenAIChat, server: ProviderServer) -> None:
    tokens = ['{"', "score", '":', " ", "4", "}"]
    server.script(Reply(text="".join(tokens), logprobs=token_logprobs(
        tokens, {1: {"score": -0.1, "rating": -2.3}, 4: {"4": -0.2, "3": -1.7, "5": -3.0}})))
    out = await chat.complete(ask(top_logprobs=2))
    body = server.requests[0]["json"]
    assert (body["logprobs"], body["top_logprobs"]) == (True, 2)
    assert out.logprobs is not None and [t.token for t in out.logprobs] == tokens
    # alternatives only where a digit is, cut to the two asked for
    assert [t.top for t in out.logprobs] == [(), (), (), (), (("4", -0.2), ("3", -1.7)), ()]
    assert out.logprobs[4].logprob == -0.2


async def test_no_logprobs_unless_asked_and_none_when_not_sent(chat: OpenAIChat, server: ProviderServer) -> None:
    server.default = Reply(text="4", logprobs=token_logprobs(["4"]))
    out = await chat.complete(ask())
    assert "logprobs" not in server.requests[0]["json"] and out.logprobs is None
    server.default = Reply(text="4")  # an endpoint that ignores the request for logprobs
    assert (await chat.complete(ask(top_logprobs=5))).logprobs is None
    server.default = Reply(body='{"choices": [{"message": {"content": "4"}, "logprobs": {"content": ["4"]}}]}')
    unreadable = await chat.complete(ask(top_logprobs=5))
    assert unreadable.text == "4" and unreadable.logprobs is None


def _refuses_schema(req: dict) -> Reply:
    return Reply(status=400) if "response_format" in req else Reply(text='{"score": 3}')


async def test_schema_rejected_with_400_falls_back_and_is_remembered(chat: OpenAIChat, server: ProviderServer) -> None:
    server.default = _refuses_schema
    first = await chat.complete(ask(response_schema=SCHEMA))
    assert first.text == '{"score": 3}'
    assert ["response_format" in r["json"] for r in server.requests] == [True, False]
    assert chat.schema_supported is False
    await chat.complete(ask(response_schema=SCHEMA))
    assert len(server.requests) == 3 and "response_format" not in server.requests[2]["json"]


async def test_json_schema_mode_does_not_fall_back(server: ProviderServer) -> None:
    chat = OpenAIChat("m", base_url=server.base_url, api_key="k", structured_output="json_schema")
    server.default = _refuses_schema
    try:
        with pytest.raises(RequestRejected):
            await chat.complete(ask(response_schema=SCHEMA))
    finally:
        await chat.aclose()
    assert len(server.requests) == 1 and chat.schema_supported is True


async def test_a_400_that_is_not_about_the_schema_is_not_remembered(chat: OpenAIChat, server: ProviderServer) -> None:
    server.default = Reply(status=400)
    with pytest.raises(RequestRejected) as info:
        await chat.complete(ask(response_schema=SCHEMA))
    assert info.value.status == 400
    assert len(server.requests) == 2  # tried once without the schema, which failed too
    assert chat.schema_supported is True


async def test_stream_yields_text_deltas(chat: OpenAIChat, server: ProviderServer) -> None:
    server.script(Reply(text="The answer is fine."))
    deltas = [d async for d in chat.stream(ask())]
    assert len(deltas) > 1 and "".join(deltas) == "The answer is fine."
    assert server.requests[0]["json"]["stream"] is True


async def test_stream_error_status_and_error_event(chat: OpenAIChat, server: ProviderServer) -> None:
    server.script(Reply(status=503), Reply(body='data: {"error": {"message": "boom", "type": "server_error"}}\n\n'))
    with pytest.raises(ModelUnavailable):
        [d async for d in chat.stream(ask())]
    with pytest.raises(ModelUnavailable, match="boom"):
        [d async for d in chat.stream(ask())]


async def test_429_with_retry_after_seconds(chat: OpenAIChat, server: ProviderServer) -> None:
    server.script(Reply(status=429, headers={"Retry-After": "2"}))
    with pytest.raises(RateLimited) as info:
        await chat.complete(ask())
    assert info.value.retry_after == 2.0 and info.value.status == 429 and info.value.retryable
    assert "429" in str(info.value)


async def test_429_with_retry_after_http_date(chat: OpenAIChat, server: ProviderServer) -> None:
    server.script(Reply(status=429, headers={"Retry-After": formatdate(time.time() + 30, usegmt=True)}))
    with pytest.raises(RateLimited) as info:
        await chat.complete(ask())
    assert info.value.retry_after is not None and 25 <= info.value.retry_after <= 31


async def test_429_without_retry_after(chat: OpenAIChat, server: ProviderServer) -> None:
    server.script(Reply(status=429))
    with pytest.raises(RateLimited) as info:
        await chat.complete(ask())
    assert info.value.retry_after is None


def test_retry_after_parsing() -> None:
    assert retry_after_seconds({"retry-after": "1.5"}) == 1.5
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after_seconds({"retry-after": formatdate(time.time() - 60, usegmt=True)}) == 0.0
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (500, ModelUnavailable),
        (502, ModelUnavailable),
        (503, ModelUnavailable),
        (401, AuthFailed),
        (403, AuthFailed),
        (400, RequestRejected),
        (404, RequestRejected),
        (422, RequestRejected),
        (408, ModelTimeout),
    ],
)
async def test_status_mapping(chat: OpenAIChat, server: ProviderServer, status: int, error: type) -> None:
    server.script(Reply(status=status))
    with pytest.raises(error) as info:
        await chat.complete(ask())
    assert type(info.value) is error and info.value.status == status
    assert info.value.model == "openai/gpt-test"


async def test_auth_failure_says_what_to_set(chat: OpenAIChat, server: ProviderServer) -> None:
    server.script(Reply(status=401))
    with pytest.raises(AuthFailed, match="OPENAI_API_KEY"):
        await chat.complete(ask())
    groq = OpenAIChat("llama", provider="groq", base_url=server.base_url, api_key="k")
    server.script(Reply(status=401))
    try:
        with pytest.raises(AuthFailed, match="providers.groq.api_key"):
            await groq.complete(ask())
    finally:
        await groq.aclose()


async def test_hang_with_short_timeout_is_model_timeout(chat: OpenAIChat, server: ProviderServer) -> None:
    server.script(Reply(hang=True))
    started = time.monotonic()
    with pytest.raises(ModelTimeout):
        await chat.complete(ask(), timeout=0.3)
    assert time.monotonic() - started < 3


async def test_dropped_connection_is_unavailable(chat: OpenAIChat, server: ProviderServer) -> None:
    server.script(Reply(drop=True))
    with pytest.raises(ModelUnavailable):
        await chat.complete(ask())


async def test_unreachable_endpoint_is_unavailable(server: ProviderServer) -> None:
    url = server.base_url
    server.stop()
    chat = OpenAIChat("m", base_url=url, api_key="k")
    try:
        with pytest.raises(ModelUnavailable, match="could not be reached"):
            await chat.complete(ask(), timeout=2)
    finally:
        await chat.aclose()


@pytest.mark.parametrize(
    "body",
    ['{"choices": [', "not json at all", '{"unexpected": 1}', '{"choices": []}', "[]"],
)
async def test_malformed_body_is_unavailable(chat: OpenAIChat, server: ProviderServer, body: str) -> None:
    server.script(Reply(body=body))
    with pytest.raises(ModelUnavailable):
        await chat.complete(ask())


@pytest.mark.parametrize("text", [None, ""])
async def test_empty_content_becomes_empty_text(chat: OpenAIChat, server: ProviderServer, text: str | None) -> None:
    server.script(Reply(text=text))
    assert (await chat.complete(ask())).text == ""


async def test_tool_turns_without_call_id_become_user_text(chat: OpenAIChat, server: ProviderServer) -> None:
    await chat.complete(ChatRequest(messages=[{"role": "user", "content": "q"}, {"role": "tool", "content": "42"}]))
    assert server.requests[0]["json"]["messages"][1] == {"role": "user", "content": "[tool result] 42"}


async def test_concurrent_calls_are_in_flight_together(chat: OpenAIChat, server: ProviderServer) -> None:
    server.default = Reply(delay=0.3)
    outs = await asyncio.gather(*(chat.complete(ask(f"item {i}")) for i in range(8)))
    assert len(outs) == 8 and server.peak_in_flight == 8 and server.in_flight == 0


async def test_the_address_and_key_given_are_used_and_the_environment_is_not_read(
        server: ProviderServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "from-the-environment")
    monkeypatch.setenv("OPENAI_ORG_ID", "org-from-the-environment")
    chat = OpenAIChat("m", base_url=server.base_url, api_key="given-key", organization="org", project="proj")
    try:
        assert chat.endpoint == server.base_url
        await chat.complete(ask())
    finally:
        await chat.aclose()
    headers = server.requests[0]["headers"]
    assert (headers["authorization"], headers["openai-organization"], headers["openai-project"]) == \
        ("Bearer given-key", "org", "proj")
    assert OpenAIChat("m", api_key="k").endpoint == "https://api.openai.com/v1"  # not OPENAI_BASE_URL


async def test_self_hosted_endpoint_needs_no_key(server: ProviderServer) -> None:
    chat = OpenAIChat("m", provider="vllm", base_url=server.base_url)
    try:
        assert (await chat.complete(ask())).text
    finally:
        await chat.aclose()


def test_missing_key_for_openai_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        OpenAIChat("gpt-4o-mini")


def test_unknown_structured_output_mode_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="structured_output"):
        OpenAIChat("m", base_url="http://127.0.0.1:9/v1", api_key="k", structured_output="grammar")


async def test_stream_reports_usage_and_finish_reason(chat: OpenAIChat, server: ProviderServer) -> None:
    from jurist.models.base import Completion

    server.script(Reply(text="Fine.", input_tokens=7, output_tokens=2, finish_reason="length"))
    into = Completion(text="", model=chat.name)
    assert "".join([d async for d in chat.stream(ask(), into=into)]) == "Fine."
    assert (into.input_tokens, into.output_tokens, into.finish_reason) == (7, 2, "length")
    assert server.requests[0]["json"]["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize("body", [
    'data: {"choices": [{"index": 0, "delta": {"content": "Par"}, "finish_reason": null}]}\n\n',  # no end
    'data: {"choices": [{"index": 0, "delta": {"content": "Par"}, "finish_reason": null}]}\n\ndata: {"choi',
])
async def test_a_stream_that_stops_before_its_end_is_unavailable(chat: OpenAIChat, server: ProviderServer,
                                                                 body: str) -> None:
    server.script(Reply(body=body))
    seen: list[str] = []
    with pytest.raises(ModelUnavailable):
        async for delta in chat.stream(ask()):
            seen.append(delta)
    assert seen == ["Par"]


async def test_stream_errors_carry_the_endpoints_status_body_and_retry_after(chat: OpenAIChat,
                                                                            server: ProviderServer) -> None:
    server.script(Reply(status=429, headers={"Retry-After": "7"}))
    with pytest.raises(RateLimited) as info:
        [d async for d in chat.stream(ask())]
    assert info.value.status == 429 and info.value.retry_after == 7.0
    assert b"scripted by the test" in (info.value.body or b"") and info.value.headers["retry-after"] == "7"


async def test_a_request_may_bring_its_own_key_and_body_fields(chat: OpenAIChat, server: ProviderServer) -> None:
    request = ChatRequest(messages=ask().messages, api_key="caller-key", extra_body={"top_p": 0.5, "model": "x"})
    await chat.complete(request)
    sent = server.requests[0]
    assert sent["headers"]["authorization"] == "Bearer caller-key"
    assert sent["json"]["top_p"] == 0.5 and sent["json"]["model"] == "gpt-test"
    assert "caller-key" not in repr(request) and "api_key" not in request.params()
    assert request.cache_key("m", "http://e/v1") == ChatRequest(messages=ask().messages, extra_body={"top_p": 0.5, "model": "x"}
                                                 ).cache_key("m", "http://e/v1")


async def test_an_injected_session_carries_every_call(server: ProviderServer) -> None:
    import aiohttp

    opened: list[str] = []

    async def on_start(session: aiohttp.ClientSession, context: object,
                       params: aiohttp.TraceRequestStartParams) -> None:
        opened.append(str(params.url))

    trace = aiohttp.TraceConfig()
    trace.on_request_start.append(on_start)
    async with aiohttp.ClientSession(trace_configs=[trace]) as session:
        chat = OpenAIChat("m", base_url=server.base_url, api_key="k", session=session)
        await chat.complete(ask())
        assert "".join([d async for d in chat.stream(ask())])
        await chat.aclose()
        assert not session.closed  # the caller's session stays the caller's
    assert opened == [f"{server.base_url}/chat/completions"] * 2


async def test_images_go_as_image_url_parts_of_the_first_user_message(chat: OpenAIChat, server: ProviderServer) -> None:
    from jurist.models.images import from_data_url, from_url
    from tests.images import data_url, png

    shot, remote = from_data_url(data_url(png())), from_url("https://example.com/chart.png")
    await chat.complete(ask("Judge the session.", images=(shot, remote)))
    messages = server.requests[0]["json"]["messages"]
    assert messages[0] == {"role": "system", "content": "You judge."}
    assert messages[1] == {"role": "user", "content": [
        {"type": "text", "text": "Judge the session."},
        {"type": "text", "text": "[image 1]"}, {"type": "image_url", "image_url": {"url": data_url(png())}},
        {"type": "text", "text": "[image 2]"},
        {"type": "image_url", "image_url": {"url": "https://example.com/chart.png"}},
    ]}


async def test_images_join_the_folded_user_turn_without_a_system_role(server: ProviderServer) -> None:
    from jurist.models.images import from_url

    adapter = OpenAIChat("m", base_url=server.base_url, api_key="k", system_role=False)
    try:
        await adapter.complete(ask("data", images=(from_url("http://example.com/a.gif"),)))
    finally:
        await adapter.aclose()
    [user] = server.requests[0]["json"]["messages"]
    assert user["content"][0] == {"type": "text", "text": "You judge.\n\ndata"}
    assert user["content"][2] == {"type": "image_url", "image_url": {"url": "http://example.com/a.gif"}}


def test_images_are_in_the_cache_key_and_described_in_the_params() -> None:
    from jurist.models.images import from_data_url
    from tests.images import data_url, png

    red, blue = from_data_url(data_url(png(rgb=(255, 0, 0)))), from_data_url(data_url(png(rgb=(0, 0, 255))))
    keys = {ask().cache_key("m", "http://e/v1"), ask(images=(red,)).cache_key("m", "http://e/v1"), ask(images=(blue,)).cache_key("m", "http://e/v1")}
    assert len(keys) == 3
    assert ask(images=(red,)).cache_key("m", "http://e/v1") == ask(images=(red,)).cache_key("m", "http://e/v1")
    params = ask(images=(red,)).params()
    assert params["images"] == [red.describe()] and red.base64_data not in str(params)
