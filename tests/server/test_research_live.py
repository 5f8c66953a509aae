"""The live research routes: starting a run, its server-sent events, the proceed / retry decision."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from jurist.config import Settings
from jurist.research import ResearchEvaluation, ResearchPipeline, research_config
from jurist.research import stages as st
from jurist.server import create_app
from jurist.server import research_live
from jurist.server.research_live import LiveResearch, live_research
from jurist.store import Store

from tests.research.fakes import BAD_PLAN, GOOD_ANSWER, GOOD_PLAN, GOOD_RETRIEVAL, SOURCES, FakeEvaluator, Planner, Synthesiser
from tests.research.test_plan import critic, critic_reply
from tests.server.live import running

QUERY = "What are the 2024 breakthroughs in quantum computing?"
SEVERE = dict(GOOD_RETRIEVAL, context_recall=0.42)


class Search:
    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, query: str, plan: Any) -> list[Any]:
        self.calls += 1
        return SOURCES


def pipeline(plan: tuple[Any, ...] = (BAD_PLAN, GOOD_PLAN), retrieval: tuple[Any, ...] = (GOOD_RETRIEVAL,),
             delay: float = 0.0) -> ResearchPipeline:
    """A pipeline whose runs are judged by fake evaluators (fresh ones per run)."""

    def evaluation(config: Any, **kw: Any) -> ResearchEvaluation:
        evaluators = {st.PLAN: FakeEvaluator(st.PLAN, *plan, delay=delay),
                      st.RETRIEVAL: FakeEvaluator(st.RETRIEVAL, *retrieval, delay=delay),
                      st.ANSWER: FakeEvaluator(st.ANSWER, GOOD_ANSWER, delay=delay)}
        return ResearchEvaluation(config, evaluators=evaluators, critic=critic(critic_reply("targeted_fix")), **kw)

    return ResearchPipeline(Planner(), Search(), Synthesiser(), config=research_config({}), evaluation=evaluation)


def parse_sse(text: str) -> list[dict[str, Any]]:
    """The messages of an event stream: {id, event, data} (comments and retry lines left out)."""
    out = []
    for block in text.split("\n\n"):
        fields: dict[str, Any] = {}
        for line in block.splitlines():
            if line.startswith(":") or ":" not in line:
                continue
            name, _, value = line.partition(":")
            fields[name] = value[1:] if value.startswith(" ") else value
        if "data" in fields:
            out.append({"id": int(fields["id"]), "event": fields["event"], "data": json.loads(fields["data"])})
    return out


@pytest.fixture
def make_client(tmp_path):
    clients = []

    def make(pipe: ResearchPipeline | None = None, **settings: Any) -> TestClient:
        url = f"sqlite:///{tmp_path}/live.db"
        app = create_app(Settings.load(database_url=url, home=str(tmp_path / ".jurist"), **settings),
                         research_pipeline=pipe)
        client = TestClient(app, base_url="http://localhost")
        clients.append(client.__enter__())
        return client

    yield make
    for c in clients:
        c.__exit__(None, None, None)


def start(client: TestClient, **body: Any) -> dict[str, Any]:
    r = client.post("/api/research/evaluate", json={"query": QUERY, **body})
    assert r.status_code == 202, r.text
    return r.json()


def wait_for(client: TestClient, log_id: str, status: str, timeout: float = 10) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        r = client.get(f"/api/research/{log_id}")
        found = r.json() if r.status_code == 200 else {"status": r.status_code, "events": []}  # 404: not begun yet
        if found["status"] == status:
            return found
        assert time.monotonic() < deadline, f"still {found['status']!r}: {[e['type'] for e in found['events']]}"
        time.sleep(0.02)


def test_a_started_run_streams_its_events_and_is_stored(make_client):
    client = make_client(pipeline())
    links = start(client)
    log_id = links["log_id"]
    assert links == {"log_id": log_id, "live": f"/evaluation/research/{log_id}/live",
                     "events": f"/api/research/{log_id}/events", "status": f"/api/research/{log_id}",
                     "decision": f"/api/research/{log_id}/decision", "cancel": f"/api/research/{log_id}/cancel",
                     "record": f"/evaluation/research/{log_id}"}
    r = client.get(links["events"])  # ends after done
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    assert r.headers["cache-control"] == "no-store"
    messages = parse_sse(r.text)
    kinds = [(m["event"], m["data"].get("stage"), m["data"].get("attempt")) for m in messages]
    assert kinds[:7] == [("started", None, None), ("attempt", "plan", 1), ("evaluation", "plan", 1),
                         ("thinking", "plan", 2), ("attempt", "plan", 2), ("evaluation", "plan", 2),
                         ("stage_done", "plan", None)]
    assert kinds[-1] == ("done", None, None)
    assert [m["id"] for m in messages] == [m["data"]["seq"] for m in messages] == list(range(1, len(messages) + 1))
    assert all(m["event"] == m["data"]["type"] and m["data"]["log_id"] == log_id for m in messages)
    assert messages[2]["data"]["passed"] is False and messages[5]["data"]["passed"] is True

    found = client.get(links["status"]).json()
    assert found["status"] == "done" and found["query"] == QUERY and found["pending_decision"] is None
    assert [e["type"] for e in found["events"]] == [m["event"] for m in messages]
    stored = client.get(f"/api/evaluation/sessions/{log_id}").json()["evaluation"]
    assert stored["kind"] == "research" and stored["payload"]["planEvaluation"]["chosenAttempt"] == 2

    page = client.get(links["live"])
    assert page.status_code == 200 and "research_live.js" in page.text
    assert f'data-events="/api/research/{log_id}/events"' in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert client.get("/static/research_live.js").status_code == 200

    # a reconnecting reader resumes after its Last-Event-ID (or ?after=)
    again = parse_sse(client.get(links["events"], headers={"Last-Event-ID": "5"}).text)
    assert [m["id"] for m in again] == list(range(6, len(messages) + 1))
    assert [m["id"] for m in parse_sse(client.get(links["events"] + "?after=12").text)][0] == 13


def test_retry_decision_through_the_api(make_client):
    pipe = pipeline(plan=(GOOD_PLAN,), retrieval=(SEVERE, GOOD_RETRIEVAL))
    client = make_client(pipe)
    log_id = start(client, decision_timeout=30)["log_id"]
    found = wait_for(client, log_id, "waiting")
    pending = found["pending_decision"]
    assert pending["stage"] == "retrieval" and pending["default"] == "proceed" and pending["timeout_s"] == 30
    assert pending["options"] == ["proceed", "retry"] and "resolve" not in pending
    asked = pending["seq"]
    r = client.post(f"/api/research/{log_id}/decision", json={"decision": asked, "choice": "retry"})
    assert r.status_code == 200
    assert r.json() == {"log_id": log_id, "decision": asked, "stage": "retrieval", "choice": "retry"}
    messages = parse_sse(client.get(f"/api/research/{log_id}/events").text)
    decided = next(m["data"] for m in messages if m["event"] == "decided")
    assert (decided["choice"], decided["by"]) == ("retry", "user")
    assert ("attempt", 2) in [(m["event"], m["data"].get("attempt")) for m in messages if m["data"].get("stage") == "retrieval"]
    assert pipe.search.calls == 2  # type: ignore[attr-defined]
    record = client.get(f"/api/evaluation/sessions/{log_id}").json()["evaluation"]["payload"]
    assert [(d["choice"], d["by"]) for d in record["decisions"]] == [("retry", "user")]
    page = client.get(f"/evaluation/research/{log_id}").text  # the stored page shows what was chosen
    assert 'class="notice info decision" data-choice="retry"' in page and "chosen by the user" in page
    # decided and finished: nothing is waiting any more
    late = client.post(f"/api/research/{log_id}/decision", json={"decision": asked, "choice": "proceed"})
    assert late.status_code == 409 and "has finished" in late.json()["detail"]


def test_without_an_answer_the_default_is_taken_after_the_timeout(make_client):
    pipe = pipeline(plan=(GOOD_PLAN,), retrieval=(SEVERE,))
    client = make_client(pipe)
    log_id = start(client, decision_timeout=0.2, decision_default="proceed")["log_id"]
    messages = parse_sse(client.get(f"/api/research/{log_id}/events").text)
    asked = next(m["data"] for m in messages if m["event"] == "decision")
    decided = next(m["data"] for m in messages if m["event"] == "decided")
    assert asked["timeout_s"] == 0.2 and (decided["choice"], decided["by"]) == ("proceed", "timeout")
    assert pipe.search.calls == 1  # type: ignore[attr-defined]
    assert messages[-1]["event"] == "done"
    page = client.get(f"/evaluation/research/{log_id}").text
    assert 'data-choice="proceed"' in page and "no answer in 0.2 s, the default" in page


def test_bad_input(make_client):
    client = make_client(pipeline(delay=0.3))
    log_id = start(client)["log_id"]
    wait_for(client, log_id, "running")
    decide = f"/api/research/{log_id}/decision"
    r = client.post(decide, json={"decision": 1, "choice": "proceed"})  # running; event 1 asked nothing
    assert r.status_code == 409 and "is not a decision" in r.json()["detail"]
    assert client.post(decide, json={"decision": 1, "choice": "maybe"}).status_code == 422
    assert client.post(decide, json={"choice": "proceed"}).status_code == 422
    assert client.post(decide, json={}).status_code == 422
    assert client.post(decide, content=b'{"choice": "retry"}', headers={"Content-Type": "text/plain"}).status_code == 415
    assert client.post(decide, json={"choice": "proceed"}, headers={"Origin": "http://evil.example"}).status_code == 403
    unknown = client.post("/api/research/abc123/decision", json={"decision": 1, "choice": "retry"})
    assert unknown.status_code == 404 and "no live research evaluation" in unknown.json()["detail"]
    assert client.get("/api/research/abc123").status_code == 404
    assert client.get("/api/research/abc123/events").status_code == 404
    assert client.get("/api/research/not%20an%20id!/events").status_code == 422
    assert client.get(f"/api/research/{log_id}/events?after=-1").status_code == 422
    for body in ({"query": ""}, {"query": QUERY, "decision_timeout": 0}, {"query": QUERY, "decision_timeout": 4000},
                 {"query": QUERY, "decision_default": "wait"}, {}):
        assert client.post("/api/research/evaluate", json=body).status_code == 422, body
    page = client.get("/evaluation/research/abc123/live")
    assert page.status_code == 404 and "is running here" in page.text


def test_no_pipeline_no_runs(make_client):
    client = make_client(None)
    r = client.post("/api/research/evaluate", json={"query": QUERY})
    assert r.status_code == 404 and "create_app(research_pipeline=" in r.json()["detail"]


def test_writes_need_the_token(make_client):
    client = make_client(pipeline(), api_token="s3cret")
    assert client.post("/api/research/evaluate", json={"query": QUERY}).status_code == 401
    r = client.post("/api/research/evaluate", json={"query": QUERY}, headers={"Authorization": "Bearer s3cret"})
    assert r.status_code == 202
    log_id = r.json()["log_id"]
    assert client.post(f"/api/research/{log_id}/decision", json={"decision": 1, "choice": "retry"}).status_code == 401
    assert client.get(f"/api/research/{log_id}/events").status_code == 200  # reads stay open
    assert 'id="decision-token"' in client.get(f"/evaluation/research/{log_id}/live").text


def test_runs_at_once_are_bounded(make_client, monkeypatch):
    monkeypatch.setattr(research_live, "MAX_RUNNING", 1)
    client = make_client(pipeline(plan=(GOOD_PLAN,), retrieval=(SEVERE,)))
    first = start(client, decision_timeout=30)["log_id"]
    asked = wait_for(client, first, "waiting")["pending_decision"]["seq"]
    r = client.post("/api/research/evaluate", json={"query": QUERY})
    assert r.status_code == 429 and "research evaluations are running" in r.json()["detail"]
    client.post(f"/api/research/{first}/decision", json={"decision": asked, "choice": "proceed"})
    wait_for(client, first, "done")
    start(client)


def test_a_finished_run_no_longer_held_goes_to_its_stored_page(make_client):
    client = make_client(pipeline())
    log_id = start(client)["log_id"]
    wait_for(client, log_id, "done")
    live: LiveResearch = live_research(client.app)  # type: ignore[arg-type]
    live.keep_finished = 0
    live.open("other")
    live(_done_event("other"))  # finishing another run evicts the older finished ones
    assert not live.has(log_id)
    r = client.get(f"/evaluation/research/{log_id}/live", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == f"/evaluation/research/{log_id}"


def _done_event(log_id: str) -> Any:
    from jurist.research.events import Done

    return Done(log_id=log_id, seq=1, overall_score=None, evaluation_skipped=False)


def test_shutdown_ends_a_waiting_run_with_an_error_event(tmp_path):
    app = create_app(Settings.load(database_url=f"sqlite:///{tmp_path}/s.db", home=str(tmp_path / ".jurist")),
                     research_pipeline=pipeline(plan=(GOOD_PLAN,), retrieval=(SEVERE,)))
    with TestClient(app, base_url="http://localhost") as client:
        log_id = start(client, decision_timeout=600)["log_id"]
        wait_for(client, log_id, "waiting")
    found = live_research(app).snapshot(log_id)
    assert found is not None and found.status == "error"
    assert found.events[-1]["error_type"] == "CancelledError"


def test_an_application_in_process_runs_its_own_evaluation_live(tmp_path):
    """The application runs its research in its own thread and event loop, with the server's
    LiveResearch as the sink; the decision posted to the server reaches it across threads."""
    live = LiveResearch()
    app = create_app(Settings.load(database_url=f"sqlite:///{tmp_path}/a.db", home=str(tmp_path / ".jurist")),
                     research_live=live)
    assert live_research(app) is live
    result: dict[str, Any] = {}

    async def research() -> None:
        store = Store(f"sqlite:///{tmp_path}/app.db")
        try:
            evaluators = {st.PLAN: FakeEvaluator(st.PLAN, GOOD_PLAN),
                          st.RETRIEVAL: FakeEvaluator(st.RETRIEVAL, SEVERE, GOOD_RETRIEVAL),
                          st.ANSWER: FakeEvaluator(st.ANSWER, GOOD_ANSWER)}
            async with ResearchEvaluation(research_config({}), store=store, evaluators=evaluators, events=live,
                                          log_id="app-run-1") as ev:
                plan = (await ev.evaluate_plan(QUERY, Planner())).plan
                retrieval = await ev.evaluate_retrieval(QUERY, plan, SOURCES)
                result["flagged"] = retrieval.flagged_severe
                result["choice"] = await ev.decision(timeout=10)
                await ev.evaluate_answer(QUERY, SOURCES, Synthesiser())
                result["record"] = await ev.save()
        finally:
            store.close()

    with TestClient(app, base_url="http://localhost") as client:
        thread = threading.Thread(target=lambda: asyncio.run(research()))
        thread.start()
        try:
            asked = wait_for(client, "app-run-1", "waiting")["pending_decision"]["seq"]
            decide = {"decision": asked, "choice": "retry"}
            assert client.post("/api/research/app-run-1/decision", json=decide).status_code == 200
            messages = parse_sse(client.get("/api/research/app-run-1/events").text)
        finally:
            thread.join(timeout=10)
    assert result["flagged"] and result["choice"] == "retry"
    assert messages[0]["data"]["query"] == QUERY and messages[-1]["event"] == "done"
    assert [d.by for d in result["record"].decisions] == ["user"]


def test_events_reach_a_reader_as_they_happen(tmp_path):
    """Over a real server: the first events arrive while the run is still evaluating."""
    app = create_app(Settings.load(database_url=f"sqlite:///{tmp_path}/r.db", home=str(tmp_path / ".jurist")),
                     research_pipeline=pipeline(delay=0.4))
    with running(app) as base:
        log_id = httpx.post(f"{base}/api/research/evaluate", json={"query": QUERY}).json()["log_id"]
        seen: list[tuple[str, str]] = []
        with httpx.stream("GET", f"{base}/api/research/{log_id}/events", timeout=30) as stream:
            for line in stream.iter_lines():
                if not line.startswith("event: "):
                    continue
                kind = line[len("event: "):]
                status = httpx.get(f"{base}/api/research/{log_id}").json()["status"]
                seen.append((kind, status))
    assert seen[0] == ("started", "running") and ("evaluation", "running") in seen
    assert seen[-1][0] == "done"


def test_a_pipeline_that_cannot_build_its_evaluation_is_a_400(make_client):
    def evaluation(config: Any, **kw: Any) -> ResearchEvaluation:
        return ResearchEvaluation(config, log_id="not an id!", **kw)

    client = make_client(ResearchPipeline(Planner(), Search(), Synthesiser(), evaluation=evaluation))
    r = client.post("/api/research/evaluate", json={"query": QUERY})
    assert r.status_code == 400 and "log id 'not an id!'" in r.json()["detail"]
