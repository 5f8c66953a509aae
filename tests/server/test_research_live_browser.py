"""The live research page in a real headless browser (Debian's chromium, driven by Playwright).

A research evaluation runs on the server with real judge panels on scripted models
that take a second per call: the page shows plan attempt 1 failing while attempt 2
is still being evaluated, then attempt 2 passing, the severe retrieval notice whose
[Retry search] button sends the decision back into the running evaluation, the
answer stage's "evaluation skipped" notice, and the end. Model text with HTML in it
stays text. A screenshot goes to env JURIST_SCREENSHOTS (see test_dashboard_browser).

Needs ``apt-get install chromium`` and ``pip install playwright`` (the Python package only;
no browser download). Skipped when either is missing, except under CI (env CI set).
"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import httpx

from jurist.config import Settings
from jurist.models import ChatRequest, script, scripted
from jurist.research import ResearchPipeline, research_config
from jurist.research import stages as st
from jurist.server import create_app
from tests.quoting import prompt_text
from tests.research.fakes import Planner, Synthesiser
from tests.server.live import running
from tests.server.test_dashboard_browser import browser_page, shots  # noqa: F401  (fixtures)

ROLES = ("intent_analyst", "coverage_checker", "faithfulness_judge", "quality_assessor", "fact_checker")
QUERY = "What causes <b>tides</b>? How high do spring tides get?"
PWN = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'
ANSWER_DIMENSIONS = {d.key for d in st.DIMENSIONS[st.ANSWER]}
DELAY = 1.0  # seconds per judge call: long enough to see each attempt while it is evaluated


def role_reply(request: ChatRequest) -> str:
    """Plan 1 misses coverage; search 1's sources miss recall; answers get no JSON (the stage is skipped)."""
    prompt = prompt_text(request.messages)
    dims = list(request.response_schema["properties"]["scores"]["properties"])
    if set(dims) & ANSWER_DIMENSIONS:
        return "I would rather not say."

    def score(dim: str) -> float:
        if dim == "query_coverage" and "plan 1" in prompt:
            return 0.3
        if dim == "context_recall" and "stale blog" in prompt:
            return 0.42
        return 0.9

    critique = f"plan 1 misses spring tides {PWN}" if "plan 1" in prompt else "fine"
    return json.dumps({"scores": {d: score(d) for d in dims}, "confidence": 0.9, "critique": critique})


CRITIC = json.dumps({"passed": False, "scores": {"intent_alignment": 0.9, "query_coverage": 0.3,
                                                 "scope_appropriateness": 0.9},
                     "failure_type": "missing_coverage", "critique": f"spring tides are not searched {PWN}",
                     "recommendation": "targeted_fix",
                     "specific_issues": [{"issue": "no query on spring tides", "fix": "add 'spring tide height'"}]})


class HeldPlanner(Planner):
    """The fake planner, holding the first plan until the test has the page open."""

    def __init__(self) -> None:
        super().__init__()
        self.go = threading.Event()

    async def __call__(self, query: str, feedback: Any, mode: str | None) -> dict[str, Any]:
        while not self.go.is_set():
            await asyncio.sleep(0.01)
        return await super().__call__(query, feedback, mode)


class Search:
    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, query: str, plan: Any) -> list[dict[str, Any]]:
        self.calls += 1
        if self.calls == 1:
            return [{"id": "b1", "title": "A stale blog", "content": "stale blog: tides are a mystery"}]
        return [{"id": "t1", "title": "Tides", "content": "The Moon's pull causes tides; spring tides are highest."}]


def test_the_live_page_follows_a_running_evaluation(browser_page, shots: Path, tmp_path: Path):  # noqa: F811
    from playwright.sync_api import expect

    page, blocked, problems = browser_page
    panel = script("panel", default=role_reply)
    panel.delay = DELAY
    script("critic", CRITIC)
    config = research_config({"evaluators": {r: {"model": "scripted/panel"} for r in ROLES},
                              "escalation_model": None, "critic_model": "scripted/critic"})
    search = Search()
    planner = HeldPlanner()
    pipeline = ResearchPipeline(planner, search, Synthesiser(), config=config)
    app = create_app(Settings.load(database_url=f"sqlite:///{tmp_path}/live.db", home=str(tmp_path / ".jurist")),
                     research_pipeline=pipeline)
    with running(app) as base:
        links = httpx.post(f"{base}/api/research/evaluate", json={"query": QUERY, "decision_timeout": 120}).json()
        log_id = links["log_id"]
        page.goto(base + links["live"])
        expect(page.locator("#user-query")).to_have_text(QUERY)  # the query as text: the page follows the run
        planner.go.set()
        plan = page.locator("#stage-plan")
        progress = plan.locator(".progress-text")
        attempts = plan.locator("article.attempt")

        # attempt 1 is being evaluated
        expect(progress).to_have_text("Evaluating plan (1/3)")
        expect(attempts.nth(0).locator(".badge")).to_have_text("evaluating…")

        # attempt 1 failed while attempt 2 is being evaluated: shown as it happens
        expect(progress).to_have_text("Evaluating plan (2/3)")
        assert httpx.get(f"{base}{links['status']}").json()["status"] == "running"
        expect(attempts).to_have_count(2)
        expect(attempts.nth(0).locator(".badge")).to_have_text("✗ Failed")
        expect(attempts.nth(1).locator(".badge")).to_have_text("evaluating…")
        expect(plan.locator(".stage-mark")).to_have_text("✗")
        plan.locator("summary", has_text="Show details").click()
        first = attempts.nth(0)
        expect(first.locator("h3")).to_have_text("Attempt 1/3")
        expect(first.locator("li.below .dim-label")).to_have_text("Query Coverage")
        expect(first.locator(".decision")).to_contain_text(f"Critique: “spring tides are not searched {PWN}”")
        expect(first.locator(".decision .next")).to_have_text("→ Iterating with targeted fix…")
        expect(first.locator(".critique .text").first).to_contain_text(PWN)
        page.screenshot(path=str(shots / "research-live-plan.png"), full_page=True)

        # attempt 2 passes
        expect(attempts.nth(1).locator(".badge")).to_have_text("✓ Passed")
        expect(progress).to_have_text("Done")
        expect(plan.locator(".stage-overall")).to_have_text("0.90")
        expect(plan.locator(".stage-mark")).to_have_text("✓")
        expect(plan.locator(".final")).to_have_text("Final plan score: 0.90")

        # retrieval: the severe-failure notice and its decision
        severe = page.locator("#stage-retrieval .notice.severe").first
        expect(severe).to_contain_text("⚠ Retrieval Quality Warning")
        expect(severe).to_contain_text("Context Recall: 0.42 - May be missing key sources")
        expect(severe.locator("button", has_text="Proceed anyway")).to_be_visible()
        expect(severe.locator(".countdown")).to_contain_text("Proceed anyway in ")
        page.screenshot(path=str(shots / "research-live.png"), full_page=True)
        expect(page.locator("#stage-retrieval .progress-text")).to_have_text("Waiting for a decision")
        assert httpx.get(f"{base}{links['status']}").json()["status"] == "waiting"
        severe.locator("button", has_text="Retry search").click()
        expect(severe.locator(".decided")).to_have_text("Decision: Retry search.")
        expect(severe.locator("button.choice")).to_have_count(0)
        retrieval = page.locator("#stage-retrieval")
        expect(retrieval.locator("article.attempt h3").nth(1)).to_have_text("Search 2")
        expect(retrieval.locator(".progress-text")).to_have_text("Done", timeout=20_000)
        expect(retrieval.locator(".stage-overall")).to_have_text("0.90")

        # answer: every role's reply is unreadable -> the stage is skipped, and says so
        skipped = page.locator("#stage-answer .notice.skipped")
        expect(skipped).to_contain_text("⚠ Answer evaluation skipped", timeout=20_000)
        expect(skipped).to_contain_text("Research continued without quality validation")
        skipped.locator("summary", has_text="View error details").click()
        expect(skipped.locator("pre")).to_contain_text("EvaluationUnavailable")

        # the end: a link to the stored record
        expect(page.locator("#run-status")).to_have_text("done", timeout=20_000)
        page.locator("#run-summary a").click()
        page.wait_for_url(f"**/evaluation/research/{log_id}")
        expect(page.locator("#stage-plan .stage-overall")).to_have_text("0.90")

    assert search.calls == 2
    assert page.evaluate("window.__pwned === undefined")
    assert blocked == [], f"requests that would leave the machine: {blocked}"
    assert problems == []
    assert scripted("critic").queue == []
