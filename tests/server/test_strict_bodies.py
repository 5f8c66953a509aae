"""Request bodies of the REST API: an unknown field is a 422 naming the field meant; true and false
are not numbers. (The gate proxy's /v1/ bodies pass unknown OpenAI fields through: not tested here.)"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from jurist.config import Settings
from jurist.server import create_app

RUBRICS = {"scale": [1, 5], "rubrics": [{"id": "helpful", "name": "Helpful", "scoring_criteria": "5 = very"}]}
SESSION = [{"role": "user", "content": "How do I reset my password?"},
           {"role": "assistant", "content": "Use the 'Forgot password' link."}]
LABEL = {"item": "s1", "rubric": "helpful", "annotator": "ana"}


@pytest.fixture
def client(tmp_path):
    with TestClient(create_app(Settings.load(home=str(tmp_path / ".jurist"))), base_url="http://localhost") as c:
        yield c


@pytest.mark.parametrize("method, url, body, detail", [
    ("post", "/api/evaluate", {"rubrics": RUBRICS, "sesion": SESSION},
     "unknown field 'sesion' (did you mean 'session'?)"),
    ("post", "/api/evaluate", {"rubrics": RUBRICS, "session": SESSION, "judge_model": "x/y"},
     "unknown field 'judge_model' (did you mean 'judge'?)"),
    ("post", "/api/evaluation/labels", {**LABEL, "scor": 4}, "unknown field 'scor' (did you mean 'score'?)"),
    ("post", "/api/evaluation/analyze", {"min_cout": 5}, "unknown field 'min_cout' (did you mean 'min_count'?)"),
    ("post", "/api/prompt-tests", {"prompt": "rubric_judge", "a": 1, "b": 2, "shares": 0.5},
     "unknown field 'shares' (did you mean 'share'?)"),
    ("put", "/api/prompts/rubric_judge/active", {"verison": 2}, "unknown field 'verison' (did you mean 'version'?)"),
    ("post", "/api/research/evaluate", {"querry": "why?"}, "unknown field 'querry' (did you mean 'query'?)"),
])
def test_an_unknown_body_field_is_a_422_naming_the_field_meant(client, method, url, body, detail):
    r = getattr(client, method)(url, json=body)
    assert r.status_code == 422, r.text
    assert r.json()["detail"] == f"invalid request: {detail}"  # the typo alone: not also the field it misses
    assert [e["msg"] for e in r.json()["errors"]] == [detail]


def test_an_unknown_field_without_a_close_name_lists_the_fields(client):
    r = client.post("/api/evaluation/analyze", json={"colour": "red"})
    assert r.status_code == 422
    assert r.json()["detail"] == ("invalid request: unknown field 'colour' (fields: kind, since, until, writer, "
                                  "min_count, alpha, limit)")


@pytest.mark.parametrize("method, url, body, field", [
    ("post", "/api/evaluation/labels", {**LABEL, "score": True}, "score"),
    ("post", "/api/evaluation/analyze", {"min_count": True}, "min_count"),
    ("post", "/api/prompt-tests", {"prompt": "rubric_judge", "a": True, "b": 2}, "a"),
    ("put", "/api/prompts/rubric_judge/active", {"version": True}, "version"),
])
def test_booleans_are_not_numbers_in_bodies(client, method, url, body, field):
    r = getattr(client, method)(url, json=body)
    assert r.status_code == 422, r.text
    assert f"{field}: expected a number, got true" in r.json()["detail"]


def test_a_typo_inside_the_posted_session_or_rubrics_names_the_line_or_rubric(client):
    r = client.post("/api/evaluate", json={"rubrics": RUBRICS, "session": [{"role": "user", "contnet": "hi"}]})
    assert r.status_code == 422
    assert r.json()["detail"] == "request body: session:1: unknown field 'contnet' (did you mean 'content'?)"
    rubrics = {"rubrics": [{**RUBRICS["rubrics"][0], "weigth": 2}]}
    r = client.post("/api/evaluate", json={"rubrics": rubrics, "session": SESSION})
    assert r.status_code == 422
    assert r.json()["detail"] == ("request body: rubrics: rubric 'helpful': unknown field 'weigth' "
                                  "(did you mean 'weight'?)")


def test_a_422_body_is_byte_for_byte_the_detail_and_each_problems_loc_and_msg(client):
    r = client.post("/api/evaluation/labels", json={**LABEL, "scor": 4, "annotator": 3})
    assert r.status_code == 422 and r.content == (
        b'{"detail":"invalid request: unknown field \'scor\' (did you mean \'score\'?); annotator: Input should be a '
        b'valid string","errors":[{"loc":["body","scor"],"msg":"unknown field \'scor\' (did you mean \'score\'?)"},'
        b'{"loc":["body","annotator"],"msg":"Input should be a valid string"}]}')
