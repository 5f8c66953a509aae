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
            "payload": {"kind": "rubric", "version": "1"}, "created_at": AT}])
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
