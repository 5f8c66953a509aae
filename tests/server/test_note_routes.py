"""The research note's two routes: POST /api/research/query (the research response with its
``evaluation``) and GET /api/logs/sessions/{logId} (the session's log with its evaluation data)."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from jurist.config import Settings
from jurist.research import ResearchPipeline
from jurist.server import create_app

from tests.research.fakes import SOURCES, Planner, Synthesiser
from tests.server.test_research_live import QUERY, Search, make_client, pipeline  # noqa: F401 (a fixture)




def test_a_research_query_answers_with_its_evaluation_scores(make_client):
    client = make_client(pipeline())
    r = client.post("/api/research/query", json={"query": QUERY})
    assert r.status_code == 200, r.text
    body = r.json()
    log_id = body["logId"]
    assert set(body) == {"logId", "answer", "sources", "metadata", "evaluation"}
    assert body["answer"] == "answer 1"
    assert body["sources"] == SOURCES
    ev = body["evaluation"]
    assert set(ev) == {"planScore", "retrievalScore", "answerScore", "overallScore", "iterations",
                       "evaluationSkipped", "skipReason", "details"}
    assert ev["iterations"] == 2  # the bad plan, then the good one
    assert ev["planScore"] == pytest.approx(0.8675) and ev["retrievalScore"] == pytest.approx(0.7575)
    assert ev["answerScore"] == pytest.approx(0.8525)
    assert ev["overallScore"] == pytest.approx(round((0.8675 + 0.7575 + 0.8525) / 3, 4))
    assert ev["evaluationSkipped"] is False and ev["skipReason"] is None
    assert ev["details"] == f"/api/evaluation/sessions/{log_id}"  # the trace, not a command line
    meta = body["metadata"]
    assert meta["query"] == QUERY and meta["plan"] == {"objective": "plan 2", "search_queries": ["query 2"]}
    assert meta["live"] == f"/evaluation/research/{log_id}/live" and meta["durationMs"] >= 0

    trace = client.get(ev["details"])  # details is where the full trace is
    assert trace.status_code == 200 and trace.json()["evaluation"]["id"] == log_id

    logged = client.get(f"/api/logs/sessions/{log_id}")
    assert logged.status_code == 200
    assert logged.json() == trace.json()  # the same session log and evaluation data
    payload = logged.json()["evaluation"]["payload"]
    assert payload["logId"] == log_id and payload["overallScore"] == ev["overallScore"]
    assert {s["key"] for s in logged.json()["scores"]} >= {"overall", "plan.overall", "answer.faithfulness"}


def test_the_run_is_on_the_live_routes_too(make_client):
    client = make_client(pipeline())
    log_id = client.post("/api/research/query", json={"query": QUERY}).json()["logId"]
    run = client.get(f"/api/research/{log_id}").json()
    assert run["status"] == "done" and run["query"] == QUERY
    assert run["events"][-1]["type"] == "done"


def test_a_pipeline_that_breaks_is_a_502_naming_the_run(make_client):
    pipe = pipeline()
    pipe.planner = Planner(fail_on=1)
    client = make_client(pipe)
    r = client.post("/api/research/query", json={"query": QUERY})
    assert r.status_code == 502
    assert r.json()["detail"].startswith("the research pipeline stopped (RuntimeError); its events: /api/research/")
    log_id = r.json()["detail"].rsplit("/", 1)[1]
    assert client.get(f"/api/research/{log_id}").json()["status"] == "error"


def test_without_a_pipeline_the_query_is_a_404_that_says_how(make_client):
    client = make_client(None)
    r = client.post("/api/research/query", json={"query": QUERY})
    assert r.status_code == 404 and "create_app(research_pipeline=" in r.json()["detail"]


def test_the_query_body_is_strict(make_client):
    client = make_client(ResearchPipeline(Planner(), Search(), Synthesiser()))
    r = client.post("/api/research/query", json={"querry": QUERY})
    assert r.status_code == 422
    assert r.json()["detail"] == "invalid request: unknown field 'querry' (did you mean 'query'?)"
    r = client.post("/api/research/query", json={"query": QUERY, "decision_timeout": True})
    assert r.status_code == 422


def test_an_unknown_session_log_is_a_404(make_client):
    client = make_client(None)
    r = client.get("/api/logs/sessions/nope")
    assert r.status_code == 404 and r.json()["detail"] == "no evaluation with id 'nope'"


def test_the_routes_are_in_the_api_schema(make_client):
    paths = make_client(None).get("/openapi.json").json()["paths"]
    assert "post" in paths["/api/research/query"] and "get" in paths["/api/logs/sessions/{log_id}"]


def test_the_chat_pages_continue_button_reads_continue_processing(tmp_path):
    """The continuation note's label for the button that resends a failed request's full context."""
    settings = Settings.load(database_url=f"sqlite:///{tmp_path}/chat.db", home=str(tmp_path / ".jurist"))
    with TestClient(create_app(settings, upstream="http://127.0.0.1:9/v1"), base_url="http://localhost") as client:
        page = client.get("/chat")
        assert page.status_code == 200
        assert re.search(r'<button id="continue"[^>]*>Continue Processing</button>', page.text)
        assert "Continue Processing resends it" in client.get("/static/chat.js").text
