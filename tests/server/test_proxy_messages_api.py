"""POST /v1/messages: Anthropic's Messages API through the gate, translated to chat completions for
the upstream, read by the real ``anthropic`` SDK (create, stream, tool use, errors)."""

from __future__ import annotations

import json

import anthropic
import httpx
import pytest

from jurist.config import Settings
from jurist.models import script
from jurist.server import create_app
from jurist.server.proxy_messages import Shape, chat_body, message_object
from jurist.server.proxy_relay import Finish, Refused, Text, ToolPiece, Usage
from jurist.testing import Reply, tool_call, tool_reply
from tests.server.live import free_port, running
from tests.server.conftest import API_GATE
from tests.server.test_proxy import FAIL, PASS, sse_events

WEATHER = {"name": "weather", "description": "The weather in a city.",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
CALL = tool_call("weather", {"city": "Paris"}, "call_abc123")
ASK = [{"role": "user", "content": "Weather in Paris?"}]


@pytest.fixture
def client(api_proxy):
    with anthropic.Anthropic(base_url=api_proxy, api_key="sk-upstream", max_retries=0) as c:
        yield c


def sent(provider, i: int = -1) -> dict:
    return provider.requests[i]["json"]


def test_a_message_holds_the_gated_answer_its_usage_and_the_record(client, provider):
    provider.script(Reply(text="Paris is the capital of France.", input_tokens=12, output_tokens=7))
    m = client.messages.create(model="claude-test", max_tokens=64, system="Answer briefly.", stop_sequences=["###"],
                               messages=[{"role": "user", "content": "Capital of France?"}],
                               extra_body={"temperature": 0.2})  # older clients send it; the SDK no longer does
    assert (m.type, m.role, m.model, m.stop_reason) == ("message", "assistant", "claude-test", "end_turn")
    [block] = m.content
    assert (block.type, block.text) == ("text", "Paris is the capital of France.")
    assert (m.usage.input_tokens, m.usage.output_tokens) == (12, 7)
    jurist = m.model_extra["jurist"]
    assert jurist["accept_reason"] == "passed" and jurist["translation"]["not_relayed"] == []
    body = sent(provider, 0)
    assert body["messages"] == [{"role": "system", "content": "Answer briefly."},
                                {"role": "user", "content": "Capital of France?"}]
    assert (body["max_tokens"], body["temperature"], body["stop"]) == (64, 0.2, ["###"])
    # The SDK's x-api-key is the upstream key, as a chat client's Authorization would be.
    assert provider.requests[0]["headers"]["authorization"] == "Bearer sk-upstream"


def test_a_rejected_answer_is_regenerated_before_the_message_is_sent(client, provider):
    script("judge", FAIL, PASS)
    provider.script(Reply(text="Paris."), Reply(text="Paris, on the Seine, is the capital."))
    m = client.messages.create(model="claude-test", max_tokens=64, messages=[
        {"role": "user", "content": "Capital of France, and its river?"}])
    assert m.content[0].text == "Paris, on the Seine, is the capital."
    assert m.model_extra["jurist"]["accepted_attempt"] == 2


def test_a_streamed_message_reads_as_the_sdk_expects(client, provider):
    provider.script(Reply(text="Paris is the capital of France."))
    with client.messages.stream(model="claude-test", max_tokens=64, messages=[
            {"role": "user", "content": "Capital of France?"}]) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == final.content[0].text == "Paris is the capital of France."
    assert (final.stop_reason, final.usage.output_tokens) == ("end_turn", 5)


def test_a_streamed_message_carries_jurists_events_and_record(api_proxy, provider):
    provider.script(Reply(text="Paris is the capital of France."))
    with httpx.stream("POST", f"{api_proxy}/v1/messages", headers={"x-api-key": "k"}, json={
            "model": "claude-test", "max_tokens": 64, "stream": True,
            "messages": [{"role": "user", "content": "Capital of France?"}]}) as r:
        events = sse_events(r)
    names = [name for name, _ in events]
    assert names[0] == "message_start" and names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert "jurist.evaluation" in names and "jurist.done" in names
    assert all(data["type"] == name for name, data in events)  # each event's data names its type
    delta = events[-2][1]
    assert delta["delta"]["stop_reason"] == "end_turn" and delta["jurist"]["accept_reason"] == "passed"


def test_a_tool_use_round_trips_through_the_proxy(client, provider):
    provider.script(tool_reply(CALL), Reply(text="It is 18C and sunny in Paris."))
    m = client.messages.create(model="claude-test", max_tokens=64, messages=ASK, tools=[WEATHER])
    [use] = m.content
    assert (m.stop_reason, use.type, use.id, use.name, use.input) == (
        "tool_use", "tool_use", "call_abc123", "weather", {"city": "Paris"})
    assert sent(provider, 0)["tools"] == [{"type": "function", "function": {
        "name": "weather", "parameters": WEATHER["input_schema"], "description": "The weather in a city."}}]
    follow = [*ASK, {"role": "assistant", "content": m.content},
              {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "18C, sunny"}]}]
    m2 = client.messages.create(model="claude-test", max_tokens=64, messages=follow, tools=[WEATHER])
    assert (m2.stop_reason, m2.content[0].text) == ("end_turn", "It is 18C and sunny in Paris.")
    assert sent(provider, 1)["messages"] == [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_abc123", "type": "function", "function": {"name": "weather",
                                                                   "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_abc123", "content": "18C, sunny"}]


def test_a_streamed_tool_use_comes_as_input_json_deltas(client, provider):
    provider.script(tool_reply(CALL))
    with client.messages.stream(model="claude-test", max_tokens=64, messages=ASK, tools=[WEATHER]) as stream:
        kinds = [e.type for e in stream]
        final = stream.get_final_message()
    assert "input_json" in kinds
    [use] = final.content
    assert (final.stop_reason, use.name, use.input) == ("tool_use", "weather", {"city": "Paris"})


def test_a_cut_off_answer_stops_for_max_tokens_and_unknown_usage_is_said():
    body, _, translation = chat_body({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})
    m = message_object(Shape(body, translation), [Text("Well, it"), Finish("length", None, None)])
    assert isinstance(m, dict) and m["stop_reason"] == "max_tokens"
    assert m["jurist"]["translation"]["usage"].startswith("not reported")


def test_tool_arguments_that_are_not_an_object_are_a_502():
    body, _, translation = chat_body({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})
    failed = message_object(Shape(body, translation), [ToolPiece(0, "c1", "weather", "[1, 2"),
                                                       Finish("tool_calls", Usage(1, 1, 2), None)])
    assert not isinstance(failed, dict) and failed.status == 502 and "not a JSON object" in failed.message


def test_the_request_translates_images_tool_results_and_caching_hints():
    _, chat, translation = chat_body({
        "model": "m", "max_tokens": 10, "system": [{"type": "text", "text": "Be brief.",
                                                    "cache_control": {"type": "ephemeral"}}],
        "tool_choice": {"type": "any", "disable_parallel_tool_use": True}, "metadata": {"user_id": "u1"},
        "output_config": {"format": {"type": "json_schema", "schema": {"type": "object"}}},
        "messages": [
            {"role": "user", "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Let me look."},
                                              {"type": "tool_use", "id": "t1", "name": "look", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "is_error": True,
                                          "content": [{"type": "text", "text": "no access"}]},
                                         {"type": "text", "text": "Then guess."}]}]})
    assert chat["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "What is this?"},
                                     {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
        {"role": "assistant", "content": "Let me look.", "tool_calls": [
            {"id": "t1", "type": "function", "function": {"name": "look", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "t1", "content": [{"type": "text", "text": "no access"}]},
        {"role": "user", "content": "Then guess."}]
    assert (chat["tool_choice"], chat["parallel_tool_calls"], chat["user"]) == ("required", False, "u1")
    assert chat["response_format"]["json_schema"]["schema"] == {"type": "object"}
    assert [n["field"] for n in translation.not_relayed] == ["system[0].cache_control",
                                                            "messages[2].content[0].is_error"]


@pytest.mark.parametrize("raw, param, problem", [
    ({"model": "m", "max_tokens": 5, "mesages": [{"role": "user", "content": "hi"}]}, "mesages",
     "unknown field 'mesages' (did you mean 'messages'?)"),
    ({"model": "m", "messages": [{"role": "user", "content": "hi"}]}, "max_tokens", "missing field 'max_tokens'"),
    ({"model": "m", "max_tokens": 5, "thinking": {"type": "enabled", "budget_tokens": 1024},
      "messages": [{"role": "user", "content": "hi"}]}, "thinking", "no thinking blocks"),
    ({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [
        {"type": "document", "source": {"type": "text", "data": "x", "media_type": "text/plain"}}]}]},
     "messages[0].content[0]", "'document' block has no chat-completions form"),
    ({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "txt", "text": "hi"}]}]},
     "messages[0].content[0].type", "unknown block type 'txt' (did you mean 'text'?)"),
    ({"model": "m", "max_tokens": 5, "tools": [{"type": "web_search_20250305", "name": "web_search"}],
      "messages": [{"role": "user", "content": "hi"}]}, "tools[0]", "function tools only"),
])
def test_a_bad_or_unservable_body_is_a_400_in_anthropics_shape(client, provider, raw, param, problem):
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.post("/v1/messages", cast_to=object, body=raw)
    assert caught.value.body["type"] == "error"
    error = caught.value.body["error"]
    assert error["type"] == "invalid_request_error" and problem in error["message"] and error["param"] == param
    assert provider.requests == []  # nothing went upstream


def test_a_body_that_is_not_json_is_a_400_in_anthropics_shape(api_proxy):
    r = httpx.post(f"{api_proxy}/v1/messages", content=b"{nope", headers={"Content-Type": "application/json"})
    assert r.status_code == 400
    assert r.json()["type"] == "error" and "not valid JSON" in r.json()["error"]["message"]


def test_an_upstream_429_is_a_rate_limit_error_with_retry_after(client, provider):
    provider.script(Reply(status=429, headers={"Retry-After": "7"}, message="slow down"))
    with pytest.raises(anthropic.RateLimitError) as caught:
        client.messages.create(model="claude-test", max_tokens=5, messages=ASK)
    assert caught.value.response.headers["retry-after"] == "7"
    error = caught.value.body["error"]
    assert (error["type"], error["message"]) == ("rate_limit_error", "slow down")


def test_an_upstream_500_is_an_api_error_when_streamed_too(client, provider):
    provider.script(Reply(status=500, message="boom"))
    with pytest.raises(anthropic.InternalServerError) as caught:
        with client.messages.stream(model="claude-test", max_tokens=5, messages=ASK) as stream:
            stream.get_final_message()
    assert caught.value.body["error"]["type"] == "api_error"


def test_an_upstream_that_is_down_is_a_502(isolated):
    app = create_app(Settings(home=str(isolated / ".jurist")), upstream=f"http://127.0.0.1:{free_port()}/v1",
                     gate_config=API_GATE)
    with running(app) as base, anthropic.Anthropic(base_url=base, api_key="k", max_retries=0) as client:
        with pytest.raises(anthropic.APIStatusError) as caught:
            client.messages.create(model="claude-test", max_tokens=5, messages=ASK)
    assert caught.value.status_code == 502
    assert caught.value.body["error"]["code"] == "upstream_unavailable"


def test_a_stream_that_breaks_mid_answer_makes_the_sdk_raise(client, provider):
    chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
             "choices": [{"index": 0, "delta": {"content": "Par"}, "finish_reason": None}]}
    provider.script(Reply(body=f"data: {json.dumps(chunk)}\n\n"))  # no finish_reason, no [DONE]
    with pytest.raises(anthropic.APIStatusError) as caught:
        with client.messages.stream(model="claude-test", max_tokens=5, messages=ASK) as stream:
            stream.get_final_message()
    error = caught.value.body["error"]
    assert error["type"] == "api_error" and error["showContinueButton"] is True


def test_the_callers_trace_id_names_the_stored_record(client, api_proxy, provider):
    provider.script(Reply(text="Paris is the capital of France."))
    raw = client.messages.with_raw_response.create(model="claude-test", max_tokens=64, messages=ASK,
                                                   extra_headers={"X-Jurist-Trace-Id": "msg-trace-1"})
    assert raw.headers["x-jurist-trace-id"] == "msg-trace-1"
    assert raw.parse().model_extra["jurist"]["trace_id"] == "msg-trace-1"
    stored = httpx.get(f"{api_proxy}/api/gate/msg-trace-1", params={"wait": 10}, timeout=30).json()["record"]
    assert stored["answer"] == "Paris is the capital of France." and stored["accept_reason"] == "passed"


def test_the_door_refuses_in_anthropics_shape_and_takes_the_token_as_x_api_key(provider, isolated):
    """The server's door (token, body size) answers on /v1/messages in Anthropic's error shape, which
    the SDK reads into its own exception types; an anthropic client's x-api-key may carry the token."""
    script("judge", default=PASS)
    settings = Settings(home=str(isolated / ".jurist"), api_token="s3cret-token", max_proxy_body_bytes=2048)
    app = create_app(settings, upstream=provider.base_url, gate_config=API_GATE, upstream_api_key="sk-upstream")
    with running(app) as base:
        with anthropic.Anthropic(base_url=base, api_key="wrong", max_retries=0) as bad:
            with pytest.raises(anthropic.AuthenticationError) as refused:
                bad.messages.create(model="claude-test", max_tokens=16, messages=ASK)
        assert refused.value.body["type"] == "error"
        assert refused.value.body["error"]["type"] == "authentication_error"
        with anthropic.Anthropic(base_url=base, api_key="s3cret-token", max_retries=0) as good:
            provider.script(Reply(text="Sunny."))
            assert good.messages.create(model="claude-test", max_tokens=16, messages=ASK).content[0].text == "Sunny."
            with pytest.raises(anthropic.APIStatusError) as big:
                good.messages.create(model="claude-test", max_tokens=16,
                                     messages=[{"role": "user", "content": "x" * 4096}])
        assert big.value.status_code == 413 and big.value.body["error"]["type"] == "request_too_large"
    # The token was never sent upstream; the upstream key was.
    assert provider.requests[-1]["headers"]["authorization"] == "Bearer sk-upstream"
    # Chat completions keep OpenAI's shape at the same door.
    with running(app) as base:
        r = httpx.post(f"{base}/v1/chat/completions", json={"model": "m", "messages": ASK})
    assert r.status_code == 401 and r.json()["error"]["type"] in ("invalid_request_error", "authentication_error")


def test_a_tool_results_parts_go_as_text_parts_and_a_part_of_another_type_is_refused_by_its_place():
    def turn(*parts):
        return {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "c1", "content": list(parts)}]}]}

    _, chat, _ = chat_body(turn({"type": "text", "text": "18C"}, {"type": "text", "text": " sunny"}))
    assert chat["messages"] == [{"role": "tool", "tool_call_id": "c1", "content": [
        {"type": "text", "text": "18C"}, {"type": "text", "text": " sunny"}]}]
    with pytest.raises(Refused) as caught:
        chat_body(turn({"type": "text", "text": "18C"}, {"type": "image"}))
    assert caught.value.param == "messages[0].content[0].content[1]"
    assert caught.value.message.endswith("a chat-completions tool result holds text only")
    with pytest.raises(Refused) as caught:
        chat_body(turn({"type": "text", "text": "18C", "txt": "x"}))
    assert "unknown field 'txt'" in caught.value.message
