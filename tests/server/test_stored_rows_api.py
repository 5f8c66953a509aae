"""The routes that return rows read from the store send exactly the JSON they sent as dicts.

The rows are typed models now; these bodies are written out in full, so a field
renamed, added or dropped on the way from the database to the response fails here.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import insert

from jurist.config import Settings
from jurist.server import create_app
from jurist.store import Store
from jurist.store.tables import analysis_runs, evaluations, labels, pattern_evaluations, patterns, scores
from tests.conftest import fresh_database

AT = datetime(2026, 3, 2, 9, 30, tzinfo=timezone.utc)
LATER = datetime(2026, 3, 2, 9, 45, tzinfo=timezone.utc)
TOKEN = "t0ken"


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path):
    with fresh_database(request.param, tmp_path, prefix="jurist_rows") as url:
        s = Store(url)
        yield s
        s.close()


@pytest.fixture
def client(store):
    with TestClient(create_app(Settings(api_token=TOKEN), store=store), base_url="http://localhost") as c:
        yield c


def _seed(store: Store) -> None:
    with store.engine.begin() as conn:
        conn.execute(insert(evaluations), [{
            "id": "ev1", "kind": "rubric", "subject_id": "session-1", "trace_id": "ev1", "status": "scored",
            "score": 7.0, "max_score": 10.0, "percentage": 70.0, "judge_model": "openai/judge", "source": "s.jsonl",
            "passed": True, "escalated": False, "iterations": 1, "failure": None, "max_attempts_hit": False,
            "payload": {"kind": "rubric", "version": "1"}, "created_at": AT}, {
            "id": "ev2", "kind": "gate", "subject_id": "q-hash", "trace_id": None, "status": "failed",
            "score": 1.0, "max_score": 5.0, "percentage": 20.0, "judge_model": "openai/judge", "source": None,
            "passed": False, "escalated": True, "iterations": 3, "failure": "accuracy", "max_attempts_hit": True,
            "payload": {"kind": "gate", "version": "1", "question": "Why   is the sky\nblue?"}, "created_at": LATER}])
        conn.execute(insert(scores), [{
            "evaluation_id": "ev1", "key": "helpful", "name": "Helpfulness", "score": 4.0, "max_score": 5.0,
            "weight": 1.0, "status": "scored", "reason": "fine", "template_hash": "abcd", "judge_model": None}])
        conn.execute(insert(analysis_runs), [{
            "id": "run1", "status": "done", "params": {"kind": None, "min_count": 5}, "evaluations": 12,
            "writer_model": None, "error": None, "created_at": AT, "finished_at": LATER}])
        conn.execute(insert(patterns), [{
            "id": "pat1", "run_id": "run1", "impact": "high", "feature_type": "term", "feature": "latest",
            "dimension": "overall", "affected_count": 6, "mean_affected": 0.41, "mean_rest": 0.82,
            "effect_size": -0.9, "p_value": 0.0004, "test": "mann-whitney-u", "title": "Latest scores lower",
            "description": "Six subjects.", "suggested_fix": None, "writer": "statistics", "created_at": LATER}])
        conn.execute(insert(pattern_evaluations), [{"pattern_id": "pat1", "evaluation_id": "ev1"}])
        conn.execute(insert(labels), [{
            "item": "session-1", "rubric": "helpful", "score": 4.0, "passed": None, "annotator": "ann",
            "note": "agree", "evaluation_id": "ev1", "created_at": AT, "updated_at": LATER}])


def test_patterns_body(client, store):
    _seed(store)
    assert client.get("/api/evaluation/patterns").json() == {
        "run": {"id": "run1", "status": "done", "params": {"kind": None, "min_count": 5}, "evaluations": 12,
                "writer_model": None, "error": None, "created_at": "2026-03-02T09:30:00Z",
                "finished_at": "2026-03-02T09:45:00Z"},
        "patterns": [{"id": "pat1", "run_id": "run1", "impact": "high", "feature_type": "term", "feature": "latest",
                      "dimension": "overall", "affected_count": 6, "mean_affected": 0.41, "mean_rest": 0.82,
                      "effect_size": -0.9, "p_value": 0.0004, "test": "mann-whitney-u",
                      "title": "Latest scores lower", "description": "Six subjects.", "suggested_fix": None,
                      "writer": "statistics", "created_at": "2026-03-02T09:45:00Z", "evaluation_ids": ["ev1"]}]}
    assert client.get("/api/evaluation/patterns", params={"run_id": "run1"}).json()["run"]["id"] == "run1"


def test_no_run_yet_body(client):
    assert client.get("/api/evaluation/patterns").json() == {"run": None, "patterns": []}


LABEL = {"id": 1, "item": "session-1", "rubric": "helpful", "score": 4.0, "passed": None, "annotator": "ann",
         "note": "agree", "evaluation_id": "ev1", "created_at": "2026-03-02T09:30:00Z",
         "updated_at": "2026-03-02T09:45:00Z"}


def test_labels_bodies(client, store):
    _seed(store)
    assert client.get("/api/evaluation/labels").json() == [LABEL]
    assert client.get("/api/evaluation/labels", params={"item": "session-1"}).json() == [LABEL]
    saved = client.post("/api/evaluation/labels", headers={"Authorization": f"Bearer {TOKEN}"},
                        json={"evaluation_id": "ev1", "rubric": "helpful", "score": 2, "annotator": "ann"}).json()
    assert set(saved) == set(LABEL) and saved["id"] == 1 and saved["score"] == 2.0 and saved["note"] is None
    assert saved["created_at"] == LABEL["created_at"] and saved["updated_at"] != LABEL["updated_at"]


def _bins(*counts: int) -> list[dict[str, float | int]]:
    return [{"bin": b, "low": b / 10, "high": (b + 1) / 10, "count": n} for b, n in enumerate(counts)]


NO_CALLS = {"count": 0, "input_tokens": 0, "output_tokens": 0, "average_latency_ms": None, "max_latency_ms": None,
            "errors": 0, "cost_usd": 0.0, "cost_unknown_calls": 0}
GATE_FIGURES = {"kind": "gate", "count": 1, "average_score": 0.2, "pass_rate": 0.0}


def test_metrics_bodies(client, store):
    _seed(store)
    assert client.get("/api/evaluation/metrics").json() == {
        "total": 2, "passed": 1, "judged": 2, "pass_rate": 0.5, "average_score": 0.45, "failed": 1,
        "distribution": _bins(0, 0, 1, 0, 0, 0, 0, 1, 0, 0), "failures": [{"failure": "accuracy", "count": 1}],
        "trend": [{"week": "2026-03-02", "count": 2, "average_score": 0.45, "pass_rate": 0.5}],
        "by_kind": [GATE_FIGURES, {"kind": "rubric", "count": 1, "average_score": 0.7, "pass_rate": 1.0}],
        "iterations": {"average": 2.0, "max": 3, "iterated": 1, "iterated_rate": 0.5, "max_attempts_hit": 1,
                       "max_attempts_hit_rate": 0.5},
        "escalations": {"count": 1, "rate": 0.5}, "calls": NO_CALLS}
    assert client.get("/api/evaluation/metrics", params={"kind": "gate"}).json() == {
        "total": 1, "passed": 0, "judged": 1, "pass_rate": 0.0, "average_score": 0.2, "failed": 1,
        "distribution": _bins(0, 0, 1, 0, 0, 0, 0, 0, 0, 0), "failures": [{"failure": "accuracy", "count": 1}],
        "trend": [{"week": "2026-03-02", "count": 1, "average_score": 0.2, "pass_rate": 0.0}],
        "by_kind": [GATE_FIGURES],
        "iterations": {"average": 3.0, "max": 3, "iterated": 1, "iterated_rate": 1.0, "max_attempts_hit": 1,
                       "max_attempts_hit_rate": 1.0},
        "escalations": {"count": 1, "rate": 1.0}, "calls": NO_CALLS}


def test_evaluation_list_body(client, store):
    _seed(store)
    assert client.get("/api/evaluation/sessions").json() == {"total": 2, "page": 1, "page_size": 50, "items": [
        {"id": "ev2", "kind": "gate", "subject_id": "q-hash", "title": "Why is the sky blue?", "trace_id": None,
         "status": "failed", "score": 1.0, "max_score": 5.0, "percentage": 20.0, "score_normalised": 0.2,
         "passed": False, "escalated": True, "iterations": 3, "max_attempts_hit": True, "failure": "accuracy",
         "judge_model": "openai/judge", "created_at": "2026-03-02T09:45:00Z"},
        {"id": "ev1", "kind": "rubric", "subject_id": "session-1", "title": None, "trace_id": "ev1",
         "status": "scored", "score": 7.0, "max_score": 10.0, "percentage": 70.0, "score_normalised": 0.7,
         "passed": True, "escalated": False, "iterations": 1, "max_attempts_hit": False, "failure": None,
         "judge_model": "openai/judge", "created_at": "2026-03-02T09:30:00Z"}]}
