"""The dashboard in a real headless browser (Debian's chromium, driven by Playwright).

The app runs under uvicorn on 127.0.0.1 over a store seeded by the
capabilities (see test_dashboard_pages.seed_all); every request that would
leave the machine is blocked and recorded, so the charts must render from the
plotly.js this server ships. Screenshots of each view go to the folder in
env JURIST_SCREENSHOTS (relative to the repository; default: the test's temporary folder), e.g.
``JURIST_SCREENSHOTS=docs/img``.

Needs ``apt-get install chromium`` and ``pip install playwright`` (the Python
package only; no browser download). Skipped when either is missing, except
under CI (env CI set), where that is a failure.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from jurist.config import Settings
from jurist.server import create_app
from jurist.store import analysis as qa
from jurist.store import dashboard as q
from tests.conftest import REPO
from tests.server.live import running
from tests.server.test_browser import ARGS, CHROMIUM, require_browser
from tests.server.test_dashboard_pages import PWN_IMG, PWN_SCRIPT, run_async, seeded_store

VIEWPORT = {"width": 1360, "height": 900}


def pct(x: float | None) -> str:
    return "—" if x is None else f"{x * 100:.1f}%"


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    given = os.environ.get("JURIST_SCREENSHOTS")
    folder = (REPO / given if not Path(given).is_absolute() else Path(given)) if given else tmp_path / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def browser_page(tmp_path: Path):
    require_browser()
    from playwright.sync_api import sync_playwright

    blocked: list[str] = []
    problems: list[str] = []

    def route(r):
        if r.request.url.startswith(("http://127.0.0.1", "ws://127.0.0.1")):
            r.continue_()
        else:
            blocked.append(r.request.url)  # nothing leaves the machine
            r.abort()

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            context = browser.new_context(viewport=VIEWPORT, device_scale_factor=1)
            context.route("**/*", route)
            page = context.new_page()
            page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
            page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
            yield page, blocked, problems
        finally:
            browser.close()


def test_dashboard_in_a_browser(browser_page, shots: Path, tmp_path: Path):
    from playwright.sync_api import expect

    page, blocked, problems = browser_page
    with seeded_store("sqlite", tmp_path, history=1500) as (store, ids), \
            running(create_app(Settings(), store=store)) as base:
        # -- overview: the headline numbers are the database's; the charts draw offline
        data = store.read(q.overview, q.EvaluationFilter())
        page.goto(f"{base}/evaluation?period=all")
        expect(page.locator("#m-total")).to_have_text(f"{data.total:,}")
        expect(page.locator("#m-pass-rate")).to_have_text(pct(data.pass_rate))
        expect(page.locator("#m-average")).to_have_text(f"{data.average_score:.2f}")
        expect(page.locator("#m-escalated")).to_have_text(f"{data.escalations.count:,}")
        for chart in ("#chart-distribution", "#chart-failures", "#chart-trend"):
            expect(page.locator(f"{chart} svg.main-svg").first).to_be_attached()
        bars = page.locator("#chart-distribution g.point").count()
        assert bars == sum(1 for b in data.distribution if b.count)
        page.screenshot(path=str(shots / "dashboard-overview.png"), full_page=True)

        # the date-range filter
        week = data.trend[-3].week
        page.fill("input[name=since]", week)
        page.click(".page-head form button[type=submit]")
        page.wait_for_url(re.compile(r"since="))
        assert "until=" not in page.url and "kind=" not in page.url  # empty fields are left out
        from datetime import datetime

        recent = store.read(q.overview, q.EvaluationFilter(since=datetime.fromisoformat(week)))
        expect(page.locator("#m-total")).to_have_text(f"{recent.total:,}")

        # -- explorer: filter, then click through to a trace
        page.goto(f"{base}/evaluation/explorer")
        expect(page.locator("#result-count")).to_have_text(f"{data.total:,}")
        page.select_option("select[name=kind]", "gate")
        page.fill("input[name=min_iterations]", "2")
        page.click("#explorer-filters button[type=submit]")
        page.wait_for_url(re.compile(r"kind=gate"))
        expected = store.read(q.list_page, q.EvaluationFilter(kind="gate", min_iterations=2))
        expect(page.locator("#result-count")).to_have_text(f"{expected.total:,}")
        rows = page.locator("#evaluations tbody tr")
        expect(rows).to_have_count(min(50, expected.total))
        assert rows.first.get_attribute("data-id") == ids["gate_regenerated"]  # the newest
        page.goto(f"{base}/evaluation/explorer")
        page.screenshot(path=str(shots / "dashboard-explorer.png"))
        page.goto(f"{base}/evaluation/explorer?kind=gate&min_iterations=2")
        page.locator(f"tr[data-id='{ids['gate_regenerated']}'] a.row-link").click()
        page.wait_for_url(f"**/evaluation/evaluations/{ids['gate_regenerated']}")
        expect(page.locator("#gate-before")).to_have_text("The Eiffel Tower was built in 1889.")
        expect(page.locator("#gate-after")).to_have_text("Built in 1889; it is 330 m tall.")
        trace = store.read(q.trace, ids["gate_regenerated"])
        calls = page.locator("details.call")
        expect(calls).to_have_count(len(trace["calls"]))
        judge = next(i for i, c in enumerate(trace["calls"]) if c["response_text"] and "quality_score" in c["response_text"])
        calls.nth(judge).locator("summary").click()
        expect(calls.nth(judge).locator("pre.response")).to_have_text(trace["calls"][judge]["response_text"])
        page.screenshot(path=str(shots / "dashboard-trace.png"), full_page=True)

        # -- research: the trace links to the runtime view; details disclose the attempts
        page.goto(f"{base}/evaluation/evaluations/{ids['research_full']}")
        page.click("#runtime-link")
        page.wait_for_url(f"**/evaluation/research/{ids['research_full']}")
        rec = store.evaluation(ids["research_full"]).payload
        plan = page.locator("#stage-plan")
        expect(plan.locator(".stage-overall")).to_have_text(f"{rec['planEvaluation']['overall']:.2f}")
        first_attempt = plan.locator("article.attempt").first
        expect(first_attempt).to_be_hidden()
        plan.locator("summary", has_text="Show details").click()
        expect(first_attempt).to_be_visible()
        expect(first_attempt.locator("h3")).to_have_text(f"Attempt 1/{rec['planEvaluation']['maxAttempts']}")
        expect(first_attempt).to_contain_text("✗ Failed")
        expect(first_attempt).to_contain_text(rec["planEvaluation"]["attempts"][0]["iterationDecision"]["critique"])
        expect(page.locator("#stage-retrieval .severe")).to_contain_text("Context recall: 0.40")
        page.locator("#stage-answer summary", has_text="Show details").click()
        page.screenshot(path=str(shots / "dashboard-research.png"), full_page=True)
        page.goto(f"{base}/evaluation/research/{ids['research_skipped']}")
        expect(page.locator("#stage-plan .skipped")).to_contain_text("Research continued without quality validation")

        # -- untrusted text stays text
        page.goto(f"{base}/evaluation/evaluations/{ids['xss']}")
        for d in page.locator("details").all():
            d.locator("summary").first.click()
        reasoning = page.locator(".reasoning .text").first
        expect(reasoning).to_contain_text(PWN_SCRIPT)
        expect(reasoning).to_contain_text(PWN_IMG)
        expect(page.locator("pre.response").first).to_contain_text(PWN_SCRIPT)  # the raw JSON reply
        expect(page.locator("pre.prompt").last).to_contain_text(f"{PWN_SCRIPT} {PWN_IMG}")  # the transcript
        assert page.evaluate("window.__pwned === undefined")
        assert page.locator("main img, main script").count() == 0

        # -- patterns: counts, links into the explorer, and running the analysis again
        page.goto(f"{base}/evaluation/patterns")
        run = store.read(qa.get_run)
        patterns = store.read(qa.patterns_of_run, run.id)
        cards = page.locator("article.pattern")
        expect(cards).to_have_count(len(patterns))
        expect(cards.first.locator(".affected")).to_have_text(f"{patterns[0].affected_count:,} subjects")
        page.screenshot(path=str(shots / "dashboard-patterns.png"), full_page=False)
        with page.expect_navigation(timeout=120_000):  # the page reloads when the run is stored
            page.locator("#analyze-form button").click()
        assert store.read(qa.get_run).id != run.id  # a new run is stored and shown
        cards.first.locator("a.button").click()
        page.wait_for_url(re.compile(r"/evaluation/explorer\?pattern="))
        newest = store.read(qa.patterns_of_run, store.read(qa.get_run).id)[0]
        expect(page.locator("#result-count")).to_have_text(f"{newest.affected_count:,}")

        # -- prompt lab: versions, the diff, and the A/B verdict
        page.goto(f"{base}/evaluation/prompts")
        page.locator("a.row-link", has_text="rubric_judge").click()
        page.wait_for_url("**/evaluation/prompts/rubric_judge")
        expect(page.locator("#diff .dadd")).to_have_text("+ Quote the evidence before you score.")
        from jurist.analysis import compare_versions

        cmp = run_async(compare_versions(store, "rubric_judge", 1, 2))
        expect(page.locator("#verdict")).to_have_text(cmp.verdict)
        expect(page.locator("#n-a")).to_have_text(str(cmp.n_a))
        page.screenshot(path=str(shots / "dashboard-prompts.png"), full_page=True)

    assert blocked == [], f"requests that would leave the machine: {blocked}"
    assert problems == []


def test_explorer_fits_1280_and_the_overview_period(browser_page, shots: Path, tmp_path: Path):
    """At 1280x800 the page does not scroll sideways and every column of the explorer is inside its
    card (long subjects, failures and judges end in an ellipsis, whole in the cell's title)."""
    from datetime import datetime, timedelta, timezone

    from playwright.sync_api import expect

    from jurist.store.queries import insert_history

    page, blocked, problems = browser_page
    page.set_viewport_size({"width": 1280, "height": 800})
    long = {"id": "long" + "0" * 28, "kind": "research", "subject_id": "s" * 300, "trace_id": None,
            "status": "scored", "score": 0.3, "max_score": 1.0, "percentage": 30.0,
            "judge_model": "openai/gpt-4o-mini," * 11, "payload": {"synthetic": True},
            "created_at": datetime.now(timezone.utc), "passed": False, "escalated": True, "iterations": 3,
            "max_attempts_hit": True, "failure": "plan.a_very_long_dimension_name_" * 6}
    with seeded_store("sqlite", tmp_path, history=300) as (store, ids), \
            running(create_app(Settings(), store=store)) as base:
        store.write(insert_history, [long], [], [])
        page.goto(f"{base}/evaluation/explorer")
        sizes = page.evaluate("""() => {
            const table = document.getElementById('evaluations');
            const cells = [...table.querySelectorAll('thead th, tbody tr:first-child td')];
            return {page: [document.documentElement.scrollWidth, document.documentElement.clientWidth],
                    table: [table.scrollWidth, table.parentElement.clientWidth],
                    cut: cells.filter(c => !['subject', 'failure', 'judge'].some(k => c.classList.contains(k))
                                           && c.scrollWidth > c.clientWidth).map(c => c.textContent.trim())};
        }""")
        assert sizes["page"][0] <= sizes["page"][1], sizes
        assert sizes["table"][0] <= sizes["table"][1], sizes
        assert sizes["cut"] == [], sizes  # only subject, failure and judge may end in an ellipsis
        row = page.locator(f"tr[data-id='{long['id']}']")
        expect(row.locator("td.subject")).to_have_attribute("title", long["subject_id"])
        expect(row.locator("td.failure")).to_have_attribute("title", long["failure"])
        expect(row.locator("td.judge")).to_have_attribute("title", long["judge_model"])
        expect(row.locator("td.num").last).to_contain_text("max")

        # the overview: last 30 days; All time clears the dates and shows everything
        everything = store.read(q.overview, q.EvaluationFilter())
        today = datetime.now(timezone.utc).date()
        start = today - timedelta(days=29)
        last30 = store.read(q.overview, q.EvaluationFilter(
            since=datetime(start.year, start.month, start.day, tzinfo=timezone.utc)))
        page.goto(f"{base}/evaluation")
        expect(page.locator("#period-label")).to_contain_text("Last 30 days")
        expect(page.locator("#m-total")).to_have_text(f"{last30.total:,}")
        expect(page.locator("#m-max-attempts")).to_have_text(f"{last30.iterations.max_attempts_hit:,}")
        assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
        page.fill("input[name=since]", (today - timedelta(days=5)).isoformat())
        expect(page.locator("#period")).to_have_value("")  # a date makes it a custom range
        page.select_option("#period", "all")
        expect(page.locator("input[name=since]")).to_have_value("")  # a period clears the dates
        page.click("#overview-filters button[type=submit]")
        page.wait_for_url(re.compile(r"period=all"))
        assert "since=" not in page.url
        expect(page.locator("#period-label")).to_have_text("All time")
        expect(page.locator("#m-total")).to_have_text(f"{everything.total:,}")
        page.locator("#m-max-attempts-link").click()
        page.wait_for_url(re.compile(r"/evaluation/explorer\?.*max_attempts_hit=true"))
        hit = store.read(q.list_page, q.EvaluationFilter(max_attempts_hit=True))
        expect(page.locator("#result-count")).to_have_text(f"{hit.total:,}")
    assert blocked == [], f"requests that would leave the machine: {blocked}"
    assert problems == []


def test_api_docs_work_offline(browser_page, tmp_path: Path):
    """/docs and /redoc draw the API from this server's files alone: nothing leaves the machine."""
    from playwright.sync_api import expect

    page, blocked, problems = browser_page
    app = create_app(Settings(database_url=f"sqlite:///{tmp_path}/docs.db", home=str(tmp_path / ".jurist")))
    with running(app) as base:
        spec = app.openapi()
        # Swagger UI shows an operation under each of its tags
        operations = sum(len(op.get("tags") or ["default"]) for item in spec["paths"].values() for op in item.values())
        page.goto(f"{base}/docs")
        expect(page.locator(".swagger-ui .info .title")).to_contain_text("jurist")
        expect(page.locator(".opblock")).to_have_count(operations)
        health = page.locator(".opblock", has_text="/api/health")
        health.locator(".opblock-summary").click()
        health.locator("button.try-out__btn").click()
        health.locator("button.execute").click()  # Swagger UI calls this server under the CSP
        live = health.locator(".live-responses-table tr.response")
        expect(live.locator(".response-col_status")).to_contain_text("200")
        expect(live.locator(".response-col_description")).to_contain_text('"status": "ok"')
        page.goto(f"{base}/redoc")
        expect(page.locator("h1").first).to_contain_text("jurist")
        expect(page.get_by_text("/api/evaluation/metrics").first).to_be_attached()
    assert blocked == [], f"requests that would leave the machine: {blocked}"
    # ReDoc's footer asks for its logo from its CDN: the CSP refuses it before it leaves (and ReDoc hides it)
    refused = [p for p in problems if "cdn.redoc.ly/redoc/logo-mini.svg" in p and "Content Security Policy" in p]
    assert [p for p in problems if p not in refused] == []
