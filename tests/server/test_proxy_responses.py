"""POST /v1/responses: OpenAI's Responses API through the gate, translated to chat completions for
the upstream, read by the real ``openai`` SDK (created, streamed, a function tool round, errors)."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from jurist.config import Settings
from jurist.models import script
from jurist.server import create_app
from jurist.server.proxy_relay import Finish, Refused, Text, Usage
from jurist.server.proxy_responses import ResponsesStream, Shape, chat_body, response_object
from jurist.testing import Reply, tool_call, tool_reply
from tests.server.live import free_port, running
from tests.server.conftest import API_GATE
from tests.server.test_proxy import FAIL, PASS, sse_events

WEATHER = {"type": "function", "name": "weather", "description": "The weather in a city.", "strict": False,
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
CALL = tool_call("weather", {"city": "Paris"}, "call_abc123")


@pytest.fixture
def client(api_proxy):
    with openai.OpenAI(base_url=f"{api_proxy}/v1", api_key="sk-test", max_retries=0) as c:
        yield c


def sent(provider, i: int = -1) -> dict:
    return provider.requests[i]["json"]


def test_a_response_holds_the_gated_answer_its_usage_and_the_record(client, provider):
    provider.script(Reply(text="Paris is the capital of France.", input_tokens=12, output_tokens=7))
    r = client.responses.create(model="gpt-test", instructions="Answer briefly.", input="Capital of France?",
                                max_output_tokens=64, temperature=0.2, metadata={"team": "a"})
    assert (r.object, r.status, r.output_text) == ("response", "completed", "Paris is the capital of France.")
    assert r.id.startswith("resp_") and r.model == "gpt-test" and r.metadata == {"team": "a"}
    [item] = r.output
    assert (item.type, item.role, item.status, item.content[0].type) == ("message", "assistant", "completed",
                                                                         "output_text")
    assert (r.usage.input_tokens, r.usage.output_tokens, r.usage.total_tokens) == (12, 7, 19)
    jurist = r.model_extra["jurist"]
    assert jurist["accept_reason"] == "passed" and jurist["evaluations"][0]["passed"] is True
    # The upstream was asked in chat completions: instructions as the system message, the sampling options kept.
    body = sent(provider, 0)
    assert body["messages"] == [{"role": "system", "content": "Answer briefly."},
                                {"role": "user", "content": "Capital of France?"}]
    assert (body["max_tokens"], body["temperature"], body["metadata"]) == (64, 0.2, {"team": "a"})


def test_a_rejected_answer_is_regenerated_before_the_response_is_sent(client, provider):
    script("judge", FAIL, PASS)
    provider.script(Reply(text="Paris."), Reply(text="Paris, on the Seine, is the capital."))
    r = client.responses.create(model="gpt-test", input="Capital of France, and its river?")
    assert r.output_text == "Paris, on the Seine, is the capital."
    assert r.model_extra["jurist"]["accepted_attempt"] == 2
    assert len(provider.requests) == 2


def test_a_streamed_response_gives_the_sdk_its_events_and_the_record_on_completion(client, provider):
    provider.script(Reply(text="Paris is the capital of France."))
    events = list(client.responses.create(model="gpt-test", input="Capital of France?", stream=True))
    kinds = [e.type for e in events]
    assert kinds[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"]
    assert kinds[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                          "response.completed"]
    assert "jurist.evaluation" in kinds and "jurist.done" in kinds  # named events a stock reader skips
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == "Paris is the capital of France."
    done = events[-1].response
    assert done.output_text == text and done.usage.output_tokens == 5
    assert done.model_extra["jurist"]["accept_reason"] == "passed"


def test_the_sdk_stream_helper_builds_the_final_response(client, provider):
    provider.script(Reply(text="Paris is the capital of France."))
    with client.responses.stream(model="gpt-test", input="Capital of France?") as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == final.output_text == "Paris is the capital of France."


def test_a_function_tool_round_trips_through_the_proxy(client, provider):
    provider.script(tool_reply(CALL), Reply(text="It is 18C and sunny in Paris."))
    ask = [{"role": "user", "content": "Weather in Paris?"}]
    r = client.responses.create(model="gpt-test", input=ask, tools=[WEATHER])
    [call] = r.output
    assert (call.type, call.call_id, call.name, json.loads(call.arguments)) == (
        "function_call", "call_abc123", "weather", {"city": "Paris"})
    assert r.model_extra["jurist"]["skip_reason"] == "tool_calls"  # a tool round is relayed, not judged
    assert sent(provider, 0)["tools"] == [{"type": "function", "function": {
        "name": "weather", "description": "The weather in a city.", "parameters": WEATHER["parameters"],
        "strict": False}}]
    # The SDK's own items go back as input, with the tool's output.
    follow = [*ask, *r.output, {"type": "function_call_output", "call_id": call.call_id, "output": "18C, sunny"}]
    r2 = client.responses.create(model="gpt-test", input=follow, tools=[WEATHER])
    assert r2.output_text == "It is 18C and sunny in Paris."
    assert sent(provider, 1)["messages"] == [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_abc123", "type": "function", "function": {"name": "weather",
                                                                   "arguments": CALL.arguments}}]},
        {"role": "tool", "tool_call_id": "call_abc123", "content": "18C, sunny"}]


def test_a_streamed_function_call_comes_as_argument_deltas(client, provider):
    provider.script(tool_reply(CALL))
    events = list(client.responses.create(model="gpt-test", input="Weather in Paris?", tools=[WEATHER],
                                          stream=True))
    added = next(e for e in events if e.type == "response.output_item.added")
    assert (added.item.type, added.item.call_id, added.item.name) == ("function_call", "call_abc123", "weather")
    pieces = [e.delta for e in events if e.type == "response.function_call_arguments.delta"]
    assert "".join(pieces) == CALL.arguments
    [call] = events[-1].response.output
    assert events[-1].type == "response.completed" and call.arguments == CALL.arguments


def test_a_cut_off_answer_is_an_incomplete_response():
    body, _ = chat_body({"model": "m", "input": "Tell me everything.", "max_output_tokens": 5})
    r = response_object(Shape(body), [Text("Well, it"), Finish("length", Usage(3, 5, 8), None)])
    assert isinstance(r, dict)
    assert (r["status"], r["incomplete_details"]) == ("incomplete", {"reason": "max_output_tokens"})
    assert r["output"][0]["status"] == "incomplete"
    stream = ResponsesStream(Shape(body))
    frames = stream.start() + stream.text(Text("Well, it")) + stream.finish(Finish("length", None, None))
    last = json.loads(frames.strip().split("\n\n")[-1].split("data: ", 1)[1])
    assert last["type"] == "response.incomplete" and last["response"]["usage"] is None  # not a made-up 0


@pytest.mark.parametrize("raw, param, problem", [
    ({"model": "m", "inptu": "hi"}, "inptu", "unknown field 'inptu' (did you mean 'input'?)"),
    ({"model": "m", "input": "hi", "previous_response_id": "resp_1"}, "previous_response_id", "keeps no responses"),
    ({"model": "m", "input": "hi", "tools": [{"type": "web_search"}]}, "tools[0]", "function tools only"),
    ({"model": "m", "input": [{"type": "mesage", "role": "user", "content": "hi"}]}, "input[0].type",
     "unknown item type 'mesage' (did you mean 'message'?)"),
    ({"model": "m", "input": [{"role": "user", "content": [{"type": "input_txt", "text": "hi"}]}]},
     "input[0].content[0]", "unknown part type 'input_txt' (did you mean 'input_text'?)"),
    ({"model": "m", "input": "hi", "store": True}, "store", "keeps no responses to fetch later"),
    ({"model": "m", "input": "hi", "reasoning": {"summary": "auto"}}, "reasoning.summary", "no reasoning summaries"),
])
def test_a_bad_or_unservable_body_is_a_400_naming_the_field(client, provider, raw, param, problem):
    with pytest.raises(openai.BadRequestError) as caught:
        client.post("/responses", cast_to=object, body=raw)
    error = caught.value.body
    assert problem in error["message"] and error["param"] == param and error["type"] == "invalid_request_error"
    assert provider.requests == []  # nothing went upstream


def test_a_body_that_is_not_json_is_a_400_in_openais_shape(api_proxy, provider):
    r = httpx.post(f"{api_proxy}/v1/responses", content=b"{nope", headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and "not valid JSON" in r.json()["error"]["message"]


def test_the_request_translates_images_files_formats_and_tool_choice():
    _, chat = chat_body({
        "model": "m", "text": {"format": {"type": "json_schema", "name": "city", "schema": {"type": "object"},
                                          "strict": True}},
        "tool_choice": {"type": "function", "name": "weather"}, "tools": [WEATHER], "top_logprobs": 2,
        "include": ["message.output_text.logprobs"], "reasoning": {"effort": "low"},
        "input": [{"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "What is this?"},
            {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "low"},
            {"type": "input_file", "filename": "a.pdf", "file_data": "data:application/pdf;base64,AAAA"}]},
            {"role": "assistant", "content": [{"type": "output_text", "text": "A map.", "annotations": []}]},
            {"role": "developer", "content": "Be brief."}]})
    assert chat["messages"] == [
        {"role": "user", "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "low"}},
            {"type": "file", "file": {"file_data": "data:application/pdf;base64,AAAA", "filename": "a.pdf"}}]},
        {"role": "assistant", "content": [{"type": "text", "text": "A map."}]},
        {"role": "developer", "content": "Be brief."}]
    assert chat["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "city", "schema": {"type": "object"}, "strict": True}}
    assert chat["tool_choice"] == {"type": "function", "function": {"name": "weather"}}
    assert (chat["logprobs"], chat["top_logprobs"], chat["reasoning_effort"]) == (True, 2, "low")


def test_an_upstream_429_keeps_its_status_and_retry_after(client, provider):
    provider.script(Reply(status=429, headers={"Retry-After": "7"}, message="slow down"))
    with pytest.raises(openai.RateLimitError) as caught:
        client.responses.create(model="gpt-test", input="hi")
    assert caught.value.response.headers["retry-after"] == "7"
    assert "slow down" in caught.value.body["message"]


def test_an_upstream_500_is_a_500_when_streamed_too(client, provider):
    provider.script(Reply(status=500, message="boom"))
    with pytest.raises(openai.InternalServerError):
        list(client.responses.create(model="gpt-test", input="hi", stream=True))


def test_an_upstream_that_is_down_is_a_502(provider, isolated):
    app = create_app(Settings(home=str(isolated / ".jurist")), upstream=f"http://127.0.0.1:{free_port()}/v1",
                     gate_config=API_GATE)
    with running(app) as base, openai.OpenAI(base_url=f"{base}/v1", api_key="k", max_retries=0) as client:
        with pytest.raises(openai.APIStatusError) as caught:
            client.responses.create(model="gpt-test", input="hi")
    assert caught.value.status_code == 502 and caught.value.body["code"] == "upstream_unavailable"


def test_a_stream_that_breaks_mid_answer_fails_the_response_and_the_sdk_raises(client, api_proxy, provider):
    chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
             "choices": [{"index": 0, "delta": {"content": "Par"}, "finish_reason": None}]}
    provider.script(Reply(body=f"data: {json.dumps(chunk)}\n\n"))  # no finish_reason, no [DONE]
    with pytest.raises(openai.APIError) as caught:
        list(client.responses.create(model="gpt-test", input="hi", stream=True))
    assert caught.value.body["showContinueButton"] is True
    provider.script(Reply(body=f"data: {json.dumps(chunk)}\n\n"))
    with httpx.stream("POST", f"{api_proxy}/v1/responses", json={"model": "m", "input": "hi", "stream": True}) as r:
        events = sse_events(r)
    names = [name for name, _ in events]
    assert names[0] == "response.created" and names[-2:] == ["response.failed", "error"]
    assert events[-2][1]["response"]["status"] == "failed"


def test_the_callers_trace_id_names_the_stored_record(client, api_proxy, provider):
    provider.script(Reply(text="Paris is the capital of France."))
    raw = client.responses.with_raw_response.create(model="gpt-test", input="Capital of France?",
                                                    extra_headers={"X-Jurist-Trace-Id": "resp-trace-1"})
    assert raw.headers["x-jurist-trace-id"] == "resp-trace-1"
    assert raw.parse().model_extra["jurist"]["trace_id"] == "resp-trace-1"
    stored = httpx.get(f"{api_proxy}/api/gate/resp-trace-1", params={"wait": 10}, timeout=30).json()["record"]
    assert stored["answer"] == "Paris is the capital of France." and stored["accept_reason"] == "passed"


def test_log_probabilities_asked_with_include_come_back_on_the_output_text():
    body, chat = chat_body({"model": "m", "input": "hi", "top_logprobs": 1,
                            "include": ["message.output_text.logprobs"]})
    assert (chat["logprobs"], chat["top_logprobs"]) == (True, 1)
    entry = {"token": "Hi", "logprob": -0.1, "bytes": [72, 105],
             "top_logprobs": [{"token": "Hi", "logprob": -0.1, "bytes": [72, 105]}]}
    r = response_object(Shape(body), [Text("Hi", [entry]), Finish("stop", None, None)])
    assert isinstance(r, dict)
    assert r["output"][0]["content"][0]["logprobs"] == [entry]
    assert r["usage"] is None  # the upstream reported none: not a made-up 0


def test_a_function_outputs_parts_go_as_text_parts_and_a_part_of_another_type_is_refused_by_its_place():
    def output(*parts):
        return {"model": "m", "input": [{"type": "function_call_output", "call_id": "c1", "output": list(parts)}]}

    _, chat = chat_body(output({"type": "input_text", "text": "18C"}, {"type": "input_text", "text": " sunny"}))
    assert chat["messages"] == [{"role": "tool", "tool_call_id": "c1", "content": [
        {"type": "text", "text": "18C"}, {"type": "text", "text": " sunny"}]}]
    with pytest.raises(Refused) as caught:
        chat_body(output({"type": "input_text", "text": "18C"}, {"type": "input_image"}))
    assert caught.value.param == "input[0].output[1]"
    assert caught.value.message.endswith("a chat-completions tool result holds text only")
    with pytest.raises(Refused) as caught:
        chat_body(output({"type": "input_text", "text": 3}))
    assert (caught.value.param, caught.value.message) == ("input[0].output[0].text",
                                                          "invalid request: input[0].output[0].text must be a string")
