"""The analysis and prompt-lab API: patterns, analyze, prompts, diff, compare."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from jurist.config import Settings
from jurist.judges.templates import builtin
from jurist.server import create_app
from jurist.server.api_analysis import router
from jurist.store import Store
from tests.analysis.conftest import add_evaluation, seed_latest

TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SHIPPED = builtin("rubric_judge")


@pytest.fixture
def store(tmp_path):
    s = Store(f"sqlite:///{tmp_path}/api.db")
    yield s
    s.close()


def _client(store: Store, **settings) -> TestClient:
    app = create_app(Settings(**settings), store=store)
    if not any(getattr(r, "original_router", None) is router or getattr(r, "path", None) == "/api/prompts"
               for r in app.routes):
        app.include_router(router)
    return TestClient(app, base_url="http://localhost")


@pytest.fixture
def client(store):
    with _client(store, api_token=TOKEN) as c:
        yield c


def test_prompts_with_versions_and_texts(client):
    listed = client.get("/api/prompts")
    assert listed.status_code == 200
    by_name = {p["name"]: p for p in listed.json()}
    assert by_name["rubric_judge"]["versions"][0] == {"version": 1, "hash": SHIPPED.hash, "created_at": None,
                                                       "note": "shipped with jurist", "source": "shipped"}
    one = client.get("/api/prompts/rubric_judge/versions/1").json()
    assert one["text"] == SHIPPED.text and one["name"] == "rubric_judge"


def test_writes_need_the_token(client):
    body = {"text": SHIPPED.text + "\nBe strict.\n", "note": "stricter"}
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        r = client.put("/api/prompts/rubric_judge", json=body, headers=headers)
        assert r.status_code == 401 and "API token" in r.json()["detail"]
        assert client.post("/api/evaluation/analyze", json={}, headers=headers).status_code == 401
    r = client.put("/api/prompts/rubric_judge", json=body, headers=AUTH)
    assert r.status_code == 201
    assert r.json()["version"] == 2 and r.json()["note"] == "stricter" and r.json()["source"] == "stored"
    assert client.get("/api/prompts/rubric_judge").json()["latest_version"] == 2
    json_type = {**AUTH, "Content-Type": "application/json"}  # every write says it is JSON, even without a body
    assert client.post("/api/evaluation/analyze", headers=json_type).status_code == 200  # no body: the defaults


def test_without_a_token_writes_are_open(store):
    with _client(store) as c:
        assert c.put("/api/prompts/rubric_judge", json={"text": SHIPPED.text + "\nv2\n"}).status_code == 201


def test_bad_prompt_versions_are_400_and_404(client):
    r = client.put("/api/prompts/rubric_judge", json={"text": SHIPPED.text.replace("{chat_session}", "")},
                   headers=AUTH)
    assert r.status_code == 400 and "missing {chat_session}" in r.json()["detail"]
    r = client.put("/api/prompts/no_such_prompt", json={"text": "hello"}, headers=AUTH)
    assert r.status_code == 404 and "no prompt named 'no_such_prompt'" in r.json()["detail"]
    assert client.get("/api/prompts/no_such_prompt").status_code == 404
    r = client.get("/api/prompts/rubric_judge/versions/7")
    assert r.status_code == 404 and "has no version 7" in r.json()["detail"]
    assert client.get("/api/evaluation/patterns", params={"run_id": "nope"}).status_code == 404


@pytest.mark.parametrize("method,url,body", [
    ("get", "/api/prompts/rubric_judge/versions/abc", None),
    ("get", "/api/prompts/rubric_judge/versions/0", None),
    ("get", "/api/prompts/rubric_judge/diff?a=x&b=1", None),
    ("get", "/api/prompts/rubric_judge/diff?a=1", None),
    ("get", "/api/prompts/rubric_judge/compare?a=0&b=1", None),
    ("get", "/api/prompts/bad%20name", None),
    ("get", "/api/evaluation/patterns?run_id=", None),
    ("put", "/api/prompts/rubric_judge", {"note": "no text"}),
    ("put", "/api/prompts/rubric_judge", {"text": "x", "extra": 1}),
    ("post", "/api/evaluation/analyze", {"kind": "bad"}),
    ("post", "/api/evaluation/analyze", {"min_count": 1}),
    ("post", "/api/evaluation/analyze", {"since": "yesterday"}),
    ("post", "/api/evaluation/analyze", {"limit": 0}),
])
def test_bad_parameters_are_422(client, method, url, body):
    kwargs = {"headers": AUTH} if method != "get" else {}
    if body is not None:
        kwargs["json"] = body
    r = getattr(client, method)(url, **kwargs)
    assert r.status_code == 422, r.text
    assert r.json()["detail"].startswith("invalid request:")


def test_analyze_then_read_the_patterns(client, store):
    latest_ids = seed_latest(store)
    assert client.get("/api/evaluation/patterns").json() == {"run": None, "patterns": []}
    r = client.post("/api/evaluation/analyze", json={"kind": "research", "min_count": 5}, headers=AUTH)
    assert r.status_code == 200, r.text
    run = r.json()["run"]
    assert run["status"] == "done" and run["evaluations"] == 60 and run["params"]["kind"] == "research"
    latest = [p for p in r.json()["patterns"] if p["feature"] == "latest" and p["dimension"] == "overall"]
    assert len(latest) == 1 and latest[0]["affected_count"] == 15 and set(latest[0]["evaluation_ids"]) == latest_ids
    assert latest[0]["impact"] == "high" and latest[0]["writer"] == "statistics"
    again = client.get("/api/evaluation/patterns").json()
    assert again["run"]["id"] == run["id"]
    assert client.get("/api/evaluation/patterns", params={"run_id": run["id"]}).json() == again
    r = client.post("/api/evaluation/analyze", json={"since": "2026-02-01T00:00:00Z", "until": "2026-01-01T00:00:00Z"},
                    headers=AUTH)
    assert r.status_code == 400 and "since must be earlier" in r.json()["detail"]


def test_diff_and_compare(client, store):
    v2 = client.put("/api/prompts/rubric_judge", json={"text": SHIPPED.text + "\nBe strict.\n"}, headers=AUTH).json()
    diff = client.get("/api/prompts/rubric_judge/diff", params={"a": 1, "b": 2})
    assert diff.status_code == 200
    assert {"op": "+", "text": "Be strict."} in diff.json()["lines"]
    for i in range(8):
        for h, score in ((SHIPPED.hash, 2 + (i % 3) * 0.1), (v2["hash"], 3.5 + (i % 2) * 0.1)):
            add_evaluation(store, text=None, percentage=score * 20, subject=f"s{i}",
                           score_rows=[{"key": "r1", "score": score, "max_score": 5, "template_hash": h}])
    store.flush()
    ab = client.get("/api/prompts/rubric_judge/compare", params={"a": 1, "b": 2, "key": "r1"})
    assert ab.status_code == 200
    body = ab.json()
    assert body["paired"] and body["n_a"] == body["n_b"] == 8 and body["test"] == "paired t-test"
    assert body["verdict"].startswith("B is better by 1.") and body["verdict"].endswith(
        "n = 8 subjects scored by both, judge openai/judge-a")
    assert body["judge_model"] == "openai/judge-a" and body["refused"] is None and body["judges"] == [
        {"judge_model": "openai/judge-a", "n_a": 8, "n_b": 8, "common": 8, "compared": True}]
    for i in range(8):  # a second judge on the same sessions: the comparison does not pick one for the caller
        for h, score in ((SHIPPED.hash, 4.0), (v2["hash"], 2.0)):
            add_evaluation(store, text=None, percentage=score * 20, subject=f"s{i}", judge_model="local/minilm",
                           score_rows=[{"key": "r1", "score": score, "max_score": 5, "template_hash": h}])
    store.flush()
    refused = client.get("/api/prompts/rubric_judge/compare", params={"a": 1, "b": 2}).json()
    assert refused["test"] is None and refused["p_value"] is None and not refused["significant"]
    assert refused["refused"].startswith("not compared: 2 judge models scored both versions (local/minilm, "
                                         "openai/judge-a)")
    assert [(j["judge_model"], j["n_a"], j["n_b"], j["compared"]) for j in refused["judges"]] == [
        ("local/minilm", 8, 8, False), ("openai/judge-a", 8, 8, False)]
    page = client.get("/evaluation/prompts/rubric_judge", params={"a": 1, "b": 2}).text
    assert 'class="verdict refused" id="verdict">not compared: 2 judge models scored both versions' in page
    assert page.count('<tr><td class="mono">') == 2 and "local/minilm" in page  # both judges, neither compared
    one = client.get("/api/prompts/rubric_judge/compare", params={"a": 1, "b": 2, "judge": "local/minilm"}).json()
    assert one["judge_model"] == "local/minilm" and one["difference"] == -2.0 and one["verdict"].startswith(
        "A is better by 2 points")
    assert client.get("/api/prompts/rubric_judge/compare", params={"a": 1, "b": 1}).status_code == 400
    assert client.get("/api/prompts/rubric_judge/compare", params={"a": 1, "b": 5}).status_code == 404


def test_openapi_describes_the_routes(client):
    schema = client.get("/openapi.json").json()
    paths = schema["paths"]
    for path in ("/api/evaluation/patterns", "/api/evaluation/analyze", "/api/prompts", "/api/prompts/{name}",
                 "/api/prompts/{name}/versions/{version}", "/api/prompts/{name}/diff", "/api/prompts/{name}/compare"):
        assert path in paths
    put = paths["/api/prompts/{name}"]["put"]
    assert put["responses"]["201"]["content"]["application/json"]["schema"]["$ref"].endswith("/PromptText")
    assert put["responses"]["422"]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorBody")
    assert put["security"]
    compare = paths["/api/prompts/{name}/compare"]["get"]
    assert compare["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith("/ABComparison")
    assert {p["name"] for p in compare["parameters"]} == {"name", "a", "b", "key", "judge"}
    assert "Pattern" in schema["components"]["schemas"]


def test_sessions_posted_to_the_api_are_analysed_from_the_store(store):
    """POST /api/evaluate keeps the session's transcript with its evaluation; the analysis finds the
    term in it (no file anywhere), each session once however often it was posted."""
    import random

    from jurist.models import script
    from tests.analysis.test_subjects import RUBRICS, TOPICS, judge_reply

    script("pj", default=judge_reply)
    rng = random.Random(4)
    with _client(store, api_token=TOKEN, cache=False) as client:
        for i in range(20):
            ask = "the latest" if i < 6 else "a simple"
            body = {"rubrics": RUBRICS, "judge": "scripted/pj", "session_id": f"posted-{i}", "session": [
                {"role": "user", "content": f"Tell me {ask} story about {rng.choice(TOPICS)}."},
                {"role": "assistant", "content": "Once upon a time."}]}
            for _ in range(3 if i == 0 else 1):
                r = client.post("/api/evaluate", json=body, headers=AUTH)
                assert r.status_code == 200, r.text
                assert "transcript" not in r.json()  # result.json as before; the store keeps the transcript
        r = client.post("/api/evaluation/analyze", json={"kind": "rubric", "min_count": 5}, headers=AUTH)
        assert r.status_code == 200, r.text
        assert r.json()["run"]["evaluations"] == 22
        [p] = [p for p in r.json()["patterns"] if p["feature"] == "latest"]
        assert p["affected_count"] == 6 and len(p["evaluation_ids"]) == 8
        stored = client.get(f"/api/evaluation/sessions/{p['evaluation_ids'][0]}").json()["evaluation"]["payload"]
        assert stored["transcript"]["turns"][0]["content"].startswith("Tell me the latest story")
