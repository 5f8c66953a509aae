"""Tool calls through the gate proxy: a tool-call answer is relayed unchanged and not judged; the
request that carries the tool result gets the final text answer, which is judged."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from jurist.models import script
from jurist.server import create_app
from jurist.testing import Reply, tool_call, tool_reply
from tests.server.live import running
from tests.server.test_proxy import FAIL, GATE_CONFIG, PASS, sse_events

WEATHER = {"type": "function", "function": {
    "name": "weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
CALL = tool_call("weather", {"city": "Paris"}, "call_abc123")
CALL_JSON = CALL.wire()  # as the wire carries it
FINAL = "It is 18C and sunny in Paris."


@pytest.fixture
def proxy(provider, isolated):
    from jurist.config import Settings

    script("judge", default=PASS)
    app = create_app(Settings(home=str(isolated / ".jurist")), upstream=provider.base_url, gate_config=GATE_CONFIG)
    with running(app) as base:
        yield base, app


@pytest.fixture
def client(proxy):
    with openai.OpenAI(base_url=f"{proxy[0]}/v1", api_key="sk-test", max_retries=0) as c:
        yield c


def follow_up(message: dict, result: str = "18C, sunny") -> list[dict]:
    """The next request of the tool loop: the question, the tool-call turn, the tool's result."""
    return [*ASK, message, {"role": "tool", "tool_call_id": CALL.id, "content": result}]


def stored(app, trace_id: str):
    store = app.state.proxy.runtime.store
    store.flush()
    return store.calls(trace_id=trace_id)


def test_a_tool_call_answer_reaches_a_stock_client_unchanged_and_is_not_judged(client, provider, proxy):
    provider.script(tool_reply(CALL, input_tokens=30, output_tokens=12))
    r = client.chat.completions.create(model="gpt-test", messages=ASK, tools=[WEATHER])
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    [call] = choice.message.tool_calls
    assert (call.id, call.type, call.function.name) == ("call_abc123", "function", "weather")
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    jurist = r.model_extra["jurist"]
    assert jurist["evaluation_skipped"] is True and jurist["skip_reason"] == "tool_calls"
    assert jurist["evaluations"] == [] and [c["type"] for c in jurist["llm_calls"]] == ["generation"]
    assert r.usage.total_tokens == 42
    assert len(provider.requests) == 1 and provider.requests[0]["json"]["tools"] == [WEATHER]  # no judge call upstream
    [row] = stored(proxy[1], jurist["trace_id"])
    assert row["parsed"] == {"tool_calls": [CALL_JSON]} and row["response_text"] == ""  # the call is on record

    # The follow-up carries the result; its text answer is judged.
    provider.script(Reply(text=FINAL))
    r2 = client.chat.completions.create(model="gpt-test", messages=follow_up(choice.message.model_dump(exclude_none=True)),
                                        tools=[WEATHER])
    assert r2.choices[0].message.content == FINAL and r2.choices[0].finish_reason == "stop"
    jurist2 = r2.model_extra["jurist"]
    assert jurist2["accept_reason"] == "passed" and [e["passed"] for e in jurist2["evaluations"]] == [True]
    sent = provider.requests[1]["json"]["messages"]
    assert sent[1]["tool_calls"][0]["id"] == "call_abc123" and sent[2]["tool_call_id"] == "call_abc123"


def test_a_streamed_tool_call_is_relayed_delta_by_delta(client, provider, proxy):
    provider.script(tool_reply(CALL, tool_call("weather", {"city": "Lyon"}, "call_def456")))
    chunks = list(client.chat.completions.create(model="gpt-test", messages=ASK, tools=[WEATHER], stream=True))
    pieces = [tc for ch in chunks if ch.choices for tc in ch.choices[0].delta.tool_calls or ()]
    assert len(pieces) > 4  # the arguments arrive in pieces, as the upstream sent them
    calls: dict[int, dict] = {}
    for p in pieces:
        c = calls.setdefault(p.index, {"id": None, "name": "", "arguments": ""})
        c["id"] = p.id or c["id"]
        c["name"] += p.function.name or ""
        c["arguments"] += p.function.arguments or ""
    assert calls == {0: {"id": "call_abc123", "name": "weather", "arguments": '{"city": "Paris"}'},
                     1: {"id": "call_def456", "name": "weather", "arguments": '{"city": "Lyon"}'}}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    assert chunks[-1].model_extra["jurist"]["skip_reason"] == "tool_calls"
    assert [c["type"] for c in chunks[-1].model_extra["jurist"]["llm_calls"]] == ["generation"]


def test_text_before_a_tool_call_is_relayed_with_it(proxy, provider):
    provider.script(tool_reply(CALL, text="Let me look that up."))
    r = httpx.post(f"{proxy[0]}/v1/chat/completions",
                   json={"model": "gpt-test", "messages": ASK, "tools": [WEATHER]})
    message = r.json()["choices"][0]["message"]
    assert message["content"] == "Let me look that up." and message["tool_calls"] == [CALL_JSON]
    assert r.json()["choices"][0]["finish_reason"] == "tool_calls"


def test_a_rejected_final_answer_is_regenerated_without_another_round_of_tools(proxy, provider):
    script("judge", FAIL, PASS)
    provider.script(Reply(text="Sunny."), Reply(text=FINAL))
    assistant = {"role": "assistant", "content": None, "tool_calls": [CALL_JSON]}
    r = httpx.post(f"{proxy[0]}/v1/chat/completions",
                   json={"model": "gpt-test", "messages": follow_up(assistant), "tools": [WEATHER]}, timeout=30)
    assert r.json()["choices"][0]["message"]["content"] == FINAL
    first, second = (q["json"] for q in provider.requests)
    assert "tool_choice" not in first and second["tool_choice"] == "none" and second["tools"] == [WEATHER]


def test_a_raw_tool_call_stream_has_the_jurist_done_event(proxy, provider):
    provider.script(tool_reply(CALL))
    with httpx.stream("POST", f"{proxy[0]}/v1/chat/completions",
                      json={"model": "gpt-test", "messages": ASK, "tools": [WEATHER], "stream": True}) as r:
        events = sse_events(r)
    assert [e for e, _ in events if e] == ["jurist.done"]
    assert events[0][1]["choices"][0]["delta"]["role"] == "assistant"
    assert events[-1] == (None, "[DONE]")


# -- LangChain -------------------------------------------------------------------------------------

langchain_openai = pytest.importorskip("langchain_openai")


def weather(city: str) -> str:
    """The weather in a city."""
    return f"18C, sunny in {city}"


@pytest.mark.parametrize("streaming", [False, True])
def test_a_langchain_tool_loop_runs_through_the_proxy(proxy, provider, streaming):
    from langchain_core.messages import HumanMessage, ToolMessage

    provider.script(tool_reply(CALL), Reply(text=FINAL))
    llm = langchain_openai.ChatOpenAI(model="gpt-test", base_url=f"{proxy[0]}/v1", api_key="sk-test",
                                      max_retries=0, streaming=streaming).bind_tools([weather])
    history = [HumanMessage(ASK[0]["content"])]
    first = llm.invoke(history)
    assert [(c["name"], c["args"], c["id"]) for c in first.tool_calls] == [("weather", {"city": "Paris"}, "call_abc123")]
    history += [first, ToolMessage(weather(**first.tool_calls[0]["args"]), tool_call_id=first.tool_calls[0]["id"])]
    final = llm.invoke(history)
    assert final.content == FINAL and not final.tool_calls
    sent = provider.requests[1]["json"]
    assert sent["messages"][1]["tool_calls"][0]["id"] == "call_abc123"
    assert sent["messages"][2] == {"role": "tool", "tool_call_id": "call_abc123", "content": "18C, sunny in Paris"}
    assert sent["tools"][0]["function"]["name"] == "weather"
    assert len(provider.requests) == 2  # the tool round and the final answer; only the judge besides


# -- the limit of a tool loop and continuation (note 004) ---------------------------------------------


def rounds(n: int) -> list[dict]:
    """The question and ``n`` rounds of tool calls with their results."""
    out = list(ASK)
    for i in range(n):
        call = tool_call("weather", {"city": f"City {i}"}, f"call_{i}")
        out += [{"role": "assistant", "content": None, "tool_calls": [call.wire()]},
                {"role": "tool", "tool_call_id": call.id, "content": "sunny"}]
    return out


@pytest.mark.parametrize("stream", [False, True])
def test_a_tool_loop_past_max_iterations_is_stopped_with_a_continue_context(provider, isolated, stream):
    from jurist.config import Settings

    script("judge", default=PASS)
    app = create_app(Settings(home=str(isolated / ".jurist")), upstream=provider.base_url, gate_config=GATE_CONFIG,
                     max_iterations=2)
    with running(app) as base, openai.OpenAI(base_url=f"{base}/v1", api_key="k", max_retries=0) as c:
        provider.script(tool_reply(CALL))
        r = c.chat.completions.create(model="gpt-test", messages=rounds(1), tools=[WEATHER])  # round 2: fine
        assert r.choices[0].finish_reason == "tool_calls"

        provider.script(tool_reply(CALL))
        with pytest.raises(openai.UnprocessableEntityError) as info:
            c.chat.completions.create(model="gpt-test", messages=rounds(2), tools=[WEATHER], stream=stream)
        body = info.value.body
        assert body["code"] == "MAX_ITERATIONS" and body["showContinueButton"] is True
        assert body["continueContext"]["messages"] == rounds(2) and body["continue_context"] == rounds(2)
        assert body["continueContext"]["lastUserMessage"] == ASK[0]

        provider.script(tool_reply(CALL))  # the caller chose to go on: the loop may run another round
        r = c.chat.completions.create(model="gpt-test", messages=body["continueContext"]["messages"],
                                      tools=[WEATHER], extra_body={"isContinuation": True})
        assert r.choices[0].message.tool_calls[0].id == "call_abc123"
        assert "isContinuation" not in provider.requests[-1]["json"]


def test_is_continuation_in_the_notes_spelling_keeps_the_tool_turns(client, provider):
    old = [*rounds(1), {"role": "assistant", "content": "Sunny."}, {"role": "user", "content": "And Lyon?"}]
    provider.script(Reply(text="Sunny too."), Reply(text="Sunny too."))
    client.chat.completions.create(model="gpt-test", messages=old)
    assert provider.requests[-1]["json"]["messages"] == old  # the upstream gets every turn; the judge a filtered view
    client.chat.completions.create(model="gpt-test", messages=old, extra_body={"isContinuation": True})
    assert provider.requests[-1]["json"]["messages"] == old  # nothing filtered


@pytest.mark.parametrize("stream", [False, True])
def test_a_failed_first_call_offers_the_continue_context(client, provider, stream):
    provider.script(Reply(status=429, headers={"Retry-After": "3"}))
    with pytest.raises(openai.RateLimitError) as info:
        client.chat.completions.create(model="gpt-test", messages=ASK, stream=stream)
    body = info.value.body
    assert "scripted by the test" in body["message"]  # still the upstream's own error
    assert body["showContinueButton"] is True and body["continueContext"]["messages"] == ASK
    assert body["continueContext"]["model"] == "gpt-test" and info.value.response.headers["retry-after"] == "3"


def test_a_failure_mid_answer_has_the_notes_code_and_fields(proxy, provider):
    from tests.server.test_proxy import broken_stream

    provider.script(broken_stream())
    with httpx.stream("POST", f"{proxy[0]}/v1/chat/completions",
                      json={"model": "gpt-test", "messages": ASK, "stream": True}) as r:
        events = sse_events(r)
    name, error = events[-2]
    assert name == "jurist.error" and error["error"]["code"] == "GENERATION_FAILED"
    assert error["error"]["showContinueButton"] is True and error["error"]["continueContext"]["messages"] == ASK
    assert error["jurist_event"]["data"]["continueContext"]["lastUserMessage"] == ASK[0]


# -- the proxy's own gate: note 004's self-evaluation, on by default -------------------------------------


def test_the_proxy_command_self_evaluates_comprehensiveness_with_two_retries_by_default():
    from jurist.cli.proxy import describe_gate, gate_config_from, proxy_gate_config
    from jurist.gate.config import GateConfig

    config = proxy_gate_config(gate_config_from(None, None, None, None), None)
    assert isinstance(config, GateConfig)
    assert config.evaluator == "comprehensiveness" and config.evaluate_feedback_enabled
    assert config.regenerations() == 2
    assert proxy_gate_config(gate_config_from(None, None, None, False), None).evaluate_feedback_enabled is False
    assert proxy_gate_config(None, 4).max_regenerations == 4
    assert proxy_gate_config(gate_config_from(None, "quality", None, None), None).evaluator == "quality"
    assert proxy_gate_config(None, None, require_calibration=0.6).require_calibration.min_kappa == 0.6
    assert describe_gate(proxy_gate_config(None, None)) == "comprehensiveness, blocking, up to 2 retries"
    assert describe_gate(proxy_gate_config(GateConfig(evaluate_feedback_enabled=False), None)) == \
        "comprehensiveness, blocking, score only"


def test_max_evaluation_retries_comes_from_jurist_yaml(isolated, monkeypatch):
    from jurist.config import Settings

    (isolated / "jurist.yaml").write_text("max_evaluation_retries: 1\n")
    assert Settings.load(isolated / "jurist.yaml").max_evaluation_retries == 1
    (isolated / "jurist.yaml").unlink()
    monkeypatch.setenv("JURIST_MAX_EVALUATION_RETRIES", "3")
    assert Settings.load().max_evaluation_retries == 3


NOT_COMPREHENSIVE = '{"comprehensive": false, "reason": "the humidity is missing"}'


def test_an_answer_that_stays_incomplete_is_retried_twice_then_sent(provider, isolated):
    from jurist.cli.proxy import proxy_gate_config
    from jurist.config import Settings
    from jurist.gate.config import GateConfig
    from jurist.gate.types import ENCOURAGEMENT

    judge = script("judge", default=NOT_COMPREHENSIVE)
    config = proxy_gate_config(GateConfig(judge="scripted/judge"), None)
    app = create_app(Settings(home=str(isolated / ".jurist")), upstream=provider.base_url, gate_config=config)
    provider.script(Reply(text="Sunny."), Reply(text="Sunny, 18C."), Reply(text="Sunny, 18C, light wind."))
    with running(app) as base, openai.OpenAI(base_url=f"{base}/v1", api_key="k", max_retries=0) as c:
        r = c.chat.completions.create(model="gpt-test", messages=ASK)
    jurist = r.model_extra["jurist"]
    assert jurist["accept_reason"] == "max_regenerations" and len(provider.requests) == 3
    assert [a["kind"] for a in jurist["attempts"]] == ["generation", "comprehensive_retry", "comprehensive_retry"]
    assert [e["comprehensive"] for e in jurist["evaluations_list"]] == [False, False, False]
    assert [c["type"] for c in jurist["llm_calls"]].count("self_evaluation") == 3
    assert provider.requests[1]["json"]["messages"][-1] == {"role": "user", "content": ENCOURAGEMENT}
    assert {q.temperature for q in judge.requests} == {0.1}  # note 004's judge call


def test_a_tool_call_answer_cut_off_upstream_is_a_502_with_the_continue_context(proxy, provider):
    base = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    piece = {"index": 0, "id": "call_abc123", "type": "function", "function": {"name": "weather", "arguments": ""}}
    chunk = {**base, "choices": [{"index": 0, "delta": {"tool_calls": [piece]}, "finish_reason": None}]}
    provider.script(Reply(body=f"data: {json.dumps(chunk)}\n\n"))  # no finish_reason, no [DONE]
    with httpx.stream("POST", f"{proxy[0]}/v1/chat/completions",
                      json={"model": "m", "messages": ASK, "tools": [WEATHER], "stream": True}) as r:
        events = sse_events(r)
    [error] = [d["error"] for e, d in events if e == "jurist.error"]
    assert error["code"] == "GENERATION_FAILED" and error["continue_context"] == ASK
    assert error["continueContext"]["lastUserMessage"] == ASK[0]

    # Not streamed, the upstream is asked for a whole reply: one cut off is a 502 with the same context.
    whole = {"id": "c1", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant",
                                                                                        "tool_calls": [piece]}}]}
    provider.script(Reply(body=json.dumps(whole)[:-20]))
    r = httpx.post(f"{proxy[0]}/v1/chat/completions", json={"model": "m", "messages": ASK, "tools": [WEATHER]})
    assert r.status_code == 502
    error = r.json()["error"]
    assert error["continue_context"] == ASK and error["continueContext"]["lastUserMessage"] == ASK[0]
