"""The prompt lab's routes over HTTP and on the dashboard: activate a version, start, watch and end an A/B test."""

from __future__ import annotations

import asyncio

import pytest
from fastapi.testclient import TestClient

from jurist.config import Settings
from jurist.gate import Gate, GateConfig
from jurist.judges.templates import builtin
from jurist.models.scripted import script
from jurist.runtime import Runtime
from jurist.server import create_app
from jurist.store import Store
from tests.gate.helpers import good

TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
MARK_B = "VERSION-B-MARKER: judge strictly."
SHIPPED = builtin("gate_quality")


@pytest.fixture
def store(tmp_path):
    s = Store(f"sqlite:///{tmp_path}/lab.db")
    yield s
    s.close()


@pytest.fixture
def client(store):
    with TestClient(create_app(Settings(api_token=TOKEN), store=store), base_url="http://localhost") as c:
        yield c


def _gate_calls(store: Store, n: int) -> None:
    """``n`` gated answers judged by scripted/judge, which scores version B's prompt lower."""
    script("gen", default="An answer.")
    script("judge", default=lambda req: good(0.3 if any(MARK_B in m.text for m in req.messages) else 0.9))

    async def run() -> None:
        g = Gate(GateConfig(strategy="blocking"), runtime=Runtime(store=store), judge="scripted/judge")
        for i in range(n):
            await g.run([{"role": "user", "content": f"Question {i}?"}], "scripted/gen", wait_for_evaluation=True)
        await store.aflush()

    asyncio.run(run())


def _new_version(client: TestClient) -> None:
    r = client.put("/api/prompts/gate_quality", json={"text": SHIPPED.text + f"\n{MARK_B}\n"}, headers=AUTH)
    assert r.status_code == 201 and r.json()["version"] == 2


def test_activate_a_version(client, store):
    assert client.get("/api/prompts/gate_quality/active").json()["route"] == "shipped"
    _new_version(client)
    r = client.put("/api/prompts/gate_quality/active", json={"version": 2}, headers=AUTH)
    assert r.status_code == 200 and r.json()["route"] == "active" and r.json()["version"] == 2
    assert client.put("/api/prompts/gate_quality/active", json={"version": 9}, headers=AUTH).status_code == 404
    assert client.get("/api/prompts/nope/active").status_code == 404
    _gate_calls(store, 1)
    assert store.calls(purpose="quality_evaluation")[0]["template_hash"] != SHIPPED.hash
    page = client.get("/evaluation/prompts/gate_quality")
    assert page.status_code == 200 and "Calls use version 2" in page.text


def test_writes_follow_the_guard(client):
    _new_version(client)
    body = {"prompt": "gate_quality", "a": 1, "b": 2, "share": 0.5, "calls": 10}
    assert client.post("/api/prompt-tests", json=body).status_code == 401
    assert client.put("/api/prompts/gate_quality/active", json={"version": 2}).status_code == 401
    cross = client.post("/api/prompt-tests", json=body, headers={**AUTH, "Origin": "http://evil.example"})
    assert cross.status_code == 403
    form = client.post("/api/prompt-tests", content="prompt=gate_quality",
                       headers={**AUTH, "Content-Type": "application/x-www-form-urlencoded"})
    assert form.status_code == 415
    bad = client.post("/api/prompt-tests", json={**body, "share": 1.5}, headers=AUTH)
    assert bad.status_code == 422
    no_end = client.post("/api/prompt-tests", json={**body, "calls": None}, headers=AUTH)
    assert no_end.status_code == 400 and "end condition" in no_end.json()["detail"]


def test_a_running_test_shows_its_comparison_and_ends_when_significant(client, store):
    pytest.importorskip("scipy")
    _new_version(client)
    r = client.post("/api/prompt-tests", json={"prompt": "gate_quality", "a": 1, "b": 2, "share": 0.5,
                                               "calls": 1000, "alpha": 0.01, "better": "higher"}, headers=AUTH)
    assert r.status_code == 201
    test = r.json()
    assert test["running"] and test["calls_a"] == 0
    assert client.get("/api/prompts/gate_quality/active").json() == {
        "prompt": "gate_quality", "route": "test", "version": None, "test_id": test["id"], "since": test["created_at"]}
    _gate_calls(store, 6)
    running = client.get(f"/api/prompt-tests/{test['id']}").json()
    assert running["running"] and running["calls_a"] + running["calls_b"] == 6
    assert running["comparison"]["n_a"] + running["comparison"]["n_b"] == 6
    assert running["calls_by_judge"] == [{"judge_model": "scripted/judge", "calls_a": running["calls_a"],
                                          "calls_b": running["calls_b"]}]
    assert running["comparison"]["judge_model"] == "scripted/judge" and running["comparison"]["design"] == "randomized"
    page = client.get(f"/evaluation/prompts/gate_quality/tests/{test['id']}")
    assert page.status_code == 200 and 'id="verdict"' in page.text and "running" in page.text
    assert "by scripted/judge" in page.text and 'id="ab-judges"' in page.text
    _gate_calls(store, 40)
    done = client.get(f"/api/prompt-tests/{test['id']}").json()
    assert not done["running"] and done["comparison"]["significant"]
    assert done["comparison"]["mean_a"] > done["comparison"]["mean_b"]
    assert "version 1 kept" in done["ended_because"]
    assert client.get("/api/prompts/gate_quality/active").json()["version"] == 1
    listed = client.get("/api/prompt-tests", params={"prompt": "gate_quality"}).json()
    assert [t["id"] for t in listed] == [test["id"]] and listed[0]["comparison"] is None
    page = client.get(f"/evaluation/prompts/gate_quality/tests/{test['id']}")
    assert "ended" in page.text and "version 1 kept" in page.text


def test_stop_a_test(client):
    _new_version(client)
    test = client.post("/api/prompt-tests", json={"prompt": "gate_quality", "a": 1, "b": 2, "calls": 50},
                       headers=AUTH).json()
    assert client.post(f"/api/prompt-tests/{test['id']}/stop", json={}).status_code == 401
    r = client.post(f"/api/prompt-tests/{test['id']}/stop", json={"version": 2}, headers=AUTH)
    assert r.status_code == 200 and not r.json()["running"]
    assert client.get("/api/prompts/gate_quality/active").json()["version"] == 2
    again = client.post(f"/api/prompt-tests/{test['id']}/stop", json={}, headers=AUTH)
    assert again.status_code == 400 and "already ended" in again.json()["detail"]
    assert client.get("/api/prompt-tests/nope").status_code == 404
    assert client.get(f"/evaluation/prompts/gate_quality/tests/{test['id']}").status_code == 200
    assert client.get(f"/evaluation/prompts/rubric_judge/tests/{test['id']}").status_code == 404
    # The pattern analysis never takes a test for one of its runs.
    assert client.get("/api/evaluation/patterns", params={"run_id": test["id"]}).status_code == 404
