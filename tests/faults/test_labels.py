"""Labels that could break the calibration: checked on the way in, deletable, and shown (never a 500)
when a store already holds ones the figures cannot use; on SQLite and PostgreSQL.

A label is given on an evaluation whose subject is not a labels-file id (``café 1``); labels off the
rubric's scale (7 and 1e308 on a 1-5 rubric, Infinity) are refused with 422 naming the field; rows a
store kept from before these checks are listed by the calibration API and page with why, and
``DELETE /api/evaluation/labels/{id}`` removes them (through the same write guard as every write).
"""

from __future__ import annotations

import asyncio
import json
import math
from datetime import datetime, timezone

import pytest
from fastapi.testclient import TestClient

from jurist.config import Settings
from jurist.models import script
from jurist.server import create_app
from jurist.store import Store
from jurist.store import labels as lq
from tests.server.test_dashboard_pages import rubric_set, session
from tests.server.test_labels import store  # noqa: F401 (a fixture: a store on SQLite and on PostgreSQL)

TOKEN = "label-t0ken"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
ITEMS = {"café 1": 4, "c2": 2, "c3": 5}  # session id -> the judge's score (1-5)




def _seed(store: Store) -> dict[str, str]:
    """Rubric evaluations of the items by a scripted judge; their evaluation ids by item."""
    from jurist.rubrics.api import evaluate

    async def run() -> None:
        for sid, score in ITEMS.items():
            script("labels-judge", json.dumps({"score": score, "reasoning": f"judged {sid}"}))
            await evaluate(rubric_set(), session(sid, "A question?", "An answer."), judge="scripted/labels-judge",
                           settings=Settings(), store=store)

    asyncio.run(run())
    store.flush()
    return {row["subject_id"]: row["id"] for row in store.evaluations(kind="rubric")}


def _client(store: Store, **settings: object) -> TestClient:
    return TestClient(create_app(Settings(**settings), store=store), base_url="http://localhost",
                      raise_server_exceptions=False)


def _post(c: TestClient, body: dict[str, object] | str, headers: dict[str, str] | None = None):
    content = body if isinstance(body, str) else json.dumps(body)
    return c.post("/api/evaluation/labels", content=content,
                  headers={"Content-Type": "application/json", **(headers or {})})


def test_a_label_on_any_evaluated_subject_is_calibrated(store):
    ids = _seed(store)
    with _client(store) as c:
        for who, bump in (("ana", 0), ("ben", -1)):
            for sid, score in ITEMS.items():
                r = _post(c, {"evaluation_id": ids[sid], "rubric": "helpful", "score": max(1, score + bump),
                              "annotator": who})
                assert r.status_code == 201, r.text
        report = c.get("/api/evaluation/calibration", params={"resamples": 50})
        page = c.get("/evaluation/calibration")
    assert report.status_code == 200, report.text
    [rubric] = report.json()["rubrics"]
    assert rubric["scale"] == "1-5" and rubric["items"] == 3 and rubric["judge_vs_humans"]["n"] == 6
    assert report.json()["unusable"] == []
    assert page.status_code == 200 and 'data-rubric="helpful"' in page.text and "unusable-labels" not in page.text


def test_labels_off_the_scale_or_of_nothing_are_refused_with_422(store):
    ids = _seed(store)
    base = {"rubric": "helpful", "annotator": "ana"}
    cases = [
        ({**base, "item": "c2", "score": 7}, "score", "not on the rubric's scale 1-5"),
        ({**base, "item": "c2", "score": 1e308}, "score", "not on the rubric's scale 1-5"),
        ({**base, "evaluation_id": ids["c2"], "score": 0}, "score", "not on the rubric's scale 1-5"),
        ('{"item": "c2", "rubric": "helpful", "score": Infinity, "annotator": "ana"}', "score", "finite"),
        ('{"item": "c2", "rubric": "helpful", "score": NaN, "annotator": "ana"}', "score", "finite"),
        ({**base, "item": "never-judged", "score": 3}, "item", "no stored rubric evaluation of item 'never-judged'"),
        ({**base, "item": "c2", "rubric": "kindness", "score": 3}, "rubric", "no rubric 'kindness' (rubrics: helpful)"),
        ({**base, "evaluation_id": ids["c2"], "rubric": "kindness", "passed": True}, "rubric", "no rubric 'kindness'"),
        ({**base, "evaluation_id": ids["c2"], "item": "c3", "score": 3}, "item", "not the evaluation's subject"),
    ]
    with _client(store) as c:
        for body, field, message in cases:
            r = _post(c, body)
            assert r.status_code == 422, (body, r.status_code, r.text)
            assert message in r.json()["detail"], (body, r.text)
            assert [e["loc"] for e in r.json()["errors"]] == [["body", field]], (body, r.text)
        assert c.get("/api/evaluation/labels").json() == []
        # on the scale, on an item the judge scored: stored
        assert _post(c, {**base, "item": "c2", "score": 5}).status_code == 201
        assert _post(c, {**base, "item": "c3", "passed": False}).status_code == 201


def test_stored_labels_the_calibration_cannot_use_are_listed_then_deleted(store):
    ids = _seed(store)
    at = datetime.now(timezone.utc)
    # Rows a store kept from before the labels were checked on the way in.
    kept = [lq.NewLabel(item="c2", rubric="helpful", annotator="ana", score=7.0),
            lq.NewLabel(item="c3", rubric="helpful", annotator="ana", score=1e308),
            lq.NewLabel(item="c3", rubric="helpful", annotator="ben", score=math.inf),
            lq.NewLabel(item="café 1", rubric="helpful", annotator="ben", passed=True)]
    bad = [store.write(lq.save_label, label, at).id for label in kept]
    with _client(store, api_token=TOKEN) as c:
        good = _post(c, {"evaluation_id": ids["café 1"], "rubric": "helpful", "score": 4, "annotator": "ana"}, AUTH)
        assert good.status_code == 201, good.text
        r = c.get("/api/evaluation/calibration", params={"resamples": 50})
        assert r.status_code == 200, r.text
        report = r.json()
        [rubric] = report["rubrics"]
        assert rubric["scale"] == "1-5" and rubric["items"] == 1  # the scale is the rubric's, not the labels'
        reasons = {u["id"]: u["reason"] for u in report["unusable"]}
        assert sorted(reasons) == sorted(bad)
        assert reasons[bad[0]] == "score 7 is off the rubric's scale 1-5"
        assert reasons[bad[1]] == "score 1e+308 is off the rubric's scale 1-5"
        assert reasons[bad[2]] == "score inf is not a whole number"
        assert reasons[bad[3]].startswith("a pass/fail label on a rubric labelled with scores")
        page = c.get("/evaluation/calibration")
        assert page.status_code == 200 and 'id="unusable-labels"' in page.text
        assert all(f'data-label="{i}"' in page.text for i in bad) and "off the rubric&#39;s scale 1-5" in page.text

        # DELETE is a write: the token, this server's own pages only, JSON
        path = f"/api/evaluation/labels/{bad[0]}"
        json_type = {"Content-Type": "application/json"}
        assert c.delete(path, headers=json_type).status_code == 401
        assert c.delete(path, headers={**AUTH, **json_type, "Origin": "http://evil.example"}).status_code == 403
        for i in bad:
            r = c.delete(f"/api/evaluation/labels/{i}", headers={**AUTH, **json_type})
            assert r.status_code == 200 and r.json()["id"] == i, r.text
        gone = c.delete(path, headers={**AUTH, **json_type})
        assert gone.status_code == 404 and f"no label with id {bad[0]}" in gone.text
        assert c.delete("/api/evaluation/labels/abc", headers={**AUTH, **json_type}).status_code == 422
        assert [x["id"] for x in c.get("/api/evaluation/labels").json()] == [good.json()["id"]]
        after = c.get("/api/evaluation/calibration", params={"resamples": 50}).json()
        assert after["unusable"] == [] and after["rubrics"][0]["items"] == 1
        assert 'id="unusable-labels"' not in c.get("/evaluation/calibration").text
