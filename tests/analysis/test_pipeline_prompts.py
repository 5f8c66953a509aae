"""A research pipeline's own prompts (planner, retrieval, synthesis) in the prompt lab: registered,
versioned and A/B tested like jurist's own, the pipeline given the routed text when it runs."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from jurist.analysis import prompt_version
from jurist.analysis.prompts import register_prompt
from jurist.config import Settings
from jurist.errors import InputError
from jurist.prompt_router import arm_of
from jurist.research import ResearchEvaluation, ResearchPipeline, research_config
from jurist.research import stages as st
from jurist.server import create_app
from jurist.store import prompt_routes

from tests.research.fakes import GOOD_ANSWER, GOOD_PLAN, GOOD_RETRIEVAL, SOURCES, FakeEvaluator

PLANNER = "Plan the research for: {query}. Write search queries."
RETRIEVAL = "Search the web for {search_query}."
SYNTHESIS = "Answer {query} from the sources only."
PLANNER_B = "Plan the research for: {query}. Write search queries, with the year when recency matters."


class Callbacks:
    """A pipeline's callbacks that keep the prompt text each call was given."""

    def __init__(self) -> None:
        self.given: dict[str, list[str]] = {"planner": [], "retrieval": [], "synthesis": []}

    async def planner(self, query: str, feedback: Any, mode: str | None, *, prompt: str) -> dict[str, Any]:
        self.given["planner"].append(prompt)
        return {"objective": query, "search_queries": [query]}

    async def search(self, query: str, plan: Any, *, prompt: str) -> list[Any]:
        self.given["retrieval"].append(prompt)
        return SOURCES

    async def synthesiser(self, query: str, sources: list[Any], feedback: str | None, *, prompt: str) -> str:
        self.given["synthesis"].append(prompt)
        return "An answer."


def _evaluation(config: Any, **kw: Any) -> ResearchEvaluation:
    evaluators = {st.PLAN: FakeEvaluator(st.PLAN, GOOD_PLAN), st.RETRIEVAL: FakeEvaluator(st.RETRIEVAL, GOOD_RETRIEVAL),
                  st.ANSWER: FakeEvaluator(st.ANSWER, GOOD_ANSWER)}
    return ResearchEvaluation(config, evaluators=evaluators, **kw)


def _pipeline(calls: Callbacks) -> ResearchPipeline:
    return ResearchPipeline(calls.planner, calls.search, calls.synthesiser, config=research_config({}),
                            evaluation=_evaluation,
                            prompts={"planner": PLANNER, "retrieval": RETRIEVAL, "synthesis": SYNTHESIS})


@pytest.fixture
def client(tmp_path):
    calls = Callbacks()
    settings = Settings.load(database_url=f"sqlite:///{tmp_path}/lab.db", home=str(tmp_path / ".jurist"))
    with TestClient(create_app(settings, research_pipeline=_pipeline(calls)), base_url="http://localhost") as c:
        c.calls = calls  # type: ignore[attr-defined]
        yield c


def test_the_pipelines_prompts_are_in_the_lab_and_an_ab_test_routes_them(client):
    names = {p["name"]: p for p in client.get("/api/prompts").json()}
    assert {"research.planner", "research.retrieval", "research.synthesis"} <= set(names)
    assert names["research.planner"]["versions"][0]["version"] == 1
    v1 = client.get("/api/prompts/research.planner/versions/1").json()
    assert v1["text"] == PLANNER and v1["note"] == "registered by the research pipeline"

    # nothing routed: the pipeline gets its own text, and the record says which
    body = client.post("/api/research/query", json={"query": "Latest tidal energy projects?"}).json()
    assert client.calls.given["planner"] == [PLANNER] and client.calls.given["synthesis"] == [SYNTHESIS]
    assert client.calls.given["retrieval"] == [RETRIEVAL]
    payload = client.get(f"/api/logs/sessions/{body['logId']}").json()["evaluation"]["payload"]
    assert payload["pipelinePrompts"]["research.planner"] == v1["hash"]

    # a new version, then an A/B test routes the runs between the two by their trace
    r = client.put("/api/prompts/research.planner", json={"text": PLANNER_B, "note": "recency"})
    assert r.status_code == 201, r.text
    v2 = r.json()
    assert v2["version"] == 2
    r = client.post("/api/prompt-tests", json={"prompt": "research.planner", "a": 1, "b": 2, "share": 0.5,
                                               "calls": 1000})
    assert r.status_code == 201, r.text
    test = r.json()
    assert client.get("/api/prompts/research.planner/active").json()["route"] == "test"
    route = prompt_routes.TestRoute(id=test["id"], created_at=test["created_at"], prompt="research.planner", a=1,
                                    b=2, hash_a=v1["hash"], hash_b=v2["hash"], share=0.5, calls=1000, alpha=None,
                                    better="higher")
    seen: dict[str, int] = {}
    for i in range(40):
        client.calls.given["planner"].clear()
        log_id = client.post("/api/research/query", json={"query": f"Tides question {i}?"}).json()["logId"]
        arm = arm_of(route, log_id)  # the run's trace is its log id
        assert client.calls.given["planner"] == [PLANNER_B if arm == "b" else PLANNER]
        used = client.get(f"/api/logs/sessions/{log_id}").json()["evaluation"]["payload"]["pipelinePrompts"]
        assert used["research.planner"] == (v2["hash"] if arm == "b" else v1["hash"])
        assert used["research.synthesis"] != used["research.planner"]  # not routed: its own text
        seen[arm] = seen.get(arm, 0) + 1
        if len(seen) == 2 and min(seen.values()) >= 2:
            break
    assert set(seen) == {"a", "b"}

    # the test's report compares the runs of each version (their research scores)
    report = client.get(f"/api/prompt-tests/{test['id']}").json()
    assert report["comparison"]["n_a"] == seen["a"] and report["comparison"]["n_b"] == seen["b"]
    # so does the static comparison of the two versions (every query a subject of its own)
    static = client.get("/api/prompts/research.planner/compare", params={"a": 1, "b": 2}).json()
    assert (static["n_a"], static["n_b"]) == (seen["a"] + 1, seen["b"])  # version 1 also ran before the test


async def test_a_changed_text_becomes_the_next_version_and_the_same_text_stays(store):
    first = await register_prompt(store, "app.planner", "Plan {query}.")
    assert first.version == "1"
    assert (await register_prompt(store, "app.planner", "Plan {query}.")).version == "1"
    changed = await register_prompt(store, "app.planner", "Plan {query} step by step.")
    assert changed.version == "2"
    assert (await prompt_version(store, "app.planner", 2)).text == "Plan {query} step by step."
    with pytest.raises(InputError, match="jurist's own prompts"):
        await register_prompt(store, "panel_role", "Judge {x}.")
    with pytest.raises(InputError, match="must be 1 to 200"):
        await register_prompt(store, "bad name", "text")


def test_a_pipeline_prompt_needs_a_callback_that_takes_it():
    calls = Callbacks()

    async def planner(query: str, feedback: Any, mode: str | None) -> dict[str, Any]:
        return {}

    with pytest.raises(InputError, match="must take a 'prompt' keyword"):
        ResearchPipeline(planner, calls.search, calls.synthesiser, prompts={"planner": PLANNER})
    with pytest.raises(InputError, match="did you mean 'synthesis'"):
        ResearchPipeline(calls.planner, calls.search, calls.synthesiser, prompts={"synthesys": SYNTHESIS})
