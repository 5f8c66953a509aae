"""The proxy's upstream is a Model: its calls are on record, bounded by the limiter, and what
is returned is what is stored."""

from __future__ import annotations

import concurrent.futures
import json
from typing import Any

import httpx
import pytest

from jurist.config import Settings
from jurist.models import script
from jurist.server import create_app
from jurist.testing import Reply
from tests.server.live import running
from tests.server.test_proxy import ASK, FAIL, GATE_CONFIG, PASS, broken_stream, sse_events


@pytest.fixture
def settings(isolated) -> Settings:
    return Settings(home=str(isolated / ".jurist"))


@pytest.fixture
def proxy(provider, settings):
    """(base url, app) of the proxy on the real Gate in front of the provider."""
    script("judge", default=PASS)
    app = create_app(settings, upstream=provider.base_url, gate_config=GATE_CONFIG)
    with running(app) as base:
        yield base, app


def post(base: str, trace_id: str, *, stream: bool = False, key: str = "sk-caller") -> dict[str, Any]:
    """Send one request; the ``jurist`` field (or the error body) and the status."""
    headers = {"x-jurist-trace-id": trace_id, "authorization": f"Bearer {key}"}
    body = {"model": "gpt-test", "messages": ASK, "stream": stream}
    if not stream:
        r = httpx.post(f"{base}/v1/chat/completions", json=body, headers=headers, timeout=30)
        data = r.json()
        return {"status": r.status_code, "jurist": data.get("jurist"), "body": data}
    with httpx.stream("POST", f"{base}/v1/chat/completions", json=body, headers=headers, timeout=30) as r:
        events = sse_events(r) if r.status_code == 200 else []
        status = r.status_code
    finals = [d for _, d in events if isinstance(d, dict) and "jurist" in d]
    return {"status": status, "jurist": finals[-1]["jurist"] if finals else None, "events": events}


def stored_calls(app, trace_id: str) -> list[dict[str, Any]]:
    store = app.state.proxy.runtime.store
    store.flush()
    return store.calls(trace_id=trace_id)


@pytest.mark.parametrize("stream", [False, True])
def test_upstream_calls_are_rows_of_llm_calls_with_purpose_generation(proxy, provider, stream):
    base, app = proxy
    provider.script(Reply(text="Paris is the capital of France.", input_tokens=11, output_tokens=4))
    out = post(base, f"ok-{stream}", stream=stream)
    assert out["status"] == 200
    [call] = [c for c in stored_calls(app, f"ok-{stream}") if c["purpose"] == "generation"]
    assert call["status"] == "ok" and call["model"] == "gpt-test" and call["endpoint"] == provider.base_url
    assert (call["input_tokens"], call["output_tokens"]) == (11, 4) and call["latency_ms"] > 0
    assert call["response_text"] == "Paris is the capital of France." and call["messages"] == ASK
    assert "sk-caller" not in json.dumps(call, default=str)  # the caller's key is never recorded
    listed = [c for c in out["jurist"]["llm_calls"] if c["type"] == "generation"]
    assert [c["call_id"] for c in listed] == [call["id"]]  # the returned list is a view of the records
    # Asked as the client asked: a stream asks for its usage, a whole reply has it.
    assert provider.requests[0]["json"].get("stream_options") == ({"include_usage": True} if stream else None)


@pytest.mark.parametrize("reply,status", [
    (Reply(status=429, headers={"Retry-After": "7"}), 429),
    (Reply(status=500), 500),
    (broken_stream(), 502),
])
@pytest.mark.parametrize("stream", [False, True])
def test_failed_upstream_calls_are_rows_too(proxy, provider, reply, status, stream):
    base, app = proxy
    provider.script(reply)
    trace = f"failed-{status}-{stream}"
    out = post(base, trace, stream=stream)
    if status == 502 and stream:
        assert out["status"] == 200 and out["events"][-2][0] == "jurist.error"
    else:
        assert out["status"] == status
    calls = stored_calls(app, trace)
    assert [(c["purpose"], c["status"]) for c in calls if c["purpose"] == "generation"] == [("generation", "error")]
    assert len(provider.requests) == 1  # no retries behind the caller's back
    [row] = [r for r in app.state.proxy.runtime.store.evaluations(kind="gate") if r["trace_id"] == trace]
    assert row["payload"]["error"] and row["status"] == "failed"  # the failed request is an evaluation too
    assert [c["call_id"] for c in row["payload"]["llm_calls"] if c["type"] == "generation"] == [
        c["id"] for c in calls if c["purpose"] == "generation"]


def test_the_limiter_bounds_the_upstream_calls(provider, isolated):
    """The upstream's own bound (upstream_max_concurrency), not the judges' max_concurrency."""
    settings = Settings(home=str(isolated / ".jurist"), max_concurrency=50, upstream_max_concurrency=2)
    script("judge", default=PASS)
    provider.default = Reply(text="Paris.", delay=0.3)
    app = create_app(settings, upstream=provider.base_url, gate_config=GATE_CONFIG)
    with running(app) as base, concurrent.futures.ThreadPoolExecutor(6) as pool:
        outs = list(pool.map(lambda i: post(base, f"bound-{i}", stream=bool(i % 2)), range(6)))
    assert [o["status"] for o in outs] == [200] * 6 and len(provider.requests) == 6
    assert provider.peak_in_flight <= 2


def test_a_failed_regeneration_through_the_proxy_is_one_record(proxy, provider):
    base, app = proxy
    script("judge", FAIL, default=PASS)
    provider.script(Reply(text="Paris."), Reply(status=500))
    out = post(base, "regen-failed")
    calls = out["jurist"]["llm_calls"]
    assert [(c["type"], c["status"]) for c in calls if c["type"] in ("generation", "regeneration")] == [
        ("generation", "ok"), ("regeneration", "error")]
    stored = [c for c in stored_calls(app, "regen-failed") if c["purpose"] == "regeneration"]
    assert [c["status"] for c in stored] == ["error"]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("regenerate", [False, True])
def test_the_stored_gate_payload_is_the_returned_jurist_field(proxy, provider, stream, regenerate):
    base, app = proxy
    if regenerate:
        script("judge", FAIL, default=PASS)
        provider.script(Reply(text="Paris."), Reply(text="Paris, on the Seine."))
    else:
        provider.script(Reply(text="Paris."))
    trace = f"payload-{stream}-{regenerate}"
    out = post(base, trace, stream=stream)
    store = app.state.proxy.runtime.store
    store.flush()
    [row] = [r for r in store.evaluations(kind="gate") if r["trace_id"] == trace]
    assert row["payload"] == out["jurist"]
    assert len(out["jurist"]["attempts"]) == (2 if regenerate else 1)


@pytest.mark.parametrize("stream", [False, True])
def test_every_generation_records_the_upstreams_usage_for_the_accepted_and_the_rejected(proxy, provider, stream):
    base, app = proxy
    script("judge", FAIL, default=PASS)
    provider.script(Reply(text="Paris.", input_tokens=7, output_tokens=2),
                    Reply(text="Paris, on the Seine.", input_tokens=30, output_tokens=6))
    out = post(base, f"usage-{stream}", stream=stream)
    generations = [c for c in out["jurist"]["llm_calls"] if c["type"] in ("generation", "regeneration")]
    assert [(c["type"], c["input_tokens"], c["output_tokens"], c["tokens"]) for c in generations] == [
        ("generation", 7, 2, 9), ("regeneration", 30, 6, 36)]
    stored = {c["purpose"]: c for c in stored_calls(app, f"usage-{stream}")}
    assert (stored["regeneration"]["input_tokens"], stored["regeneration"]["output_tokens"]) == (30, 6)
    assert all(r["json"].get("stream_options") == ({"include_usage": True} if stream else None)
               for r in provider.requests)


@pytest.mark.parametrize("stream", [False, True])
def test_a_stream_without_usage_is_recorded_as_not_reported_not_as_zero(proxy, provider, stream):
    base, app = proxy
    provider.script(Reply(text="Paris.", usage=False))  # llama-cpp-python's server never sends a stream's usage
    out = post(base, f"nousage-{stream}", stream=stream)
    [entry] = [c for c in out["jurist"]["llm_calls"] if c["type"] == "generation"]
    [call] = [c for c in stored_calls(app, f"nousage-{stream}") if c["purpose"] == "generation"]
    assert "usage" not in call["params"] and call["response_text"] == "Paris."
    if not stream:  # asked as the client asked: a whole reply has its usage
        assert (entry["input_tokens"], entry["output_tokens"], entry["tokens"], entry["status"]) == (10, 5, 15, "ok")
        assert call["usage_known"] is True
        return
    assert (entry["input_tokens"], entry["output_tokens"], entry["tokens"], entry["status"]) == (None, None, None, "ok")
    assert call["usage_known"] is False
    if not stream:
        assert "usage" not in out["body"] or out["body"]["usage"] is None  # no made-up usage for the caller
