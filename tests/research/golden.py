"""The research files as written (``jurist export``'s folder, the stored records, the API's
answer) and a panel's ``PanelResult.to_json()`` with an escalation and a failed role:
produced on the scripted provider, compared with ``data/golden/*.json`` (see
:mod:`tests.golden`). ``python -m tests.research.golden --write`` writes those files."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from tests.golden import dumps, isolated_env, read_tree, text

DATA = Path(__file__).parent / "data" / "golden"
QUERY = "What causes tides and how high do spring tides get?"
ROLES = ("intent_analyst", "coverage_checker", "quality_assessor", "fact_checker")
SOURCES = [{"id": "a", "title": "A", "url": "https://a.example", "content": "the moon pulls the sea"},
           "plain text on spring tides"]
CRITIC = json.dumps({"passed": False, "scores": {"intent_alignment": 0.9, "query_coverage": 0.3,
                                                 "scope_appropriateness": 0.9},
                     "failure_type": "missing_coverage", "critique": "spring tides are not searched",
                     "recommendation": "targeted_fix",
                     "specific_issues": [{"issue": "no query on spring tides", "fix": "add 'spring tide height'"}]})


def _schema(request: Any) -> dict[str, Any]:
    return dict(getattr(request, "response_schema", None) or {})


def _score(dim: str, prompt: str) -> float:
    return 0.3 if dim == "query_coverage" and "plan 1" in prompt else 0.9


def _role(request: Any) -> str:
    prompt = text(request.messages)
    dims = list(_schema(request)["properties"]["scores"]["properties"])
    return json.dumps({"scores": {d: _score(d, prompt) for d in dims}, "confidence": 0.8, "critique": "ok"})


def _escalation(request: Any) -> str:
    prompt = text(request.messages)
    props = _schema(request)["properties"]
    return json.dumps({"panel_review": "the panel is right", "verdict": "agree",
                       "trust": {r: 0.9 for r in props["trust"]["properties"]},
                       "scores": {d: _score(d, prompt) for d in props["scores"]["properties"]}})


async def _planner_n(n: list[int]) -> dict[str, Any]:
    n.append(len(n) + 1)
    return {"objective": f"plan {len(n)}", "search_queries": [f"query {len(n)}"]}


async def _research(tmp: Path) -> dict[str, Any]:
    from jurist.config import Settings
    from jurist.models import script
    from jurist.research import ResearchEvaluation, research_config
    from jurist.research.export import export_record
    from jurist.store import Store

    script("panel", default=_role)
    script("broken", default="not a JSON reply")
    script("escalation", default=_escalation)
    script("critic", CRITIC)
    evaluators = {r: {"model": "scripted/panel"} for r in ROLES}
    evaluators["faithfulness_judge"] = {"model": "scripted/broken"}  # a failed role in retrieval and answer
    cfg = research_config({"evaluators": evaluators, "escalation_model": "scripted/escalation",
                           "critic_model": "scripted/critic"})
    planned: list[int] = []

    async def planner(query: str, feedback: Any, mode: str | None) -> dict[str, Any]:
        return await _planner_n(planned)

    async def synthesiser(query: str, sources: list[Any], feedback: str | None) -> str:
        return "Spring tides rise about 20% above the mean." if feedback is None else "Tides follow the moon."

    store = Store(f"sqlite:///{tmp}/golden.db")
    files: dict[str, Any] = {}
    try:
        async with ResearchEvaluation(cfg, settings=Settings.load(max_retries=0), store=store) as ev:
            plan = (await ev.evaluate_plan(QUERY, planner)).plan
            await ev.evaluate_retrieval(QUERY, plan, SOURCES)
            await ev.evaluate_answer(QUERY, SOURCES, synthesiser)
            rec = await ev.save()
        # every role fails: a skipped stage
        broken = research_config({"evaluators": {r: {"model": "scripted/broken"} for r in
                                                 (*ROLES, "faithfulness_judge")}})
        async with ResearchEvaluation(broken, settings=Settings.load(max_retries=0), store=store) as ev2:
            await ev2.evaluate_retrieval(QUERY, {"objective": "x"}, SOURCES)
            skipped = await ev2.save()
        folder = export_record(store, rec.log_id, tmp / "export")
        files.update({f"export/{name}": data for name, data in read_tree(folder).items()})
        files["stored/research.payload"] = store.evaluation(rec.log_id, kind="research").payload
        files["stored/skipped.payload"] = store.evaluation(skipped.log_id, kind="research").payload
        files["summary"] = rec.summary()
        files["api/research"] = _api(store, Settings.load(max_retries=0), rec.log_id)
    finally:
        store.close()
    return files


def _api(store: Any, settings: Any, evaluation_id: str) -> dict[str, Any]:
    from fastapi.testclient import TestClient

    from jurist.server import create_app

    found = TestClient(create_app(settings, store=store), base_url="http://localhost").get(
        f"/api/evaluation/sessions/{evaluation_id}").json()
    return {"payload": found["evaluation"]["payload"], "scores": found["scores"]}


async def _panel() -> dict[str, Any]:
    from jurist.config import Settings
    from jurist.judges.panel import Panel, Role
    from jurist.models import script

    script("ra", default=json.dumps({"scores": {"q": 0.9, "r": 0.8}, "confidence": 0.9, "critique": "good"}))
    script("rb", default=json.dumps({"scores": {"q": 0.4}, "confidence": 0.5, "critique": "weak"}))
    script("rc", default="no JSON here")
    script("esc", default=json.dumps({"panel_review": "ra is right", "trust": {"ra": 0.9, "rb": 0.3},
                                      "scores": {"q": 0.8, "r": 0.75}, "verdict": "passes"}))
    roles = [Role("ra", ["q", "r"], model="scripted/ra"), Role("rb", ["q"], model="scripted/rb"),
             Role("rc", ["r"], model="scripted/rc")]
    panel = Panel(roles, {"q": 2.0, "r": 1.0}, settings=Settings.load(max_retries=0), escalation_model="scripted/esc")
    try:
        result = await panel.evaluate({"answer": "Paris."}, task="Judge the answer.")
    finally:
        await panel.aclose()
    return {"panel": result.to_json()}


def produce_research() -> dict[str, Any]:
    """Every file of the golden research evaluation, parsed (not normalised)."""
    with isolated_env() as tmp:
        return asyncio.run(_research(tmp))


def produce_panel() -> dict[str, Any]:
    """The golden panel's result as JSON data."""
    with isolated_env():
        return asyncio.run(_panel())


if __name__ == "__main__":
    outputs = {"research.json": produce_research(), "panel.json": produce_panel()}
    for name, files in outputs.items():
        if "--write" in sys.argv:
            DATA.mkdir(parents=True, exist_ok=True)
            (DATA / name).write_text(dumps(files), encoding="utf-8")
        else:
            sys.stdout.write(dumps(files))
