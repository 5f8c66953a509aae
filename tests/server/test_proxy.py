"""The gate proxy, end to end: a stock openai client -> uvicorn(proxy) -> ProviderServer upstream."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest
from typer.testing import CliRunner

from jurist.config import Settings
from jurist.models import script
from jurist.server import create_app
from jurist.testing import Reply
from tests.server.fake_gate import FakeGate
from tests.server.live import running

PASS = '{"quality_score": 0.9, "confidence_score": 0.9, "issues": [], "improvement_hint": null}'
FAIL = '{"quality_score": 0.1, "confidence_score": 0.9, "issues": ["too short"], "improvement_hint": "name the river too"}'
ASK = [{"role": "user", "content": "What is the capital of France?"}]


def use_fake_gate(app) -> list[FakeGate]:
    gates: list[FakeGate] = []

    def factory(config, runtime):
        gates.append(FakeGate(config, settings=runtime.settings, store=runtime.store))
        return gates[-1]

    app.state.proxy.gate_factory = factory
    return gates


GATE_CONFIG = {"evaluate_feedback_enabled": True, "judge": "scripted/judge"}


@pytest.fixture
def settings(isolated) -> Settings:
    return Settings(home=str(isolated / ".jurist"))


@pytest.fixture
def url(provider, settings):
    """The proxy on the real jurist.gate.Gate, judged by scripted/judge, in front of the provider."""
    script("judge", default=PASS)
    app = create_app(settings, upstream=provider.base_url, gate_config=GATE_CONFIG)
    with running(app) as base:
        yield base


@pytest.fixture
def client(url):
    with openai.OpenAI(base_url=f"{url}/v1", api_key="sk-test", max_retries=0) as c:
        yield c


def sse_events(response: httpx.Response) -> list[tuple[str | None, Any]]:
    """(event name, parsed data) for every SSE event of a raw response."""
    out, event = [], None
    for line in response.iter_lines():
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: "):
            data = line[6:]
            out.append((event, data if data == "[DONE]" else json.loads(data)))
            event = None
    return out


# -- passing answers ----------------------------------------------------------------


def test_non_streaming_answer_is_a_chat_completion_with_the_jurist_field(client, provider):
    provider.script(Reply(text="Paris is the capital of France."))
    r = client.chat.completions.create(model="gpt-test", messages=ASK)
    assert r.object == "chat.completion"
    assert r.choices[0].message.content == "Paris is the capital of France."
    assert r.choices[0].finish_reason == "stop"
    jurist = r.model_extra["jurist"]
    assert set(jurist) >= {"trace_id", "evaluations", "llm_calls", "attempts", "accept_reason", "evaluation_skipped"}
    assert jurist["accept_reason"] == "passed" and len(jurist["attempts"]) == 1
    assert [c["type"] for c in jurist["llm_calls"]] == ["generation", "quality_evaluation"]
    sent = provider.requests[0]
    assert sent["headers"]["authorization"] == "Bearer sk-test"  # the caller's key goes upstream
    # Asked as the client asked (not streamed), the messages as they came.
    assert "stream" not in sent["json"] and sent["json"]["model"] == "gpt-test" and sent["json"]["messages"] == ASK
    assert r.usage.total_tokens == 15  # the upstream's usage for the accepted attempt
    assert jurist["llm_calls"][0]["model"] == "gpt-test" and jurist["llm_calls"][0]["tokens"] == 15


def test_other_request_fields_are_forwarded_and_the_proxys_own_are_not(client, provider):
    provider.script(Reply(text="Paris."))
    client.chat.completions.create(model="gpt-test", messages=ASK, temperature=0.3, max_tokens=50,
                                   extra_body={"is_continuation": False})
    sent = provider.requests[0]["json"]
    assert sent["temperature"] == 0.3 and sent["max_tokens"] == 50 and "is_continuation" not in sent


def test_streaming_answer_assembles_from_chunks_and_ends_with_the_jurist_field(client, provider):
    provider.script(Reply(text="Paris is the capital of France."))
    chunks = list(client.chat.completions.create(model="gpt-test", messages=ASK, stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Paris is the capital of France."
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert chunks[-1].model_extra["jurist"]["accept_reason"] == "passed"


def test_async_stock_client_streams_too(url, provider):
    import asyncio

    provider.script(Reply(text="Paris, on the Seine."))

    async def go() -> str:
        async with openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0) as c:
            stream = await c.chat.completions.create(model="gpt-test", messages=ASK, stream=True)
            return "".join([ch.choices[0].delta.content or "" async for ch in stream if ch.choices])

    assert asyncio.run(go()) == "Paris, on the Seine."


def test_raw_stream_has_named_jurist_events_before_done(url, provider):
    provider.script(Reply(text="Paris."))
    with httpx.stream("POST", f"{url}/v1/chat/completions",
                      json={"model": "gpt-test", "messages": ASK, "stream": True}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        events = sse_events(r)
    names = [e for e, _ in events if e]
    assert names == ["jurist.evaluation", "jurist.done"]
    evaluation = next(d for e, d in events if e == "jurist.evaluation")
    assert evaluation["jurist_event"]["data"]["passed"] is True
    assert evaluation["jurist_event"]["data"]["accepted"] is True
    texts = [d["choices"][0]["delta"].get("content") for e, d in events if e is None and d != "[DONE]"]
    assert "".join(t or "" for t in texts) == "Paris."
    assert evaluation["choices"][0]["delta"] == {}  # chunk-shaped: stock clients print nothing
    assert events[-1] == (None, "[DONE]")


# -- regeneration -----------------------------------------------------------------------


def test_failed_first_answer_is_regenerated_and_both_attempts_are_listed(client, provider):
    script("judge", FAIL, PASS)
    provider.script(Reply(text="Paris."), Reply(text="Paris, on the Seine, is the capital of France."))
    r = client.chat.completions.create(model="gpt-test", messages=ASK)
    assert r.choices[0].message.content == "Paris, on the Seine, is the capital of France."
    jurist = r.model_extra["jurist"]
    assert [a["text"] for a in jurist["attempts"]] == ["Paris.", "Paris, on the Seine, is the capital of France."]
    assert [a["kind"] for a in jurist["attempts"]] == ["generation", "regeneration"]
    assert [e["passed"] for e in jurist["evaluations"]] == [False, True]
    assert len(jurist["llm_calls"]) == 4 and len(provider.requests) == 2
    regen = provider.requests[1]["json"]["messages"]
    assert regen[0] == ASK[0] and "name the river" in json.dumps(regen[1:])  # the judge's feedback went upstream


def test_streamed_regeneration_sends_only_the_accepted_answer(client, provider):
    script("judge", FAIL, PASS)
    provider.script(Reply(text="Paris."), Reply(text="Paris, on the Seine."))
    chunks = list(client.chat.completions.create(model="gpt-test", messages=ASK, stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Paris, on the Seine."
    assert len(chunks[-1].model_extra["jurist"]["attempts"]) == 2


def test_revision_strategy_tells_a_stock_client_why_a_second_answer_follows(provider, settings):
    from jurist.gate import REVISION_MESSAGE

    script("judge", FAIL, PASS)
    provider.script(Reply(text="Paris."), Reply(text="Paris, on the Seine."))
    app = create_app(settings, upstream=provider.base_url, gate_config={**GATE_CONFIG, "strategy": "revision"})
    with running(app) as url, openai.OpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0) as c:
        chunks = list(c.chat.completions.create(model="gpt-test", messages=ASK, stream=True))
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == f"Paris.\n\n{REVISION_MESSAGE}\n\nParis, on the Seine."
    assert chunks[-1].model_extra["jurist"]["accepted_attempt"] == 2


# -- upstream errors keep their status -----------------------------------------------------

ERRORS = [(401, openai.AuthenticationError), (429, openai.RateLimitError), (400, openai.BadRequestError)]


@pytest.mark.parametrize("status,error", ERRORS)
@pytest.mark.parametrize("stream", [False, True])
def test_upstream_errors_keep_their_status_and_body(client, provider, status, error, stream):
    provider.script(Reply(status=status, headers={"Retry-After": "7"} if status == 429 else {}))
    with pytest.raises(error) as info:
        client.chat.completions.create(model="gpt-test", messages=ASK, stream=stream)
    assert info.value.status_code == status
    assert "scripted by the test" in info.value.message  # the upstream's own error body
    if status == 429:
        assert info.value.response.headers["retry-after"] == "7"


def test_upstream_5xx_before_the_answer_keeps_its_status(client, provider):
    provider.script(Reply(status=503))
    with pytest.raises(openai.InternalServerError) as info:
        client.chat.completions.create(model="gpt-test", messages=ASK)
    assert info.value.status_code == 503


def test_unreachable_upstream_is_a_502_in_openai_shape(settings):
    app = create_app(settings, upstream="http://127.0.0.1:9/v1", gate_config=GATE_CONFIG)
    with running(app) as url:
        r = httpx.post(f"{url}/v1/chat/completions", json={"model": "m", "messages": ASK})
    assert r.status_code == 502 and r.json()["error"]["code"] == "upstream_unavailable"


# -- failure mid-stream and continuation ------------------------------------------------------


def broken_stream(text: str = "Paris is") -> Reply:
    """Two content chunks, then an error mid-stream (as OpenAI sends it), no [DONE]."""
    base = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "gpt-test"}
    chunks = [{**base, "choices": [{"index": 0, "delta": {"content": w}, "finish_reason": None}]}
              for w in text.split(" ")]
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks)
    body += f"data: {json.dumps({'error': {'message': 'upstream exploded', 'type': 'server_error', 'code': 500}})}\n\n"
    return Reply(body=body)


TOOL_TURN = [
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Paris"}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "18C, sunny"},
]


def test_upstream_failure_mid_stream_ends_with_jurist_error_and_continuation_succeeds(url, provider, settings):
    provider.script(broken_stream())
    with httpx.stream("POST", f"{url}/v1/chat/completions",
                      json={"model": "gpt-test", "messages": TOOL_TURN, "stream": True}) as r:
        assert r.status_code == 200
        events = sse_events(r)
    name, error = events[-2]
    assert name == "jurist.error" and events[-1] == (None, "[DONE]")
    context = error["jurist_event"]["data"]["continue_context"]
    assert context == TOOL_TURN  # the tool result is kept
    assert error["error"]["continue_context"] == TOOL_TURN

    provider.script(Reply(text="It is 18C and sunny in Paris."))
    with openai.OpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0) as c:
        chunks = list(c.chat.completions.create(model="gpt-test", messages=context, stream=True,
                                                extra_body={"is_continuation": True}))
    assert "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices) == "It is 18C and sunny in Paris."
    assert provider.requests[-1]["json"]["messages"] == TOOL_TURN  # nothing filtered: the tool turn is kept
    assert "is_continuation" not in provider.requests[-1]["json"]


def test_stock_client_raises_on_a_mid_stream_failure(client, provider):
    provider.script(broken_stream())
    with pytest.raises(openai.APIError) as info:
        list(client.chat.completions.create(model="gpt-test", messages=ASK, stream=True))
    assert info.value.body["continue_context"] == ASK


def test_truncated_upstream_stream_counts_as_a_failure(url, provider):
    base = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    chunk = {**base, "choices": [{"index": 0, "delta": {"content": "Par"}, "finish_reason": None}]}
    provider.script(Reply(body=f"data: {json.dumps(chunk)}\n\n"))  # no finish_reason, no [DONE]
    r = httpx.post(f"{url}/v1/chat/completions", json={"model": "m", "messages": ASK})
    assert r.status_code == 502
    assert r.json()["error"]["continue_context"] == ASK


# -- request validation ------------------------------------------------------------------------


@pytest.mark.parametrize("body,status", [
    ("{not json", 400),
    ("[1, 2]", 400),
    (json.dumps({"model": "m"}), 422),
    (json.dumps({"model": "m", "messages": []}), 422),
    (json.dumps({"model": "m", "messages": [{"role": "wizard", "content": "x"}]}), 422),
    (json.dumps({"model": "m", "messages": ASK, "n": 3}), 422),
])
def test_bad_request_bodies_are_openai_shaped_errors(url, provider, body, status):
    r = httpx.post(f"{url}/v1/chat/completions", content=body, headers={"content-type": "application/json"})
    assert r.status_code == status
    error = r.json()["error"]
    assert error["message"] and error["type"] == "invalid_request_error"
    assert provider.requests == []  # nothing went upstream


def test_stock_client_sees_a_validation_error(client):
    with pytest.raises(openai.UnprocessableEntityError):
        client.chat.completions.create(model="gpt-test", messages=[])


def test_models_falls_back_to_an_empty_list_when_the_upstream_has_none(client):
    assert list(client.models.list()) == []


def test_models_lists_the_upstreams_models(provider, settings):
    provider.models = ["gpt-test", "gpt-other"]
    with running(create_app(settings, upstream=provider.base_url, gate_config=GATE_CONFIG)) as base:
        with openai.OpenAI(base_url=f"{base}/v1", api_key="sk-test", max_retries=0) as c:
            assert [m.id for m in c.models.list()] == ["gpt-test", "gpt-other"]


class _Failing:
    """An upstream whose GET /v1/models answers ``status`` after ``delay`` seconds."""

    def __init__(self, status: int, delay: float = 0.0) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                import time

                time.sleep(delay)
                body = b'{"error": {"message": "model service restarting"}}'
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:  # the proxy gave up first
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("case", ["down", "503", "500", "timeout"])
def test_models_says_when_the_upstream_is_down(case, settings, isolated):
    from tests.server.live import free_port

    failing = None
    if case == "down":
        upstream = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    else:
        failing = _Failing(int(case) if case.isdigit() else 200, delay=2.0 if case == "timeout" else 0.0)
        upstream = failing.url
    if case == "timeout":
        settings = settings.model_copy(update={"timeout": 0.3})
    try:
        with running(create_app(settings, upstream=upstream, gate_config=GATE_CONFIG)) as base:
            r = httpx.get(f"{base}/v1/models", timeout=30)
            with openai.OpenAI(base_url=f"{base}/v1", api_key="sk-test", max_retries=0) as c:
                with pytest.raises(openai.APIStatusError) as raised:
                    list(c.models.list())
    finally:
        if failing is not None:
            failing.stop()
    error = r.json()["error"]
    assert error["upstream"] == upstream and upstream in error["message"]
    if case == "down":
        assert r.status_code == 502 and error["upstream_status"] is None and error["code"] == "upstream_unavailable"
        assert "is down (no answer)" in error["message"]
    elif case == "timeout":
        assert r.status_code == 504 and error["upstream_status"] is None and error["code"] == "upstream_timeout"
    else:
        assert r.status_code == 502 and error["upstream_status"] == int(case)
        assert f"answered GET /models with HTTP {case}" in error["message"]
        assert "model service restarting" in error["message"]
    assert raised.value.status_code == r.status_code


def test_without_upstream_there_is_no_proxy():
    from fastapi.testclient import TestClient

    with TestClient(create_app(Settings()), base_url="http://localhost") as c:
        assert c.post("/v1/chat/completions", json={"model": "m", "messages": ASK}).status_code == 404


# -- command line ----------------------------------------------------------------------------


def test_proxy_cli_help_lists_its_options():
    import typer

    from jurist.cli import proxy

    app = typer.Typer()
    proxy.register(app)
    app.command("version")(lambda: None)
    out = CliRunner().invoke(app, ["proxy", "--help"], env={"COLUMNS": "200"}).output
    for option in ("--upstream", "--host", "--port", "--strategy", "--evaluator", "--judge", "--feedback", "8001"):
        assert option in out


def test_proxy_cli_options_become_gate_config():
    from jurist.cli.proxy import gate_config_from
    from jurist.errors import UsageError

    assert gate_config_from("revision", "comprehensiveness", "scripted/judge", True).model_dump(exclude_unset=True) \
        == {"strategy": "revision", "evaluator": "comprehensiveness", "judge": "scripted/judge",
            "evaluate_feedback_enabled": True}
    assert gate_config_from(None, None, None, None).model_fields_set == set()
    with pytest.raises(UsageError):
        gate_config_from("eager", None, None, None)


def test_serve_has_an_upstream_option():
    import typer

    from jurist.cli import serve

    app = typer.Typer()
    serve.register(app)
    app.command("version")(lambda: None)
    assert "--upstream" in CliRunner().invoke(app, ["serve", "--help"], env={"COLUMNS": "200"}).output


def test_a_gate_can_be_injected(provider, settings):
    """``app.state.proxy.gate_factory`` builds the gate: the injection point for embedders and tests."""
    script("judge", default=PASS)
    app = create_app(settings, upstream=provider.base_url, gate_config={"strategy": "blocking"})
    gates = use_fake_gate(app)
    provider.script(Reply(text="Paris."))
    with running(app) as url, openai.OpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0) as c:
        r = c.chat.completions.create(model="gpt-test", messages=ASK, extra_body={"is_continuation": True})
    assert r.choices[0].message.content == "Paris."
    assert gates[0].config == {"strategy": "blocking"} and gates[0].calls[0]["is_continuation"] is True
    assert gates[0].closed  # closed with the app


def test_a_misconfigured_gate_is_an_openai_shaped_error(provider, settings):
    app = create_app(settings, upstream=provider.base_url, gate_config={"judge": "no-such-alias"})
    with running(app) as url:
        r = httpx.post(f"{url}/v1/chat/completions", json={"model": "m", "messages": ASK})
    assert r.status_code == 500 and r.json()["error"]["code"] == "gate_not_configured"
    assert "no-such-alias" in r.json()["error"]["message"] and provider.requests == []


def test_the_upstream_gets_the_openai_organization_and_project_the_settings_read(provider, isolated, monkeypatch):
    monkeypatch.setenv("OPENAI_ORG_ID", "org-a")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-a")
    settings = Settings(home=str(isolated / ".jurist"))  # the variables are read now, when the settings are built
    monkeypatch.setenv("OPENAI_ORG_ID", "org-b")
    script("judge", default=PASS)
    provider.script(Reply(text="Paris."))
    with running(create_app(settings, upstream=provider.base_url, gate_config=GATE_CONFIG)) as base:
        with openai.OpenAI(base_url=f"{base}/v1", api_key="sk-test", max_retries=0) as c:
            c.chat.completions.create(model="gpt-test", messages=ASK)
    headers = provider.requests[0]["headers"]
    assert headers["openai-organization"] == "org-a" and headers["openai-project"] == "proj-a"
