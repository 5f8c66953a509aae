"""The chat page's server side: GET /chat (with --upstream only, under the CSP, nothing from
elsewhere) and GET /api/gate/{trace_id} (the stored record of one gated request)."""

from __future__ import annotations

import re
import time

import httpx
import pytest

from jurist.config import Settings
from jurist.models import script
from jurist.server import create_app
from jurist.server.tutor import CSP
from jurist.testing import Reply
from tests.server.live import running
from tests.server.test_proxy import ASK, PASS


@pytest.fixture
def settings(isolated) -> Settings:
    return Settings(home=str(isolated / ".jurist"))


@pytest.fixture
def served(provider, settings):
    """The server with the gate proxy, feedback off (the gate's default), the judge scripted."""
    app = create_app(settings, upstream=provider.base_url, gate_config={"judge": "scripted/judge"})
    with running(app) as base:
        yield base


def test_the_page_is_served_from_this_server_only_under_the_csp(served):
    r = httpx.get(f"{served}/chat")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert r.headers["content-security-policy"] == CSP
    assert r.headers["x-content-type-options"] == "nosniff"
    sources = re.findall(r'(?:src|href)="([^"]+)"', r.text)
    assert sources == ["/static/chat.css", "/static/chat.js"]  # no CDN, no inline code
    assert "<script>" not in r.text and "style=" not in r.text
    for path in sources:
        assert httpx.get(f"{served}{path}").status_code == 200
    js = httpx.get(f"{served}/static/chat.js").text
    assert "innerHTML" not in js and "insertAdjacentHTML" not in js and "eval(" not in js


def test_the_model_parameter_is_escaped(served):
    r = httpx.get(f"{served}/chat", params={"model": '"><script>alert(1)</script>'})
    assert r.status_code == 200
    assert "<script>alert(1)" not in r.text and 'data-model="&#34;&gt;&lt;script&gt;' in r.text
    assert httpx.get(f"{served}/chat", params={"model": "a\x01b"}).status_code == 422


def test_without_an_upstream_there_is_no_chat_page(settings):
    with running(create_app(settings)) as base:
        assert httpx.get(f"{base}/chat").status_code == 404
        assert httpx.get(f"{base}/api/gate/abc").status_code == 404  # the record route is there, the record is not


def test_the_record_of_a_request_by_its_trace_id(served, provider):
    script("judge", PASS).delay = 1.0
    provider.script(Reply(text="Paris."))
    assert httpx.get(f"{served}/api/gate/t-1").status_code == 404
    r = httpx.post(f"{served}/v1/chat/completions", json={"model": "gpt-test", "messages": ASK},
                   headers={"x-jurist-trace-id": "t-1"}, timeout=30)
    assert r.json()["jurist"]["evaluation_pending"] is True
    started = time.monotonic()
    stored = httpx.get(f"{served}/api/gate/t-1", params={"wait": 10}, timeout=30)
    waited = time.monotonic() - started
    assert stored.status_code == 200 and 0.3 < waited < 5.0  # held until the judge answered (1 s), no longer
    body = stored.json()
    assert body["status"] == "scored" and body["evaluation_id"]
    record = body["record"]
    assert record["trace_id"] == "t-1" and record["answer"] == "Paris." and "evaluation_pending" not in record
    assert record["evaluations_list"][0]["quality_score"] == 0.9
    assert [c["type"] for c in record["llm_calls"]] == ["generation", "quality_evaluation"]
    page = httpx.get(f"{served}/evaluation/evaluations/{body['evaluation_id']}")
    assert page.status_code == 200  # the page's link to the dashboard


def test_an_unknown_trace_is_a_404_at_once_whatever_the_wait(served):
    started = time.monotonic()
    r = httpx.get(f"{served}/api/gate/never", params={"wait": 20})
    assert r.status_code == 404 and time.monotonic() - started < 2.0  # nothing is running for it
    assert "no gate record" in r.json()["detail"]


def test_a_blocking_gates_record_is_there_as_soon_as_the_answer_is(provider, settings):
    script("judge", PASS)
    provider.script(Reply(text="Paris."))
    config = {"judge": "scripted/judge", "evaluate_feedback_enabled": True}
    with running(create_app(settings, upstream=provider.base_url, gate_config=config)) as base:
        r = httpx.post(f"{base}/v1/chat/completions", json={"model": "gpt-test", "messages": ASK},
                       headers={"x-jurist-trace-id": "b-1"}, timeout=30)
        assert "evaluation_pending" not in r.json()["jurist"]  # the record is final
        stored = httpx.get(f"{base}/api/gate/b-1", params={"wait": 1})  # written at once, not after the linger
    assert stored.status_code == 200 and stored.json()["record"] == r.json()["jurist"]


@pytest.mark.parametrize("path", ["/api/gate/a%20b", "/api/gate/" + "x" * 65, "/api/gate/ok?wait=26",
                                  "/api/gate/ok?wait=-1"])
def test_bad_trace_ids_and_waits_are_422(served, path):
    assert httpx.get(f"{served}{path}").status_code == 422
