"""The evaluation API against SQLite and PostgreSQL: sessions, one trace, metrics, calls, evaluate.

The expected figures are computed here in Python from the stored rows, independently of
the SQL aggregates the API runs.
"""

from __future__ import annotations

import statistics
from collections import Counter
from datetime import date, datetime, timedelta, timezone

import pytest
from fastapi.testclient import TestClient

from jurist.config import Settings
from jurist.server import create_app
from jurist.store import Store
from jurist.testing import Reply
from jurist.testing.synthetic import seed_history
from tests.conftest import fresh_database

END = datetime(2026, 11, 20, 12, 0, tzinfo=timezone.utc)
N = 600


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def db_url(request, tmp_path_factory):
    """A fresh database of each kind, with N synthetic evaluations over 60 days."""
    with fresh_database(request.param, tmp_path_factory.mktemp("api"), "jurist_api") as url:
        with Store(url) as store:
            seed_history(store, N, seed=11, days=60, end=END)
        yield url


@pytest.fixture(scope="module")
def rows(db_url):
    with Store(db_url) as store:
        return store.evaluations(limit=None)


@pytest.fixture
def client(db_url, tmp_path):
    settings = Settings.load(database_url=db_url, home=str(tmp_path / ".jurist"))
    with TestClient(create_app(settings), base_url="http://localhost") as c:
        yield c


def _expected(rows):
    pct = [r["percentage"] for r in rows if r["percentage"] is not None]
    judged = [r for r in rows if r["passed"] is not None]
    return {
        "total": len(rows),
        "pass_rate": round(sum(1 for r in judged if r["passed"]) / len(judged), 4),
        "average_score": round(statistics.fmean(pct) / 100.0, 4),
        "failures": Counter(r["failure"] for r in rows if r["failure"] is not None),
        "bins": Counter(min(9, int(p // 10)) for p in pct),
        "escalated": sum(1 for r in rows if r["escalated"]),
        "iterations_max": max(r["iterations"] for r in rows),
    }


def test_metrics_match_the_rows(client, rows):
    m = client.get("/api/evaluation/metrics").json()
    want = _expected(rows)
    assert m["total"] == want["total"] == N
    assert m["pass_rate"] == pytest.approx(want["pass_rate"], abs=1e-4)
    assert m["average_score"] == pytest.approx(want["average_score"], abs=1e-4)
    assert {f["failure"]: f["count"] for f in m["failures"]} == dict(want["failures"])
    assert [b["count"] for b in m["distribution"]] == [want["bins"].get(i, 0) for i in range(10)]
    assert m["escalations"]["count"] == want["escalated"] and m["iterations"]["max"] == want["iterations_max"]
    assert sum(t["count"] for t in m["trend"]) == N
    assert all(date.fromisoformat(t["week"]).weekday() == 0 for t in m["trend"])  # weeks start on Monday
    assert {k["kind"] for k in m["by_kind"]} == {"rubric", "gate", "research", "checklist"}
    assert m["calls"]["count"] == N and m["calls"]["input_tokens"] > 0


def test_metrics_date_range_and_kind(client, rows):
    since = (END - timedelta(days=10)).date().isoformat()
    m = client.get("/api/evaluation/metrics", params={"since": since, "kind": "gate"}).json()
    cut = datetime.fromisoformat(since)
    chosen = [r for r in rows if r["kind"] == "gate" and r["created_at"].replace(tzinfo=None) >= cut]
    assert m["total"] == len(chosen) > 0
    assert m["calls"]["count"] < N  # the calls are in the date range too


def test_list_filters_and_pagination(client, rows):
    params = {"kind": "research", "escalated": "true", "min_score": 0.2, "max_score": 0.9, "page_size": 7}
    first = client.get("/api/evaluation/sessions", params=params).json()
    want = [r for r in rows if r["kind"] == "research" and r["escalated"] and r["percentage"] is not None
            and 20.0 <= r["percentage"] <= 90.0]
    assert first["total"] == len(want) > 7 and len(first["items"]) == 7
    second = client.get("/api/evaluation/sessions", params={**params, "page": 2}).json()
    ids = [i["id"] for i in first["items"] + second["items"]]
    assert len(set(ids)) == len(ids)  # pages do not overlap
    stamps = [i["created_at"] for i in first["items"]]
    assert stamps == sorted(stamps, reverse=True)
    failing = client.get("/api/evaluation/sessions", params={"failure": "evaluation_failed"}).json()
    assert failing["total"] == sum(1 for r in rows if r["failure"] == "evaluation_failed")
    many = client.get("/api/evaluation/sessions", params={"min_iterations": 2}).json()
    assert many["total"] == sum(1 for r in rows if r["iterations"] >= 2)


def test_trace_has_scores_and_calls(client, rows):
    target = next(r for r in rows if r["kind"] == "rubric")
    t = client.get(f"/api/evaluation/sessions/{target['id']}").json()
    assert t["evaluation"]["id"] == target["id"] and t["evaluation"]["payload"]["synthetic"] is True
    assert [s["key"] for s in t["scores"]] == ["empathy", "accuracy", "clarity"]
    assert len(t["calls"]) == 1 and t["calls"][0]["trace_id"] == target["trace_id"]
    call = client.get(f"/api/calls/{t['calls'][0]['id']}").json()
    assert call["messages"] and call["response_text"]


@pytest.mark.parametrize("query", [
    "min_score=abc", "min_score=1.5", "kind=nope", "escalated=maybe", "page=0", "page_size=1000",
    "since=yesterday", "min_iterations=0", "status=weird",
    "since=0001-01-01T00:00:00%2B00:01", "until=9999-12-31T23:59:59-00:01",  # out of range once in UTC
])
def test_bad_parameters_are_422(client, query):
    r = client.get(f"/api/evaluation/sessions?{query}")
    assert r.status_code == 422, r.text
    assert r.json()["detail"].startswith("invalid request")


@pytest.mark.parametrize("path", ["/api/evaluation/sessions", "/api/evaluation/metrics", "/evaluation/explorer"])
def test_an_iteration_bound_past_a_database_integer_is_422_not_500(client, path):
    r = client.get(f"{path}?max_iterations={2**63}")
    assert r.status_code == 422, r.text[:300]


def test_inconsistent_ranges_are_400(client):
    r = client.get("/api/evaluation/metrics?min_score=0.8&max_score=0.2")
    assert r.status_code == 400 and "min_score" in r.json()["detail"]


def test_unknown_ids_are_404(client):
    assert client.get("/api/evaluation/sessions/nope").status_code == 404
    r = client.get("/api/calls/nope")
    assert r.status_code == 404 and "nope" in r.json()["detail"]


def test_a_date_out_of_range_in_utc_is_422_on_the_calls_log(client):
    r = client.get("/api/calls?since=0001-01-01T00:00:00%2B00:01")
    assert r.status_code == 422 and "out of range" in r.text, r.text


def test_calls_log_filters(client):
    page = client.get("/api/calls", params={"status": "error", "page_size": 5}).json()
    assert page["total"] > 0 and all(c["status"] == "error" for c in page["items"])


def test_openapi_lists_the_endpoints(client):
    paths = client.get("/openapi.json").json()["paths"]
    for p in ("/api/evaluation/sessions", "/api/evaluation/sessions/{evaluation_id}", "/api/evaluation/metrics",
              "/api/calls", "/api/evaluate"):
        assert p in paths
    params = {p["name"] for p in paths["/api/evaluation/sessions"]["get"]["parameters"]}
    assert {"kind", "min_score", "max_score", "failure", "escalated", "min_iterations", "since", "until",
            "page", "page_size"} <= params


# -- POST /api/evaluate -----------------------------------------------------------------

RUBRICS = {"scale": [1, 5], "rubrics": [{"id": "helpful", "name": "Helpful", "scoring_criteria": "5 = very"}]}
SESSION = [{"role": "user", "content": "How do I reset my password? <script>alert(1)</script>"},
           {"role": "assistant", "content": "Use the 'Forgot password' link."}]


def _app(tmp_path, provider, token=None):
    settings = Settings.load(
        home=str(tmp_path / ".jurist"), api_token=token, judge="fake/judge-1",
        providers={"fake": {"type": "openai", "base_url": provider.base_url, "api_key": "k"}},
        backoff_base=0.05, backoff_max=0.2)
    return TestClient(create_app(settings), base_url="http://localhost")


def test_evaluate_scores_and_stores(tmp_path, provider):
    provider.script(Reply(text='{"score": 4, "reasoning": "clear steps"}'))
    with _app(tmp_path, provider) as c:
        r = c.post("/api/evaluate", json={"rubrics": RUBRICS, "session": SESSION, "session_id": "pw-1"})
        assert r.status_code == 200, r.text
        result = r.json()
        assert result["session_id"] == "pw-1" and result["rubric_scores"][0]["score"] == 4.0
        listed = c.get("/api/evaluation/sessions", params={"subject_id": "pw-1"}).json()
        assert listed["total"] == 1 and listed["items"][0]["passed"] is True  # 4 of 5 = 75% >= 70%
        trace = c.get(f"/api/evaluation/sessions/{listed['items'][0]['id']}").json()
        assert "<script>alert(1)</script>" in trace["calls"][0]["messages"][-1]["content"]  # stored as data


def test_evaluate_needs_the_token_when_one_is_set(tmp_path, provider):
    provider.script(Reply(text='{"score": 2, "reasoning": "vague"}'))
    with _app(tmp_path, provider, token="s3cret") as c:
        body = {"rubrics": RUBRICS, "session": SESSION}
        assert c.post("/api/evaluate", json=body).status_code == 401
        bad = c.post("/api/evaluate", json=body, headers={"Authorization": "Bearer wrong"})
        assert bad.status_code == 401 and "JURIST_API_TOKEN" in bad.json()["detail"]
        assert c.get("/api/evaluation/metrics").status_code == 200  # reads stay open
        ok = c.post("/api/evaluate", json=body, headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200 and ok.json()["rubric_scores"][0]["score"] == 2.0
    assert len(provider.requests) == 1  # the refused writes never reached the model


@pytest.mark.parametrize("body, status, words", [
    ({"rubrics": {"rubrics": []}, "session": SESSION}, 422, '"rubrics" is empty'),
    ({"rubrics": {"rubrics": [{"name": "x"}]}, "session": SESSION}, 422, "missing field 'id'"),
    ({"rubrics": RUBRICS, "session": [{"content": "no role"}]}, 422, "missing field 'role'"),
    ({"rubrics": RUBRICS, "session": []}, 422, "session"),
    ({"session": SESSION}, 422, "rubrics"),
    ({"rubrics": RUBRICS, "session": SESSION, "template": "/etc/passwd"}, 422, "template"),  # never a file path
    ({"rubrics": RUBRICS, "session": SESSION, "template": "rubric_judge@9"}, 404, "no prompt 'rubric_judge' version 9"),
])
def test_evaluate_bad_input(tmp_path, provider, body, status, words):
    with _app(tmp_path, provider) as c:
        r = c.post("/api/evaluate", json=body)
    assert r.status_code == status, r.text
    assert words in r.json()["detail"]
    assert provider.requests == []


def test_evaluate_model_failure_is_recorded_not_a_crash(tmp_path, provider):
    provider.default = Reply(status=500)
    with _app(tmp_path, provider) as c:
        r = c.post("/api/evaluate", json={"rubrics": RUBRICS, "session": SESSION})
    assert r.status_code == 200
    assert r.json()["status"] == "failed" and r.json()["rubric_scores"][0]["status"] == "evaluation_failed"


def test_calls_log_status_failed_is_every_failed_call(client, db_url):
    with Store(db_url) as store:
        failed = [c for c in store.calls(limit=None) if c["status"] != "ok"]
    page = client.get("/api/calls", params={"status": "failed", "page_size": 200}).json()
    assert page["total"] == len(failed) > 0
    assert {c["status"] for c in page["items"]} == {c["status"] for c in failed} - {"ok"}


@pytest.mark.parametrize("wrong, hint", [("faild", " (did you mean 'failed'?)"), ("weird", "")])
def test_calls_log_unknown_status_is_422_with_the_vocabulary(client, wrong, hint):
    r = client.get("/api/calls", params={"status": wrong})
    assert r.status_code == 422, r.text
    assert f"'{wrong}' is not a call status{hint}; use one of: ok, error, parse_error, failed" in r.text
