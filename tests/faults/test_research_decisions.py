"""A live research run's decisions answer the question they name, once; a run waits a bounded
time for one, and can be cancelled (its place among the runs at once freed). On the real app."""

from __future__ import annotations

from typing import Any

import pytest

from jurist.server import research_live

from tests.server.test_research_live import (QUERY, SEVERE, GOOD_PLAN, GOOD_RETRIEVAL, make_client,  # noqa: F401
                                             parse_sse, pipeline, start, wait_for)


def waiting_on(client: Any, log_id: str, after: int = 0) -> int:
    """The seq of the decision the run waits for, once it is a question after ``after``."""
    for _ in range(500):
        pending = wait_for(client, log_id, "waiting")["pending_decision"]
        if pending["seq"] > after:
            return int(pending["seq"])
    raise AssertionError(f"no decision after {after}")


def test_a_second_answer_to_one_decision_is_refused_and_never_answers_the_next(make_client):
    """Two clicks on "Retry search": the second answered the next question, which nobody had seen."""
    pipe = pipeline(plan=(GOOD_PLAN,), retrieval=(SEVERE, SEVERE, GOOD_RETRIEVAL))
    client = make_client(pipe)
    log_id = start(client, decision_timeout=30)["log_id"]
    decide = f"/api/research/{log_id}/decision"
    first = waiting_on(client, log_id)
    r = client.post(decide, json={"decision": first, "choice": "retry"})
    assert r.status_code == 200 and r.json()["decision"] == first
    second = waiting_on(client, log_id, after=first)  # the search again, flagged again: a new question
    again = client.post(decide, json={"decision": first, "choice": "retry"})
    assert again.status_code == 409
    assert again.json()["detail"] == (f"decision {first} of research evaluation {log_id!r} was already answered: "
                                      "retry, by the user")
    assert wait_for(client, log_id, "waiting")["pending_decision"]["seq"] == second  # still asked
    assert client.post(decide, json={"decision": second, "choice": "proceed"}).status_code == 200
    messages = parse_sse(client.get(f"/api/research/{log_id}/events").text)
    assert messages[-1]["event"] == "done"
    decided = [(m["data"]["choice"], m["data"]["by"]) for m in messages if m["event"] == "decided"]
    assert decided == [("retry", "user"), ("proceed", "user")]
    record = client.get(f"/api/evaluation/sessions/{log_id}").json()["evaluation"]["payload"]
    assert [(d["choice"], d["by"]) for d in record["decisions"]] == decided
    late = client.post(decide, json={"decision": second, "choice": "retry"})
    assert late.status_code == 409 and "already answered: proceed, by the user; the run has finished" in late.text


def test_an_answer_to_a_question_not_asked_is_refused(make_client):
    client = make_client(pipeline(plan=(GOOD_PLAN,), retrieval=(SEVERE, GOOD_RETRIEVAL), delay=0.3))
    log_id = start(client, decision_timeout=30)["log_id"]
    decide = f"/api/research/{log_id}/decision"
    wait_for(client, log_id, "running")
    ahead = client.post(decide, json={"decision": 50, "choice": "retry"})  # the question it will ask later
    assert ahead.status_code == 409 and "has not been asked" in ahead.json()["detail"]
    started = client.post(decide, json={"decision": 1, "choice": "retry"})
    assert started.status_code == 409 and "event 1 of research evaluation" in started.json()["detail"]
    asked = waiting_on(client, log_id)
    for body in ({"choice": "retry"}, {"decision": None, "choice": "retry"}, {"decision": "last", "choice": "retry"},
                 {"decision": 0, "choice": "retry"}, {"decision": asked}):
        assert client.post(decide, json=body).status_code == 422, body
    assert wait_for(client, log_id, "waiting")["pending_decision"]["seq"] == asked  # none of those answered it
    assert client.post(decide, json={"decision": asked, "choice": "proceed"}).status_code == 200
    wait_for(client, log_id, "done")


@pytest.mark.parametrize("timeout", [600.5, 601, 3600])
def test_the_decision_timeout_is_bounded(make_client, timeout):
    client = make_client(pipeline())
    r = client.post("/api/research/evaluate", json={"query": QUERY, "decision_timeout": timeout})
    assert r.status_code == 422 and "600" in r.text


def test_a_cancelled_run_ends_and_frees_its_place(make_client, monkeypatch):
    """Runs waiting an hour for a decision held every place: POST /api/research/evaluate was 429 for an hour."""
    monkeypatch.setattr(research_live, "MAX_RUNNING", 1)
    client = make_client(pipeline(plan=(GOOD_PLAN,), retrieval=(SEVERE,)))
    log_id = start(client, decision_timeout=600)["log_id"]
    wait_for(client, log_id, "waiting")
    assert client.post("/api/research/evaluate", json={"query": QUERY}).status_code == 429
    cancel = f"/api/research/{log_id}/cancel"
    assert client.post(cancel, json={}, headers={"Origin": "http://evil.example"}).status_code == 403  # a write
    r = client.post(cancel, json={})
    assert r.status_code == 200 and r.json() == {"log_id": log_id, "status": "cancelled"}
    found = wait_for(client, log_id, "cancelled")
    assert found["pending_decision"] is None
    assert found["events"][-1]["type"] == "error" and "cancelled" in found["events"][-1]["error"]
    messages = parse_sse(client.get(f"/api/research/{log_id}/events").text)  # the stream ends
    assert messages[-1]["event"] == "error"
    start(client)  # the place is free
    again = client.post(cancel, json={})
    assert again.status_code == 409 and "has finished (cancelled)" in again.json()["detail"]
    assert client.post("/api/research/abc123/cancel", json={}).status_code == 404
    asked = next(m["data"]["seq"] for m in messages if m["event"] == "decision")
    late = client.post(f"/api/research/{log_id}/decision", json={"decision": asked, "choice": "retry"})
    assert late.status_code == 409 and "not answered before the run ended" in late.json()["detail"]


def test_cancel_needs_the_token(make_client):
    client = make_client(pipeline(plan=(GOOD_PLAN,), retrieval=(SEVERE,)), api_token="s3cret")
    auth = {"Authorization": "Bearer s3cret"}
    r = client.post("/api/research/evaluate", json={"query": QUERY, "decision_timeout": 600}, headers=auth)
    log_id = r.json()["log_id"]
    wait_for(client, log_id, "waiting")
    assert client.post(f"/api/research/{log_id}/cancel", json={}).status_code == 401
    assert client.post(f"/api/research/{log_id}/cancel", json={}, headers=auth).status_code == 200


def test_the_live_page_sends_the_decision_it_answers(make_client):
    """The page's buttons post the seq of the decision event they were made for."""
    client = make_client(pipeline())
    script = client.get("/static/research_live.js").text
    assert "JSON.stringify({ decision: decision, choice: choice })" in script
    assert "sendDecision(box, choice, d.seq)" in script


def test_a_query_being_answered_holds_a_place_that_evaluate_respects(make_client, monkeypatch):
    """POST /api/research/query counted the live runs, but /evaluate did not count the queries."""
    import threading
    import time

    monkeypatch.setattr(research_live, "MAX_RUNNING", 1)
    client = make_client(pipeline(plan=(GOOD_PLAN,), retrieval=(SEVERE,)))
    answered: list[int] = []
    query = threading.Thread(target=lambda: answered.append(client.post(
        "/api/research/query", json={"query": QUERY, "decision_timeout": 2}).status_code))
    query.start()
    deadline = time.monotonic() + 10
    while getattr(client.app.state, "research_queries", 0) == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    r = client.post("/api/research/evaluate", json={"query": QUERY})
    assert r.status_code == 429 and "research evaluations are running" in r.json()["detail"]
    query.join(20)
    assert answered == [200]
    assert client.post("/api/research/evaluate", json={"query": QUERY}).status_code == 202
