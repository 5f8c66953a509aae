"""Feedback off (the default of `jurist serve --upstream`): the answer is sent at once, the judge's
evaluation is recorded after it (note 001's flow), and no evaluation is lost when the server stops."""

from __future__ import annotations

import time

import httpx
import pytest

from jurist.config import Settings
from jurist.models import script
from jurist.server import create_app
from jurist.store import Store
from jurist.testing import Reply
from tests.server.live import running
from tests.server.test_proxy import ASK, PASS, sse_events

SCORE_ONLY = {"judge": "scripted/judge"}  # GateConfig's defaults: quality, feedback off


@pytest.fixture
def settings(isolated) -> Settings:
    return Settings(home=str(isolated / ".jurist"))


def gate_rows(settings: Settings) -> list[dict]:
    """The stored gate records, read from the database file by a store of its own."""
    store = Store(settings.database)
    try:
        return store.evaluations(kind="gate")
    finally:
        store.close()


def wait_for_row(app, trace_id: str, timeout: float = 10.0) -> dict:
    store = app.state.proxy.runtime.store
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        store.flush()
        rows = [r for r in store.evaluations(kind="gate") if r["trace_id"] == trace_id]
        if rows:
            return rows[0]
        time.sleep(0.05)
    raise AssertionError(f"no gate record for {trace_id}")


@pytest.mark.parametrize("stream", [False, True])
def test_the_answer_does_not_wait_for_a_slow_judge_and_its_evaluation_is_stored_after(provider, settings, stream):
    script("judge", PASS).delay = 2.0
    provider.script(Reply(text="Paris is the capital of France."))
    app = create_app(settings, upstream=provider.base_url, gate_config=SCORE_ONLY)
    trace = f"done-first-{stream}"
    body = {"model": "gpt-test", "messages": ASK, "stream": stream}
    with running(app) as url:
        started = time.monotonic()
        if stream:
            with httpx.stream("POST", f"{url}/v1/chat/completions", json=body,
                              headers={"x-jurist-trace-id": trace}, timeout=30) as r:
                events = sse_events(r)
            jurist = next(d for e, d in events if e == "jurist.done")["jurist_event"]["data"]
            assert [e for e, _ in events if e] == ["jurist.done"] and events[-1] == (None, "[DONE]")
        else:
            r = httpx.post(f"{url}/v1/chat/completions", json=body, headers={"x-jurist-trace-id": trace}, timeout=30)
            assert r.status_code == 200
            assert r.json()["choices"][0]["message"]["content"] == "Paris is the capital of France."
            jurist = r.json()["jurist"]
        answered = time.monotonic() - started
        assert answered < 1.5, answered  # the judge takes 2 s
        assert jurist["evaluation_pending"] is True and jurist["evaluations"] == []
        assert [c["type"] for c in jurist["llm_calls"]] == ["generation"]
        row = wait_for_row(app, trace)
        assert time.monotonic() - started >= 2.0
    assert row["score"] == 0.9 and row["status"] == "scored"
    payload = row["payload"]
    assert "evaluation_pending" not in payload and payload["accept_reason"] == "feedback_disabled"
    assert [c["type"] for c in payload["llm_calls"]] == ["generation", "quality_evaluation"]
    assert payload["answer"] == "Paris is the capital of France."


def test_stopping_the_server_finishes_the_evaluations_still_running(provider, settings):
    script("judge", default=PASS).delay = 1.0
    provider.script(Reply(text="Paris."), Reply(text="Lyon is not."))
    app = create_app(settings, upstream=provider.base_url, gate_config=SCORE_ONLY)
    with running(app) as url:
        for trace in ("stop-1", "stop-2"):
            r = httpx.post(f"{url}/v1/chat/completions", json={"model": "gpt-test", "messages": ASK},
                           headers={"x-jurist-trace-id": trace}, timeout=30)
            assert r.json()["jurist"]["evaluation_pending"] is True
    rows = {r["trace_id"]: r for r in gate_rows(settings)}  # the server has stopped
    assert set(rows) == {"stop-1", "stop-2"}
    assert all(r["score"] == 0.9 and r["status"] == "scored" for r in rows.values())


def test_evaluations_that_outlive_the_shutdown_are_recorded_as_skipped(provider, settings):
    script("judge", PASS).delay = 30.0
    provider.script(Reply(text="Paris."))
    app = create_app(settings, upstream=provider.base_url, gate_config={**SCORE_ONLY, "close_timeout_s": 0.3})
    with running(app) as url:
        r = httpx.post(f"{url}/v1/chat/completions", json={"model": "gpt-test", "messages": ASK},
                       headers={"x-jurist-trace-id": "cut"}, timeout=30)
        assert r.status_code == 200
        stopping = time.monotonic()
    assert time.monotonic() - stopping < 5.0
    [row] = gate_rows(settings)
    assert row["trace_id"] == "cut" and row["status"] == "skipped" and row["failure"] == "evaluation_skipped"
    assert row["payload"]["skip_reason"] == "the gate closed before the evaluator answered"
    assert row["payload"]["answer"] == "Paris."
