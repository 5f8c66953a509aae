"""Labels on the dashboard: the POST route (through the write guard), the label form on the
trace page, and the calibration API and page, on SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
import html
import json

import numpy as np
import pytest
from fastapi.testclient import TestClient
from scipy import stats

from jurist.analysis.agreement import cohen_kappa
from jurist.config import Settings
from jurist.models import script
from jurist.server import create_app
from jurist.store import Store
from tests.conftest import fresh_database
from tests.server.test_dashboard_pages import PWN_IMG, XSS, rubric_set, session

JUDGE = {"c0": 5, "c1": 2, "c2": 4, "c3": 1, "c4": 3, "c5": 4}
ANA = {"c0": 5, "c1": 2, "c2": 3, "c3": 1, "c4": 3, "c5": 5}
BEN = {"c0": 4, "c1": 2, "c2": 3, "c3": 2, "c4": 3, "c5": 5}


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path):
    with fresh_database(request.param, tmp_path, prefix="jurist_labels") as url:
        s = Store(url)
        try:
            yield s
        finally:
            s.close()


def _seed(store: Store) -> dict[str, str]:
    """Rubric evaluations of six sessions by a scripted judge; their evaluation ids by session."""
    from jurist.rubrics.api import evaluate

    async def run() -> None:
        for sid, score in JUDGE.items():
            script("cal", json.dumps({"score": score, "reasoning": f"judged {sid} {XSS}"}))
            await evaluate(rubric_set(), session(sid, f"Question {sid}?", "An answer."), judge="scripted/cal",
                           settings=Settings(), store=store)

    asyncio.run(run())
    store.flush()
    return {row["subject_id"]: row["id"] for row in store.evaluations(kind="rubric")}


def _client(store: Store, **settings) -> TestClient:
    return TestClient(create_app(Settings(**settings), store=store), base_url="http://localhost")


def test_labels_saved_listed_replaced_and_calibrated(store):
    ids = _seed(store)
    with _client(store) as c:
        for who, labels in (("ana", ANA), ("ben", BEN)):
            for sid, value in labels.items():
                r = c.post("/api/evaluation/labels", json={"evaluation_id": ids[sid], "rubric": "helpful",
                                                           "score": value, "annotator": who})
                assert r.status_code == 201, r.text
                assert r.json()["item"] == sid and r.json()["score"] == value
        # a second label by the same annotator replaces the first
        r = c.post("/api/evaluation/labels", json={"item": "c0", "rubric": "helpful", "score": 4, "annotator": "ben",
                                                   "note": "on reflection"})
        assert r.status_code == 201 and r.json()["note"] == "on reflection"
        listed = c.get("/api/evaluation/labels", params={"item": "c0"}).json()
        assert [(x["annotator"], x["score"]) for x in listed] == [("ana", 5), ("ben", 4)]
        assert len(c.get("/api/evaluation/labels").json()) == 12

        report = c.get("/api/evaluation/calibration", params={"resamples": 200}).json()
    [rubric] = report["rubrics"]
    assert report["judge"] == "scripted/cal" and report["annotators"] == ["ana", "ben"]
    j = np.array([JUDGE[s] for s in JUDGE for _ in range(2)])
    h = np.array([v for s in JUDGE for v in (ANA[s], BEN[s])])
    jv = rubric["judge_vs_humans"]
    assert jv["n"] == 12 and rubric["humans"]["n"] == 6
    assert jv["exact"]["value"] == round(float(np.mean(j == h)), 4)
    assert jv["spearman"]["value"] == round(stats.spearmanr(j, h).statistic, 4)
    assert jv["weighted_kappa"]["value"] == round(cohen_kappa(j, h, [1, 2, 3, 4, 5], "quadratic"), 4)
    assert jv["mean_bias"]["value"] == round(float(np.mean(j - h)), 4)
    assert rubric["differing"][0]["trace"] == f"/evaluation/evaluations/{ids[rubric['differing'][0]['item']]}"


def test_a_bad_label_is_refused_with_a_clear_message(store):
    ids = _seed(store)
    with _client(store) as c:
        cases = [
            ({"evaluation_id": ids["c0"], "rubric": "kindness", "score": 3, "annotator": "a"}, 422, "no rubric"),
            ({"evaluation_id": ids["c0"], "rubric": "helpful", "score": 9, "annotator": "a"}, 422, "not on the"),
            ({"evaluation_id": "nope", "rubric": "helpful", "score": 3, "annotator": "a"}, 404, "no evaluation"),
            ({"evaluation_id": ids["c0"], "item": "c1", "rubric": "helpful", "score": 3, "annotator": "a"}, 422,
             "not the evaluation's subject"),
            ({"item": "c0", "rubric": "helpful", "annotator": "a"}, 422, "either score or passed"),
            ({"item": "c0", "rubric": "helpful", "score": 2.5, "annotator": "a"}, 422, "whole number"),
            ({"item": "c0", "rubric": "helpful", "score": 2, "passed": True, "annotator": "a"}, 422, "either"),
            ({"rubric": "helpful", "score": 2, "annotator": "a"}, 422, "evaluation_id or item"),
            ({"item": "c0", "rubric": "helpful", "score": 2, "annotator": ""}, 422, "annotator"),
        ]
        for body, status, message in cases:
            r = c.post("/api/evaluation/labels", json=body)
            assert r.status_code == status, (body, r.text)
            assert message in r.text
        assert c.get("/api/evaluation/labels").json() == []


def test_label_writes_pass_the_guard(store):
    ids = _seed(store)
    body = {"evaluation_id": ids["c0"], "rubric": "helpful", "passed": True, "annotator": "ana"}
    with _client(store, api_token="s3cret") as c:
        assert c.post("/api/evaluation/labels", json=body).status_code == 401
        assert c.post("/api/evaluation/labels", json=body, headers={
            "Authorization": "Bearer s3cret", "Origin": "https://evil.example"}).status_code == 403
        assert c.post("/api/evaluation/labels", content=json.dumps(body), headers={
            "Authorization": "Bearer s3cret", "Content-Type": "text/plain"}).status_code == 415
        r = c.post("/api/evaluation/labels", json=body, headers={"Authorization": "Bearer s3cret"})
        assert r.status_code == 201 and r.json()["passed"] is True and r.json()["score"] is None


def test_trace_page_has_the_label_form_and_escapes_labels(store):
    ids = _seed(store)
    with _client(store) as c:
        c.post("/api/evaluation/labels", json={"evaluation_id": ids["c2"], "rubric": "helpful", "score": 3,
                                               "annotator": f"ana {PWN_IMG}", "note": XSS})
        page = c.get(f"/evaluation/evaluations/{ids['c2']}").text
    assert 'id="labels-section"' in page and 'class="label-form' in page
    assert f'data-evaluation="{ids["c2"]}"' in page and 'data-rubric="helpful"' in page
    assert '<option value="score:1">1</option>' in page and '<option value="score:5">5</option>' in page
    assert PWN_IMG not in page and "<script>window.__pwned" not in page
    assert html.escape(XSS, quote=False) in page or "&lt;script&gt;" in page


def test_calibration_page_draws_the_confusion_matrix(store):
    ids = _seed(store)
    with _client(store) as c:
        empty = c.get("/evaluation/calibration")
        assert empty.status_code == 200 and 'id="no-labels"' in empty.text
        for who, labels in (("ana", ANA), ("ben", BEN)):
            for sid, value in labels.items():
                c.post("/api/evaluation/labels", json={"evaluation_id": ids[sid], "rubric": "helpful",
                                                       "score": value, "annotator": who})
        page = c.get("/evaluation/calibration").text
        nav = c.get("/evaluation").text
    assert 'href="/evaluation/calibration"' in nav
    assert "Cohen&#39;s κ (quadratic)" in page and "Krippendorff" in page
    assert 'class="chart-data" data-target="confusion-1"' in page and "/evaluation/assets/plotly.min.js" in page
    fig = json.loads(page.split('data-target="confusion-1">')[1].split("</script>")[0])
    assert fig["data"][0]["type"] == "heatmap"
    z = np.array(fig["data"][0]["z"])
    assert z.sum() == 12 and z.shape == (5, 5)
    assert PWN_IMG not in page  # the judge's reasoning is escaped


def test_stored_calibrations_are_listed_and_pass_fail_labels_get_a_fitted_threshold(store):
    from jurist.judges.calibration import JudgeIdentity
    from tests.calibrations import store_calibration

    ids = _seed(store)
    first = store_calibration(store, JudgeIdentity("openai/m", f"t {PWN_IMG}", "abc123", "helpful"), 0.72)
    newest = store_calibration(store, JudgeIdentity("openai/m", "gate_quality", "def456", "quality"), None)
    with _client(store) as c:
        listed = c.get("/api/evaluation/calibrations").json()
        assert [row["id"] for row in listed] == [newest, first]  # newest first
        assert listed[1]["kappa"] == 0.72 and listed[1]["template_name"] == f"t {PWN_IMG}"
        assert c.get("/api/evaluation/calibrations", params={"limit": 0}).status_code == 422
        for sid in JUDGE:  # pass/fail labels: the judge's pass is a score >= 70% of the top (3.5 of 5)
            c.post("/api/evaluation/labels", json={"evaluation_id": ids[sid], "rubric": "helpful",
                                                   "passed": ANA[sid] >= 3, "annotator": "ana"})
        report = c.get("/api/evaluation/calibration", params={"resamples": 0}).json()
        page = c.get("/evaluation/calibration").text
    [rubric] = report["rubrics"]
    assert rubric["scale"] == "pass/fail" and rubric["pass_at"] == 3.5
    # judge 5 2 4 1 3 4 against ana's pass (>= 3) T F T F T T: at t=3 every item agrees
    assert rubric["threshold"]["threshold"] == 3 and rubric["threshold"]["agreement"]["value"] == 1.0
    assert 'id="stored-calibrations"' in page and f'data-calibration="{first}"' in page
    assert 'class="threshold"' in page and "Fitted threshold (by agreement)" in page
    assert PWN_IMG not in page and "t &lt;img src=x onerror=" in page  # the template name, escaped
