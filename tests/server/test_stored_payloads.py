"""The trace pages and the trace API read stored payloads as their models.

Rows stored before payloads had ``kind`` and ``version`` still show; a payload
of an unknown kind, or one that does not fit its kind, is shown as stored with
the reason, never a server error.
"""

from __future__ import annotations

import html

import pytest
from fastapi.testclient import TestClient

from jurist.config import Settings
from jurist.server import create_app
from jurist.store import Store
from tests.conftest import fresh_database
from tests.test_payloads import LATER, OLD_ROWS, without_later

SECTION = {"rubric": "rubric-section", "gate": "gate-section", "research": "research-section",
           "checklist": "checklist-section"}
ODD = {"odd-kind": ("verdict", {"score": 3, "note": "<b>kept as text</b>"}),
       "odd-gate": ("gate", {"answer": "hi", "attempts": "not a list"})}


def row(evaluation_id: str, kind: str, payload: dict) -> dict:
    return {"id": evaluation_id, "kind": kind, "subject_id": f"subject-{evaluation_id}", "status": "scored",
            "trace_id": None, "score": None, "max_score": None, "percentage": None, "judge_model": None,
            "rubrics_version": None, "source": None, "payload": payload}


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request, tmp_path_factory):
    with fresh_database(request.param, tmp_path_factory.mktemp("payloads"), "jurist_payloads") as url:
        with Store(url) as s:
            for i, (kind, payload) in enumerate(OLD_ROWS):
                s.save_evaluation(row(f"old-{i}", kind, payload), [])
            for evaluation_id, (kind, payload) in ODD.items():
                s.save_evaluation(row(evaluation_id, kind, payload), [])
            s.flush()
            yield s


@pytest.fixture
def client(store):
    with TestClient(create_app(Settings(), store=store), base_url="http://localhost") as c:
        yield c


def test_rows_stored_before_kind_show_their_section(client):
    for i, (kind, stored) in enumerate(OLD_ROWS):
        page = client.get(f"/evaluation/evaluations/old-{i}")
        assert page.status_code == 200, (kind, page.text[:300])
        assert f'id="{SECTION[kind]}"' in page.text and 'id="payload-error"' not in page.text
        if kind == "research":
            runtime = client.get(f"/evaluation/research/old-{i}")
            assert runtime.status_code == 200 and 'id="payload-error"' not in runtime.text
            assert html.escape(stored["userQuery"], quote=False) in runtime.text
            assert 'id="stage-plan"' in runtime.text


def test_the_api_gives_old_rows_their_kind_and_version(client):
    for i, (kind, stored) in enumerate(OLD_ROWS):
        body = client.get(f"/api/evaluation/sessions/old-{i}").json()
        payload = without_later(kind, body["evaluation"]["payload"])
        assert payload["kind"] == kind and payload["version"] == "1.0" and body["payload_error"] is None
        later = LATER.get(kind, {})  # fields added since, at their defaults
        assert {k: payload[k] for k in later} == later
        assert {k: v for k, v in payload.items() if k not in ({"kind", "version"} - set(stored)) | set(later)} == stored


def test_an_unknown_kind_is_shown_as_stored_with_the_reason(client):
    page = client.get("/evaluation/evaluations/odd-kind")
    assert page.status_code == 200
    assert "unknown payload kind &#39;verdict&#39;" in page.text
    assert "&lt;b&gt;kept as text&lt;/b&gt;" in page.text and "<b>kept as text</b>" not in page.text
    body = client.get("/api/evaluation/sessions/odd-kind").json()
    assert body["evaluation"]["payload"] == ODD["odd-kind"][1]
    assert "unknown payload kind 'verdict'" in body["payload_error"]
    assert client.get("/evaluation/explorer").status_code == 200


def test_a_payload_that_does_not_fit_its_kind_is_shown_with_the_reason(client):
    page = client.get("/evaluation/evaluations/odd-gate")
    assert page.status_code == 200 and 'id="payload-error"' in page.text and "attempts" in page.text
    assert 'id="gate-section"' not in page.text
    body = client.get("/api/evaluation/sessions/odd-gate").json()
    assert body["evaluation"]["payload"] == ODD["odd-gate"][1] and "gate payload does not fit" in body["payload_error"]


def test_the_research_view_of_a_payload_that_is_not_a_research_record(client, store):
    store.save_evaluation(row("odd-research", "research", {"userQuery": "q", "planEvaluation": 7}), [])
    store.flush()
    page = client.get("/evaluation/research/odd-research")
    assert page.status_code == 200 and 'id="payload-error"' in page.text and "research payload does not fit" in page.text


def test_a_checklist_turn_with_undecided_points_says_so_on_its_page(client, store):
    from jurist.checklist import BatchEvaluation, ChecklistTurn

    ev = BatchEvaluation(recalled_point_ids=["a"], confidence_per_point={"a": 0.9}, undecided_ids=["b"],
                         reason="uncertain: the local judge cannot decide whether the text expresses '<i>B</i>'")
    turn = ChecklistTurn.of(ev, id="t-undecided", session_id="s1", message_seq=1, mode="recall",
                            unchecked=["a", "b"], title="T", learner="ada")
    store.save_evaluation(row("undecided-turn", "checklist", turn.to_json()), [])
    store.flush()
    page = client.get("/evaluation/evaluations/undecided-turn")
    assert page.status_code == 200 and 'id="undecided"' in page.text
    assert "The judge could not decide b: not counted as recalled, still unchecked." in page.text
    assert "&lt;i&gt;B&lt;/i&gt;" in page.text and "<i>B</i>" not in page.text
