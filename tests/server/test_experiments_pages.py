"""Datasets and experiments over HTTP: the JSON routes, the dashboard pages, a stored evaluation added to
a dataset from its trace page; on SQLite and PostgreSQL, with what the runs wrote escaped."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from markupsafe import escape

from jurist.config import Settings
from jurist.experiments.compare import compare_experiments
from jurist.experiments.records import DatasetItem
from jurist.models import script
from jurist.server import create_app
from jurist.server.dashboard_experiments import PAGE_ITEMS
from jurist.store import Store
from jurist.store import experiments as xq
from tests.conftest import _CLEARED, REPO, fresh_database, not_installed
from tests.experiments.compare_data import item, run, seed
from tests.server.test_dashboard_pages import XSS, rubric_set, session

IDS = [f"q{i:02d}" for i in range(20)]
TOKEN = "s3cret-token-for-tests"


def _evaluations(store: Store) -> dict[str, str]:
    """Rubric evaluations of three sessions (one answer XSS-laden); evaluation ids by session."""
    from jurist.rubrics.api import evaluate

    async def go() -> None:
        for sid, answer in (("s-paris", "Paris."), ("s-xss", f"Answer {XSS}"), ("s-two", "Berlin.")):
            script("xj", '{"score": 4, "reasoning": "fine"}')
            user = "What is the capital of France?" if sid != "s-xss" else f"Question {XSS}?"
            await evaluate(rubric_set(), session(sid, user, answer), judge="scripted/xj", settings=Settings(),
                           store=store)

    asyncio.run(go())
    store.flush()
    return {row["subject_id"]: row["id"] for row in store.evaluations(kind="rubric")}


@pytest.fixture(params=["sqlite", "postgresql"])
def seeded(request, tmp_path: Path) -> Iterator[tuple[Store, dict[str, str]]]:
    with fresh_database(request.param, tmp_path, prefix="jurist_experiments") as url:
        store = Store(url)
        try:
            evs = _evaluations(store)
            good = {i: (5.0, 4.0) for i in IDS}
            base = run("base", good)
            base[0] = item("base", IDS[0], {"correct": 5.0, "concise": 4.0}, evaluation_id=evs["s-paris"])
            base[1] = item("base", IDS[1], {"correct": 5.0, "concise": 4.0}, answer=f"Answer {XSS}",
                           evaluation_id=evs["s-xss"])
            worse = run("worse", dict(good, **{i: (2.0, 4.0) for i in IDS[:8]}))
            seed(store, {"base": ({"cost": 0.125}, base), "worse": ({"cost": None}, worse),
                         "other-judge": ({"judges": ["openai/other"]}, run("other-judge", good))}, IDS)
            yield store, evs
        finally:
            store.close()


def client(store: Store, **settings: object) -> TestClient:
    return TestClient(create_app(Settings(**settings), store=store), base_url="http://localhost")


def test_the_json_routes(seeded):
    store, _ = seeded
    with client(store) as c:
        [qa] = c.get("/api/datasets").json()
        assert qa["name"] == "qa" and [v["dataset_version"] for v in qa["versions"]] == ["d1"]
        items = c.get("/api/datasets/qa/items").json()
        assert [i["id"] for i in items["items"]] == IDS and items["version"]["number"] == 1
        assert c.get("/api/datasets/qa/items", params={"version": "1"}).json()["version"]["dataset_version"] == "d1"
        assert c.get("/api/datasets/qa/items", params={"version": "abc"}).status_code == 404
        assert c.get("/api/datasets/nope/items").status_code == 404

        listed = {e["record"]["name"]: e for e in c.get("/api/experiments").json()}
        assert set(listed) == {"base", "worse", "other-judge"}
        assert listed["base"]["pass_rate"] == 1.0 and listed["worse"]["pass_rate"] == 12 / 20
        assert listed["worse"]["passed"] == 12 and listed["worse"]["judged"] == 20
        one = c.get("/api/experiments/base").json()
        assert len(one["items"]) == 20 and one["record"]["cost_usd"] == 0.125
        assert c.get("/api/experiments/nope").status_code == 404

        got = c.get("/api/experiments/base/compare/worse", params={"resamples": 300, "seed": 4}).json()
        runs = store.read(lambda conn: [xq.get_experiment(conn, n) for n in ("base", "worse")])
        items_of = {n: store.read(xq.get_experiment_items, n) for n in ("base", "worse")}
        want = compare_experiments(runs[0], items_of["base"], runs[1], items_of["worse"], resamples=300, seed=4,
                                   inputs={i: f"Question {i}?" for i in IDS})
        assert got == want.model_dump(mode="json")  # the same as the CLI's --json
        assert got["regressions"] == IDS[:8]
        refused = c.get("/api/experiments/base/compare/other-judge")
        assert refused.status_code == 400 and "--allow-different" in refused.json()["detail"]
        allowed = c.get("/api/experiments/base/compare/other-judge", params={"allow_different": "true"}).json()
        assert allowed["allowed_different"] is True
        assert c.get("/api/experiments/base/compare/worse", params={"alpha": 2}).status_code == 422


def test_the_pages(seeded):
    store, evs = seeded
    with client(store) as c:
        page = c.get("/evaluation/datasets").text
        assert 'href="/evaluation/datasets/qa"' in page and 'href="/evaluation/experiments"' in page  # the nav
        page = c.get("/evaluation/datasets/qa").text
        assert page.count('<tr data-id="q') == 20 and "Answer q07" in page and 'id="items-cut"' not in page
        big = [DatasetItem(id=f"b{i:04d}", input=f"Q{i}?") for i in range(PAGE_ITEMS + 1)]
        store.write(xq.add_dataset_version, "big", "b1", big, None)
        page = c.get("/evaluation/datasets/big").text
        assert page.count('<tr data-id="b') == PAGE_ITEMS and 'id="items-cut"' in page  # the page says it cut
        assert c.get("/evaluation/datasets/nope").status_code == 404

        page = c.get("/evaluation/experiments").text
        row = page.split('data-name="worse"', 1)[1].split("</tr>", 1)[0]
        assert "qa@d1" in row and "openai/app" in row and "openai/judge" in row and "60.0%" in row
        assert "unknown" in row  # no cost recorded: unknown, not $0
        assert "$0.1250" in page.split('data-name="base"', 1)[1].split("</tr>", 1)[0]
        assert 'action="/evaluation/compare"' in page

        page = c.get("/evaluation/experiments/base").text
        assert f'href="/evaluation/evaluations/{evs["s-paris"]}"' in page
        assert XSS not in page and str(escape(f"Answer {XSS}")) in page
        assert c.get("/evaluation/experiments/nope").status_code == 404

        page = c.get("/evaluation/compare", params={"a": "base", "b": "worse"}).text
        assert re.search(r'id="regression-count">8<', page)
        assert '<tr data-key="correct" class="drop">' in page
        assert XSS not in page
        refused = c.get("/evaluation/compare", params={"a": "base", "b": "other-judge"}).text
        assert 'id="compare-problem"' in refused and "judge models" in refused and 'id="allow-different"' in refused
        allowed = c.get("/evaluation/compare", params={"a": "base", "b": "other-judge", "allow_different": "true"})
        assert 'id="not-like"' in allowed.text
        assert c.get("/evaluation/compare", params={"a": "base", "b": "nope"}).status_code == 404


def test_an_evaluation_becomes_a_dataset_item(seeded):
    store, evs = seeded
    with client(store) as c:
        trace = c.get(f"/evaluation/evaluations/{evs['s-xss']}").text
        assert f'href="/evaluation/evaluations/{evs["s-xss"]}/add-to-dataset"' in trace
        page = c.get(f"/evaluation/evaluations/{evs['s-xss']}/add-to-dataset").text
        assert XSS not in page and str(escape(f"Question {XSS}?")) in page
        assert 'id="add-item-form"' in page

        r = c.post("/api/datasets/from-traces/items", json={"evaluation_id": evs["s-paris"], "expected": "Paris"})
        assert r.status_code == 201, r.text
        first = r.json()
        assert first["version"]["number"] == 1 and first["version"]["items"] == 1
        assert first["item"] == {"id": "s-paris", "input": "What is the capital of France?", "expected": "Paris",
                                 "metadata": {"from_evaluation": evs["s-paris"], "judged_answer": "Paris."}}
        r = c.post("/api/datasets/from-traces/items", json={"evaluation_id": evs["s-xss"], "expected": "An answer",
                                                             "item_id": "xss-1"})
        second = r.json()
        assert r.status_code == 201 and second["version"]["number"] == 2 and second["version"]["items"] == 2
        assert second["version"]["dataset_version"] != first["version"]["dataset_version"]
        items = c.get("/api/datasets/from-traces/items").json()["items"]
        assert [i["id"] for i in items] == ["s-paris", "xss-1"] and items[1]["input"] == f"Question {XSS}?"
        assert "from-traces" in c.get("/evaluation/datasets").text

        again = c.post("/api/datasets/from-traces/items", json={"evaluation_id": evs["s-paris"], "expected": "x"})
        assert again.status_code == 422 and "already has an item 's-paris'" in again.text
        assert c.post("/api/datasets/from-traces/items",
                      json={"evaluation_id": "nope", "expected": "x"}).status_code == 404
        typo = c.post("/api/datasets/from-traces/items", json={"evaluation_id": evs["s-two"], "expected": "x",
                                                                "item": "y"})
        assert typo.status_code == 422 and "item_id" in typo.text  # an unknown field, with the closest name
        assert c.post("/api/datasets/bad name/items", json={"evaluation_id": evs["s-two"],
                                                             "expected": "x"}).status_code == 422
    with client(store, api_token=TOKEN) as c:
        body = {"evaluation_id": evs["s-two"], "expected": "Berlin"}
        assert c.post("/api/datasets/from-traces/items", json=body).status_code == 401
        ok = c.post("/api/datasets/from-traces/items", json=body, headers={"Authorization": f"Bearer {TOKEN}"})
        assert ok.status_code == 201 and ok.json()["version"]["number"] == 3


WITHOUT_ANALYSIS = """
import json, sys
from fastapi.testclient import TestClient
from jurist.config import Settings
from jurist.server import create_app
from jurist.server.dashboard_experiments import PAGE_ITEMS
from jurist.store import Store
from tests.experiments.compare_data import run, seed

store = Store(sys.argv[1])
ids = [f"q{i:02d}" for i in range(8)]
seed(store, {"a": ({}, run("a", {i: (5.0, 4.0) for i in ids})), "b": ({}, run("b", {i: (2.0, 4.0) for i in ids}))},
     ids)
out = {}
with TestClient(create_app(Settings(), store=store), base_url="http://localhost") as client:
    for url in ("/evaluation/experiments", "/evaluation/experiments/a", "/evaluation/datasets/qa",
                "/evaluation/compare?a=a&b=b", "/api/experiments", "/api/experiments/a/compare/b"):
        r = client.get(url)
        out[url] = {"status": r.status_code, "text": r.text}
out["imported"] = sorted(m for m in sys.modules if m.split(".")[0] in ("scipy", "krippendorff", "plotly")
                         and sys.modules[m] is not None)
print(json.dumps(out))
"""


def test_without_the_analysis_extra_only_the_comparison_needs_it(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if k not in _CLEARED}
    env.update(JURIST_HOME=str(tmp_path / ".jurist"), PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-c", not_installed("scipy", "krippendorff", "plotly") + WITHOUT_ANALYSIS,
                           f"sqlite:///{tmp_path / 'x.db'}"], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["imported"] == []
    for url in ("/evaluation/experiments", "/evaluation/experiments/a", "/evaluation/datasets/qa", "/api/experiments"):
        assert out[url]["status"] == 200, (url, out[url]["text"][:500])
    page = out["/evaluation/compare?a=a&b=b"]
    assert page["status"] == 200 and "Comparing experiments needs the analysis extra" in page["text"]
    api = out["/api/experiments/a/compare/b"]
    assert api["status"] == 501 and "Comparing experiments needs the analysis extra" in json.loads(api["text"])["detail"]
