"""The gate proxy changes nothing but what gating needs: the upstream gets the client's request as it
came, the client gets the upstream's answer as it came (finish reason, usage, logprobs, fingerprint,
refusal, tool calls as OpenAI assembles them), and a malformed or oversized upstream answer is a 502."""

from __future__ import annotations

import json
import threading
import time

import httpx
import openai
import pytest

from jurist.config import Settings
from jurist.models import script
from jurist.server import create_app
from jurist.testing import Reply, tool_call, tool_reply
from jurist.testing.provider_server import schema_dialect
from jurist.testing.replies import token_logprobs
from tests.server.live import running
from tests.server.test_proxy import ASK, FAIL, GATE_CONFIG, PASS, sse_events

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


@pytest.fixture
def served(provider, isolated):
    script("judge", default=PASS)
    app = create_app(Settings(home=str(isolated / ".jurist")), upstream=provider.base_url, gate_config=GATE_CONFIG)
    with running(app) as base:
        yield base, app


@pytest.fixture
def url(served):
    return served[0]


@pytest.fixture
def client(url):
    with openai.OpenAI(base_url=f"{url}/v1", api_key="sk-test", max_retries=0) as c:
        yield c


def sse(*chunks: object, done: bool = True) -> str:
    """A raw SSE body of chat.completion.chunk objects (dicts are wrapped as one choice's delta)."""
    out = []
    for chunk in chunks:
        out.append(f"data: {chunk if isinstance(chunk, str) else json.dumps(chunk)}\n\n")
    if done:
        out.append("data: [DONE]\n\n")
    return "".join(out)


def chunk(delta: object, finish: str | None = None, **top: object) -> dict:
    return {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **top}


def post(url: str, body: dict, **kw) -> httpx.Response:
    return httpx.post(f"{url}/v1/chat/completions", json=body, timeout=30, **kw)


# -- 1. tool calls assembled as OpenAI does -------------------------------------------------


def llama_tool_stream(pieces: list[str], name: str = "get_weather") -> str:
    """A tool call streamed as llama-cpp-python does: the id and the whole name in every piece."""
    return sse(chunk({"role": "assistant", "content": None}),
               *(chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                        "function": {"name": name, "arguments": part}}]}) for part in pieces),
               chunk({}, "tool_calls"))


def test_a_tool_name_repeated_in_every_delta_reaches_a_streaming_client_once(client, provider):
    provider.script(Reply(body=llama_tool_stream(['{"city"', ': "Paris"', "}"])))
    stream = client.chat.completions.create(model="m", messages=ASK, tools=[WEATHER], stream=True)
    names, arguments = "", ""
    for ch in stream:
        for tc in (ch.choices[0].delta.tool_calls or []) if ch.choices else []:
            names += tc.function.name or "" if tc.function else ""
            arguments += tc.function.arguments or "" if tc.function else ""
    assert names == "get_weather" and json.loads(arguments) == {"city": "Paris"}


def test_thirty_thousand_tool_call_pieces_are_relayed_in_linear_time_without_blocking_the_proxy(url, provider):
    provider.script(Reply(body=llama_tool_stream(["x" * 100] * 30_000)))
    waits: list[float] = []
    done = threading.Event()

    def probe() -> None:  # the proxy keeps answering other requests meanwhile
        while not done.is_set():
            started = time.perf_counter()
            httpx.get(f"{url}/v1/models", timeout=60)
            waits.append(time.perf_counter() - started)
            time.sleep(0.05)

    started = time.perf_counter()
    size = 0
    with httpx.stream("POST", f"{url}/v1/chat/completions", timeout=120,
                      json={"model": "m", "messages": ASK, "stream": True, "tools": [WEATHER]}) as r:
        prober = threading.Thread(target=probe)
        prober.start()
        for event, data in sse_events(r):
            if event is None and data != "[DONE]" and data["choices"]:
                size += sum(len(tc["function"].get("arguments") or "")
                            for tc in data["choices"][0]["delta"].get("tool_calls") or ())
    elapsed = time.perf_counter() - started
    done.set()
    prober.join()
    assert size == 3_000_000
    assert elapsed < 30, f"30,000 pieces took {elapsed:.1f} s"
    assert max(waits) < 3, f"a request waited {max(waits):.1f} s behind the relay"


def test_a_non_streamed_tool_call_is_the_upstreams_own(client, provider):
    provider.script(tool_reply(tool_call("get_weather", {"city": "Paris"}, "call_9")))
    r = client.chat.completions.create(model="m", messages=ASK, tools=[WEATHER])
    [call] = r.choices[0].message.tool_calls
    assert (call.id, call.function.name, json.loads(call.function.arguments)) == ("call_9", "get_weather",
                                                                                {"city": "Paris"})
    assert "stream" not in provider.requests[0]["json"]  # asked as the client asked: not streamed


# -- 2. the upstream receives exactly the client's request ------------------------------------

CONVERSATION = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Weather in Paris?", "name": "ana"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "18C, sunny"},
    {"role": "assistant", "content": "It is 18C and sunny."},
    {"role": "user", "content": [{"type": "text", "text": "And this picture?"},
                                 {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=",
                                                                     "detail": "low"}}]},
]


@pytest.mark.parametrize("stream", [False, True])
def test_every_message_and_unknown_field_reaches_the_upstream_as_sent(url, provider, stream):
    provider.script(Reply(text="A cloudless sky over Paris."))
    body = {"model": "m", "messages": CONVERSATION, "tools": [WEATHER], "user": "u-7", "metadata": {"k": "v"},
            "top_p": 0.5, "stream": stream}
    r = post(url, body)
    assert r.status_code == 200
    sent = provider.requests[0]["json"]
    assert sent["messages"] == CONVERSATION
    assert (sent["user"], sent["metadata"], sent["top_p"], sent["tools"]) == ("u-7", {"k": "v"}, 0.5, [WEATHER])


def test_a_regeneration_appends_to_the_clients_own_messages(url, provider):
    script("judge", FAIL, PASS)
    provider.script(Reply(text="Sunny."), Reply(text="A cloudless sky over Paris, 18C."))
    r = post(url, {"model": "m", "messages": CONVERSATION})
    assert r.json()["choices"][0]["message"]["content"] == "A cloudless sky over Paris, 18C."
    again = provider.requests[1]["json"]["messages"]
    assert again[:len(CONVERSATION)] == CONVERSATION
    [feedback] = again[len(CONVERSATION):]  # the judge's feedback, after the client's messages
    assert feedback["role"] == "user" and "name the river" in feedback["content"]


# -- 3. a cut-off answer says so -----------------------------------------------------------------


def test_a_truncated_answer_keeps_length_and_its_record_says_truncated(client, provider):
    provider.script(Reply(text="Paris is", finish_reason="length"))
    r = client.chat.completions.create(model="m", messages=ASK, max_tokens=5)
    assert r.choices[0].finish_reason == "length"
    jurist = r.model_extra["jurist"]
    assert jurist["truncated"] is True and jurist["llm_calls"][0]["finish_reason"] == "length"

    provider.script(Reply(text="Paris is", finish_reason="length"))
    chunks = list(client.chat.completions.create(model="m", messages=ASK, max_tokens=5, stream=True))
    assert chunks[-1].choices[0].finish_reason == "length"
    assert chunks[-1].model_extra["jurist"]["truncated"] is True


def test_a_complete_answer_is_not_marked_truncated(client, provider):
    provider.script(Reply(text="Paris."))
    r = client.chat.completions.create(model="m", messages=ASK)
    assert r.choices[0].finish_reason == "stop" and "truncated" not in r.model_extra["jurist"]


# -- 4. the upstream's response data reaches the client -------------------------------------------


def test_usage_of_a_non_streamed_request_comes_from_an_upstream_that_sends_none_in_streams(client, provider):
    provider.script(Reply(text="Paris.", usage=False, input_tokens=21, output_tokens=3))
    r = client.chat.completions.create(model="m", messages=ASK)
    assert (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens) == (21, 3, 24)


def test_logprobs_asked_by_the_client_come_back(client, provider):
    provider.script(Reply(text="Paris", logprobs=token_logprobs(["Par", "is"], {0: {"Par": -0.1, "Lon": -2.5}})))
    r = client.chat.completions.create(model="m", messages=ASK, logprobs=True, top_logprobs=2)
    content = r.choices[0].logprobs.content
    assert [t.token for t in content] == ["Par", "is"]
    assert [a.token for a in content[0].top_logprobs] == ["Par", "Lon"]


def test_system_fingerprint_and_refusal_come_back(client, provider):
    body = {"id": "x", "object": "chat.completion", "created": 1, "model": "m", "system_fingerprint": "fp_abc",
            "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                         "message": {"role": "assistant", "content": "I cannot help with that.",
                                     "refusal": "I cannot help with that."}}],
            "usage": {"prompt_tokens": 4, "completion_tokens": 6, "total_tokens": 10,
                      "completion_tokens_details": {"reasoning_tokens": 2}}}
    provider.script(Reply(body=json.dumps(body)))
    r = client.chat.completions.create(model="m", messages=ASK)
    assert r.system_fingerprint == "fp_abc" and r.choices[0].message.refusal == "I cannot help with that."
    assert r.usage.completion_tokens_details.reasoning_tokens == 2


# -- 5a. structured output in the upstream's own dialect ------------------------------------------


def test_a_json_schema_response_format_is_sent_the_way_llama_cpp_python_reads_it(client, provider):
    provider.default = schema_dialect("json_object_schema")  # llama-cpp-python: a 500 for json_schema
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    r = client.chat.completions.create(model="m", messages=ASK, response_format={
        "type": "json_schema", "json_schema": {"name": "place", "schema": schema, "strict": True}})
    assert json.loads(r.choices[0].message.content) == {"city": "x"}
    formats = [q["json"].get("response_format") for q in provider.requests]
    assert formats[-1] == {"type": "json_object", "schema": schema}


def test_a_json_answer_regenerated_with_the_revision_strategy_stays_one_json_object(provider, isolated):
    script("judge", FAIL, PASS)
    provider.default = schema_dialect("json_schema")
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    app = create_app(Settings(home=str(isolated / ".jurist")), upstream=provider.base_url,
                     gate_config={**GATE_CONFIG, "strategy": "revision"})
    with running(app) as url, openai.OpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0) as c:
        chunks = list(c.chat.completions.create(model="m", messages=ASK, stream=True, response_format={
            "type": "json_schema", "json_schema": {"name": "place", "schema": schema}}))
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert json.loads(text) == {"city": "x"}  # one JSON object: no notice text spliced in
    assert chunks[-1].model_extra["jurist"]["accepted_attempt"] == 2


# -- 8. a malformed or oversized upstream is a 502 ---------------------------------------------------

MALFORMED = {
    "tool_calls a list of text": chunk({"tool_calls": ["x"]}),
    "function text": chunk({"tool_calls": [{"index": 0, "id": "c", "function": "x"}]}),
    "index text": chunk({"tool_calls": [{"index": "abc", "id": "c", "function": {"name": "f", "arguments": ""}}]}),
    "name a number": chunk({"tool_calls": [{"index": 0, "id": "c", "function": {"name": 5, "arguments": ""}}]}),
    "arguments an object": chunk({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f", "arguments": {}}}]}),
    "delta text": chunk("x"),
    "choices an object": {"id": "c1", "object": "chat.completion.chunk", "choices": {}},
    "usage text": chunk({"content": "Paris"}, usage="abc"),
    "usage beyond a float": '{"id": "c1", "choices": [{"index": 0, "delta": {"content": "Paris"}}], '
                            '"usage": {"prompt_tokens": 1e400, "completion_tokens": 1}}',
    "content a number": chunk({"content": 5}),
}


@pytest.mark.parametrize("shape", list(MALFORMED))
def test_a_malformed_stream_chunk_is_a_502_saying_what_was_wrong(url, provider, shape):
    provider.script(Reply(body=sse(MALFORMED[shape], chunk({}, "stop"))))
    r = post(url, {"model": "m", "messages": ASK, "stream": True, "tools": [WEATHER]})
    assert r.status_code == 502, r.text
    assert "not in OpenAI's shape" in r.json()["error"]["message"]


def test_a_tool_call_without_a_finish_reason_is_no_server_error(url, provider):
    provider.script(Reply(body=sse(chunk({"tool_calls": [{"index": 0, "id": "c", "type": "function",
                                                          "function": {"name": "f", "arguments": "{}"}}]}))))
    with httpx.stream("POST", f"{url}/v1/chat/completions", timeout=30,
                      json={"model": "m", "messages": ASK, "stream": True, "tools": [WEATHER]}) as r:
        events = sse_events(r)
    assert r.status_code == 200
    last = [d for e, d in events if d != "[DONE]"][-1]
    assert last["choices"][0]["finish_reason"] == "tool_calls"


@pytest.mark.parametrize("message", [{"role": "assistant", "content": 5},
                                     {"role": "assistant", "content": None, "tool_calls": ["x"]},
                                     {"role": "assistant", "content": None,
                                      "tool_calls": [{"id": "c", "type": "function", "function": {"name": 5}}]}])
def test_a_malformed_reply_is_a_502(url, provider, message):
    body = {"id": "x", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
    provider.script(Reply(body=json.dumps(body)))
    r = post(url, {"model": "m", "messages": ASK})
    assert r.status_code == 502, r.text


def test_an_answer_over_the_byte_cap_is_a_502_naming_the_cap(url, provider):
    big = {"id": "x", "object": "chat.completion", "created": 1, "model": "m",
           "choices": [{"index": 0, "message": {"role": "assistant", "content": "a" * (17 << 20)},
                        "finish_reason": "stop"}]}
    provider.script(Reply(body=json.dumps(big)))
    r = post(url, {"model": "m", "messages": ASK})
    assert r.status_code == 502 and "16 MiB" in r.json()["error"]["message"]

    provider.script(Reply(body=sse(*(chunk({"content": "a" * (1 << 20)}) for _ in range(17)), chunk({}, "stop"))))
    with httpx.stream("POST", f"{url}/v1/chat/completions", timeout=30,
                      json={"model": "m", "messages": ASK, "stream": True}) as r:
        events = sse_events(r)
    errors = [d for e, d in events if e == "jurist.error"]
    assert errors and "16 MiB" in errors[0]["error"]["message"]


def test_a_trace_id_or_model_name_too_long_to_record_is_refused_naming_the_limit(url, provider):
    r = post(url, {"model": "m", "messages": ASK}, headers={"X-Jurist-Trace-Id": "t" * 65})
    assert r.status_code == 400 and "64" in r.json()["error"]["message"]
    r = post(url, {"model": "m" * 201, "messages": ASK})
    assert r.status_code == 400 and "200" in r.json()["error"]["message"]
    assert provider.requests == []  # nothing went upstream unrecorded


def test_many_model_names_share_one_http_session(served, provider):
    url, app = served
    for i in range(30):
        provider.script(Reply(text="Paris."))
        assert post(url, {"model": f"model-{i}", "messages": ASK}).status_code == 200
    models = app.state.proxy._models.values()
    sessions = {id(m.adapter._session) for m in models}
    assert len(models) == 30 and len(sessions) == 1


# -- 10. note 004's record fields ------------------------------------------------------------------------


def test_call_entries_carry_the_upstreams_status_and_headers_without_secrets(client, provider):
    provider.script(Reply(text="Paris.", headers={"X-Request-Id": "req_42", "Set-Cookie": "s=1",
                                                  "X-Api-Key": "secret", "OpenAI-Processing-Ms": "12"}))
    r = client.chat.completions.create(model="m", messages=ASK)
    call = r.model_extra["jurist"]["llm_calls"][0]
    assert call["http_status"] == 200
    headers = call["http_headers"]
    assert headers["x-request-id"] == "req_42" and headers["openai-processing-ms"] == "12"
    assert not {"set-cookie", "x-api-key", "authorization"} & set(headers)


def test_continue_context_names_the_provider_model_and_extracted_content(url, provider):
    provider.script(Reply(status=500))
    extracted = [{"url": "https://example.org/a", "text": "Paris has 2.1 million people."}]
    r = post(url, {"model": "m", "messages": ASK, "extractedContent": extracted})
    context = r.json()["error"]["continueContext"]
    assert context["provider"] == provider.base_url and context["model"] == "m"
    assert context["extractedContent"] == extracted
    assert "extractedContent" not in provider.requests[0]["json"]  # the proxy's own, not the upstream's
