"""One check of a dataset item, whatever it comes from: a file's line, or a stored evaluation added from
its trace page (the route refuses what a dataset file would, naming the request's field)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from jurist.config import Settings
from jurist.errors import InputError
from jurist.experiments.datasets import MAX_TEXT_CHARS, check_item
from jurist.experiments.records import DatasetItem
from jurist.server import create_app
from jurist.store import Store
from tests.server.test_experiments_pages import _evaluations


def test_an_item_from_a_dict_is_checked_with_its_place():
    item = check_item({"id": 7, "input": [{"role": "user", "content": "Hi?"}], "expected": ["Hello"]}, "made.jsonl", 3)
    assert item == DatasetItem(id="7", input=[{"role": "user", "content": "Hi?"}], expected=["Hello"])
    with pytest.raises(InputError) as no_line:
        check_item({"id": "a", "input": "Hi?", "expect": "x"}, "evaluation e1")
    assert str(no_line.value).startswith("evaluation e1: ") and "'expected'" in no_line.value.reason
    with pytest.raises(InputError) as turn:
        check_item({"id": "a", "input": [{"role": "user", "content": "Hi?"}, {"role": "assistant", "content": "Yo"}]},
                   "made.jsonl", 9)
    assert turn.value.line == 9 and "the user's turn" in turn.value.reason
    with pytest.raises(InputError, match="expected must be text"):
        check_item({"id": "a", "input": "Hi?", "expected": 4}, "made.jsonl", 1)


def test_the_trace_route_refuses_what_a_dataset_file_would(tmp_path):
    with Store(f"sqlite:///{tmp_path}/t.db") as store:
        evs = _evaluations(store)
        with TestClient(create_app(Settings(), store=store), base_url="http://localhost") as c:
            big = {"evaluation_id": evs["s-paris"], "expected": "Paris", "metadata": {"notes": "x" * MAX_TEXT_CHARS}}
            r = c.post("/api/datasets/t/items", json=big)
            assert r.status_code == 422, r.text
            [err] = r.json()["errors"]
            assert err["loc"] == ["body", "expected"] and f"at most {MAX_TEXT_CHARS:,}" in err["msg"]
            assert f"evaluation {evs['s-paris']}" in err["msg"]
            ok = c.post("/api/datasets/t/items", json={"evaluation_id": evs["s-paris"], "expected": "Paris"})
            assert ok.status_code == 201 and ok.json()["item"]["id"] == "s-paris"
