"""The dashboard pages at /evaluation, served by the app over real stored evaluations.

The store is filled by the capabilities themselves (rubric scoring, the gate,
a research evaluation, a checklist turn; scripted models), by the offline
analysis and the prompt lab, plus a synthetic history for the aggregates.
Every page is checked on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import html
import json
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from markupsafe import escape
from fastapi.testclient import TestClient

from jurist.config import Settings
from jurist.models import script
from jurist.server import create_app
from jurist.store import Store
from jurist.store import dashboard as q
from jurist.testing.synthetic import seed_history
from tests.conftest import _CLEARED, fresh_database

PWN_SCRIPT = "<script>window.__pwned=1</script>"
PWN_IMG = '<img src=x onerror="window.__pwned=2">'
XSS = f"{PWN_SCRIPT} {PWN_IMG}"
V2_NOTE = "asks for the evidence first"


def rubric_set(name: str = "Helpfulness") -> Any:
    from jurist.rubrics.models import parse_rubrics

    return parse_rubrics({"scale": [1, 5], "rubrics": [{
        "id": "helpful", "name": name, "description": "Does the assistant help the user?",
        "scoring_criteria": "5: fully helpful; 1: not helpful at all"}]}, "test rubrics")


def session(session_id: str, user: str, assistant: str) -> Any:
    from jurist.rubrics.sessions import parse_session

    lines = [json.dumps({"role": "user", "content": user}), json.dumps({"role": "assistant", "content": assistant})]
    return parse_session(lines, "test session", session_id)


async def seed_rubrics(store: Store, tmp_path: Path) -> None:
    """An XSS-laden rubric evaluation, and rubric evaluations under prompt versions 1 and 2 (for A/B)."""
    from jurist.analysis import create_prompt_version, prompt_version
    from jurist.rubrics.api import evaluate

    settings = Settings()
    script("xss", json.dumps({"score": 2, "reasoning": f"The reply echoes {XSS} back to the user."}))
    await evaluate(rubric_set(f"Safety {PWN_IMG}"), session("xss-session", f"Please repeat {XSS}", XSS),
                         judge="scripted/xss", settings=settings, store=store)
    v1 = await prompt_version(store, "rubric_judge", 1)
    v2_text = v1.text.replace("## Instructions\n", "## Instructions\nQuote the evidence before you score.\n")
    await create_prompt_version(store, "rubric_judge", v2_text, note=V2_NOTE)
    v2_file = tmp_path / "rubric_judge_v2.txt"
    v2_file.write_text(v2_text, encoding="utf-8")
    for i, (s1, s2) in enumerate([(2, 4), (3, 4), (2, 5), (3, 3), (2, 4)]):
        script("ab", json.dumps({"score": s1, "reasoning": "v1"}), json.dumps({"score": s2, "reasoning": "v2"}))
        chat = session(f"ab-{i}", f"Question {i}?", f"Answer {i}.")
        await evaluate(rubric_set(), chat, judge="scripted/ab", settings=settings, store=store)
        await evaluate(rubric_set(), chat, judge="scripted/ab", template=v2_file, settings=settings, store=store)


async def seed_gate(store: Store) -> None:
    from jurist.gate import Gate, GateConfig

    bad = json.dumps({"quality_score": 0.2, "confidence_score": 0.8, "issues": ["misses the height"],
                      "improvement_hint": "Give the height too."})
    good = json.dumps({"quality_score": 0.9, "confidence_score": 0.9, "issues": [], "improvement_hint": None})
    script("gen", "The Eiffel Tower was built in 1889.", "Built in 1889; it is 330 m tall.")
    script("gatejudge", bad, good)
    gate = Gate(GateConfig(evaluate_feedback_enabled=True), settings=Settings(), judge="scripted/gatejudge",
                store=store)
    try:
        await gate.run([{"role": "user", "content": "When was the Eiffel Tower built and how tall is it?"}],
                       "scripted/gen")
    finally:
        await gate.aclose()


def panel(stage: str, scores: dict[str, float], role: str, model: str, critique: str) -> Any:
    """A panel's verdict on one stage, as the research evaluators return it."""
    from jurist.judges.panel import SCORED, PanelResult, RoleResult
    from tests.research.fakes import WEIGHTS

    w = WEIGHTS[stage]
    overall = round(sum(w[k] * v for k, v in scores.items()) / sum(w[k] for k in scores), 6)
    rr = RoleResult(role=role, model=model, dimensions=list(scores), scores=dict(scores), confidence=0.82,
                    critique=critique, raw_response=json.dumps({"scores": scores, "critique": critique}),
                    latency_ms=840.0, tokens_used=612)
    return PanelResult(status=SCORED, scores=dict(scores), overall=overall, confidence=0.82, passed=overall >= 0.7,
                       panel_scores=dict(scores), panel_overall=overall, role_results=[rr])


async def seed_research(store: Store) -> None:
    """One research evaluation that iterates its plan, flags its retrieval and regenerates its answer,
    and one whose plan evaluation times out (skipped)."""
    from jurist.research import ResearchEvaluation, research_config
    from jurist.research import stages as st
    from tests.research.fakes import (BAD_ANSWER, BAD_PLAN, GOOD_ANSWER, GOOD_PLAN, GOOD_RETRIEVAL, SOURCES,
                                      FakeEvaluator, Planner, Synthesiser)
    from tests.research.test_plan import critic, critic_reply

    model = "ollama/qwen3:14b"
    evaluators = {
        st.PLAN: FakeEvaluator(st.PLAN, panel(st.PLAN, BAD_PLAN, "coverage_checker", model,
                                              "The search queries cover the history of the field but not 2024."),
                               panel(st.PLAN, GOOD_PLAN, "coverage_checker", model,
                                     "Every part of the question has a query; 2024 is explicit.")),
        st.RETRIEVAL: FakeEvaluator(st.RETRIEVAL, panel(st.RETRIEVAL, dict(GOOD_RETRIEVAL, context_recall=0.4),
                                                        "quality_assessor", model,
                                                        "Two of five parts of the question have no source.")),
        st.ANSWER: FakeEvaluator(st.ANSWER, panel(st.ANSWER, BAD_ANSWER, "faithfulness_judge", model,
                                                  "Three claims are not supported by any source."),
                                 panel(st.ANSWER, GOOD_ANSWER, "faithfulness_judge", model,
                                       "Grounded in the sources and complete.")),
    }

    async def search(query: str, plan: object) -> list[object]:
        return SOURCES

    full = ResearchEvaluation(research_config({}), store=store, evaluators=evaluators,
                              critic=critic(critic_reply("targeted_fix")))
    await full.run("What are the 2024 breakthroughs in quantum computing?", Planner(), search, Synthesiser())
    skipped = ResearchEvaluation(research_config({}), store=store, evaluators={
        st.PLAN: FakeEvaluator(st.PLAN, TimeoutError("model timeout")),
        st.RETRIEVAL: FakeEvaluator(st.RETRIEVAL, GOOD_RETRIEVAL),
        st.ANSWER: FakeEvaluator(st.ANSWER, GOOD_ANSWER)})
    await skipped.run("Which sources discuss tidal energy?", Planner(), search, Synthesiser())


async def seed_checklist(store: Store) -> None:
    from jurist.checklist import ChecklistSession
    from tests.checklist.conftest import CAFFEINE, judge_reply

    script("cljudge", judge_reply(("adenosine", 0.92), feedback="adenosine recalled"))
    script("cltutor", "Right, adenosine. What else?")
    s = await ChecklistSession.start(CAFFEINE, store=store, settings=Settings(), learner="ada",
                                     tutor="scripted/cltutor", judge="scripted/cljudge")
    await s.process_user_message("Caffeine blocks adenosine receptors.")
    await s.finish()


async def seed_all(store: Store, tmp_path: Path, history: int = 400) -> dict[str, Any]:
    """Everything the dashboard shows; returns the ids the tests open."""
    from jurist.analysis import run_analysis

    seed_history(store, history, seed=11, days=70)
    await seed_rubrics(store, tmp_path)
    await seed_gate(store)
    await seed_research(store)
    await seed_checklist(store)
    await store.aflush()
    await run_analysis(store, Settings(), min_count=5)
    ids: dict[str, Any] = {}
    for kind in q.KINDS:
        listed = store.read(q.list_page, q.EvaluationFilter(kind=kind), page_size=200).items
        real = [e for e in listed if not e.id.startswith("syn")]
        ids[kind] = [e.id for e in real]
    ids["xss"] = next(e.id for e in store.read(q.list_page, q.EvaluationFilter(subject_id="xss-session")).items)
    ids["gate_regenerated"] = next(i for i in ids["gate"] if store.evaluation(i).iterations == 2)
    research = [store.evaluation(i) for i in ids["research"]]
    ids["research_full"] = next(r.id for r in research if not r.payload["planEvaluation"]["evaluationSkipped"])
    ids["research_skipped"] = next(r.id for r in research if r.payload["planEvaluation"]["evaluationSkipped"])
    return ids


def run_async(coro: Any) -> Any:
    """Run a coroutine to the end from sync code, also where a loop is running (the browser's driver)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


@contextmanager
def seeded_store(backend: str, folder: Path, history: int = 400) -> Iterator[tuple[Store, dict[str, Any]]]:
    """A store filled by :func:`seed_all` (in ``folder``, with no provider settings), open until the block ends."""
    with fresh_database(backend, folder, "jurist_dash") as url, pytest.MonkeyPatch.context() as mp:
        for var in _CLEARED:
            mp.delenv(var, raising=False)
        mp.chdir(folder)
        mp.setenv("JURIST_HOME", str(folder / ".jurist"))
        store = Store(url)
        try:
            ids = run_async(seed_all(store, folder, history))
            yield store, ids
        finally:
            store.close()


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def seeded(request, tmp_path_factory):
    """Seeded once per module and backend: the pages only read."""
    with seeded_store(request.param, tmp_path_factory.mktemp("dashboard")) as found:
        yield found


@pytest.fixture
def client(seeded):
    store, _ = seeded
    with TestClient(create_app(Settings(), store=store), base_url="http://localhost") as c:
        yield c


def esc(text: str) -> str:
    """``text`` as the templates write it (Jinja's autoescape)."""
    return str(escape(text))


def text_of(page: str, element_id: str) -> str:
    m = re.search(rf'id="{element_id}">([^<]*)<', page)
    assert m, f"#{element_id} not on the page"
    return html.unescape(m.group(1)).strip()


def pct(x: float | None) -> str:
    return "—" if x is None else f"{x * 100:.1f}%"


async def test_every_page_renders(client, seeded):
    _, ids = seeded
    pages = ["/evaluation", "/evaluation?kind=rubric&since=2026-01-01", "/evaluation/explorer",
             "/evaluation/explorer?kind=gate&min_score=0.1&max_score=1&escalated=false&min_iterations=1&page=1",
             "/evaluation/patterns", "/evaluation/prompts", "/evaluation/prompts/rubric_judge",
             "/evaluation/prompts/rubric_judge?a=1&b=2", f"/evaluation/research/{ids['research_full']}",
             f"/evaluation/research/{ids['research_skipped']}"]
    pages += [f"/evaluation/evaluations/{ids[k][0]}" for k in q.KINDS]
    for url in pages:
        r = client.get(url)
        assert r.status_code == 200, (url, r.text[:300])
        assert r.headers["content-type"].startswith("text/html")
        assert "script-src 'self'" in r.headers["content-security-policy"]
        assert "cdn" not in r.text.lower() and "https://" not in r.text.split("<main", 1)[0]


async def test_overview_numbers_match_the_database(client, seeded):
    store, _ = seeded
    for query, flt in [("?period=all", q.EvaluationFilter()),
                       ("?period=all&kind=research", q.EvaluationFilter(kind="research"))]:
        data = store.read(q.overview, flt)
        page = client.get(f"/evaluation{query}").text
        assert text_of(page, "m-total") == f"{data.total:,}"
        assert text_of(page, "m-pass-rate") == pct(data.pass_rate)
        assert text_of(page, "m-passed") == f"{data.passed:,}"
        assert text_of(page, "m-judged") == f"{data.judged:,}"
        assert text_of(page, "m-average") == f"{data.average_score:.2f}"
        assert text_of(page, "m-escalated") == f"{data.escalations.count:,}"
        assert text_of(page, "m-calls") == f"{data.calls.count:,}"
        assert text_of(page, "m-tokens-in") == f"{data.calls.input_tokens:,}"
        assert text_of(page, "m-max-attempts") == f"{data.iterations.max_attempts_hit:,}"
        assert text_of(page, "m-max-attempts-rate") == pct(data.iterations.max_attempts_hit_rate)
        charts = dict(re.findall(r'data-target="([^"]+)">(.*?)</script>', page, re.S))
        dist = json.loads(charts["chart-distribution"])
        assert dist["data"][0]["y"] == [b.count for b in data.distribution]
        trend = json.loads(charts["chart-trend"])
        assert trend["data"][0]["y"] == [w.count for w in data.trend]
    assert data.total == store.read(q.list_page, q.EvaluationFilter(kind="research")).total > 2
    assert "/evaluation/assets/plotly.min.js" in page


def midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=timezone.utc)


async def test_overview_shows_the_last_30_days_by_default(client, seeded):
    store, _ = seeded
    today = datetime.now(timezone.utc).date()
    everything = store.read(q.overview, q.EvaluationFilter())
    for query, days, label in [("", 30, "Last 30 days"), ("?period=30d", 30, "Last 30 days"),
                               ("?period=7d", 7, "Last 7 days"), ("?period=90d", 90, "Last 90 days")]:
        since = midnight(today - timedelta(days=days - 1))
        data = store.read(q.overview, q.EvaluationFilter(since=since))
        page = client.get(f"/evaluation{query}").text
        assert text_of(page, "period-label") == f"{label}"
        assert f"from {since.date().isoformat()}" in page
        assert text_of(page, "m-total") == f"{data.total:,}"
        assert text_of(page, "m-calls") == f"{data.calls.count:,}"
        # the links into the explorer carry the range the period stands for
        browse = html.unescape(re.search(r'id="browse-link" href="([^"]+)"', page).group(1))
        assert browse == f"/evaluation/explorer?since={since.date().isoformat()}"
        assert text_of(client.get(browse).text, "result-count") == f"{data.total:,}"
    last30 = store.read(q.overview, q.EvaluationFilter(since=midnight(today - timedelta(days=29))))
    assert 0 < last30.total < everything.total  # the history spans 70 days
    page = client.get("/evaluation?period=all").text
    assert text_of(page, "period-label") == "All time" and text_of(page, "m-total") == f"{everything.total:,}"
    assert 'id="browse-link" href="/evaluation/explorer"' in page
    # dates given win over the period: a custom range
    page = client.get(f"/evaluation?period=7d&since={(today - timedelta(days=60)).isoformat()}").text
    assert text_of(page, "period-label") == "Custom range"
    assert '<option value="" selected>Custom range</option>' in page
    data = store.read(q.overview, q.EvaluationFilter(since=midnight(today - timedelta(days=60))))
    assert text_of(page, "m-total") == f"{data.total:,}"
    assert client.get("/evaluation?period=week").status_code == 422


async def test_max_attempts_hit_is_counted_and_filtered(client, seeded):
    store, _ = seeded
    data = store.read(q.overview, q.EvaluationFilter())
    hit = store.read(q.list_page, q.EvaluationFilter(max_attempts_hit=True), page_size=200)
    assert data.iterations.max_attempts_hit == hit.total > 0
    assert data.iterations.max_attempts_hit_rate == round(hit.total / data.total, 4)
    assert all(e.max_attempts_hit and e.iterations == 3 and e.passed is False for e in hit.items)
    page = client.get("/evaluation?period=all").text
    link = html.unescape(re.search(r'id="m-max-attempts-link" href="([^"]+)"', page).group(1))
    assert link == "/evaluation/explorer?max_attempts_hit=true"
    listed = client.get(link).text
    assert text_of(listed, "result-count") == f"{hit.total:,}"
    assert re.findall(r'<tr data-id="([^"]+)">', listed) == [e.id for e in hit.items[:50]]
    assert listed.count(">max</span>") == min(50, hit.total)
    api = client.get("/api/evaluation/sessions", params={"max_attempts_hit": "true", "page_size": 200}).json()
    assert api["total"] == hit.total and all(e["max_attempts_hit"] for e in api["items"])
    metrics = client.get("/api/evaluation/metrics").json()
    assert metrics["iterations"]["max_attempts_hit"] == hit.total


async def test_kind_filter_applies_to_every_card_and_the_api(client, seeded):
    """The judge calls too: the calls of the evaluations of that kind (by their traces)."""
    store, _ = seeded
    everything = store.read(q.overview, q.EvaluationFilter())
    counted = 0
    for kind in q.KINDS:
        traces = {e.trace_id for e in store.read(q.list_page, q.EvaluationFilter(kind=kind),
                                                    page_size=200).items if e.trace_id}
        calls = [c for t in sorted(traces) for c in store.read(q.call_page, trace_id=t, page_size=200).items]
        data = store.read(q.overview, q.EvaluationFilter(kind=kind))
        assert data.calls.count == len(calls) > 0, kind
        assert data.calls.input_tokens == sum(c.input_tokens for c in calls)
        page = client.get(f"/evaluation?period=all&kind={kind}").text
        assert text_of(page, "m-calls") == f"{len(calls):,}"
        assert text_of(page, "m-total") == f"{data.total:,}"
        assert f"of {kind} evaluations" in page
        metrics = client.get("/api/evaluation/metrics", params={"kind": kind}).json()
        assert metrics["calls"] == data.calls.model_dump() and metrics["total"] == data.total
        api_calls = client.get("/api/calls", params={"kind": kind, "page_size": 200}).json()
        assert api_calls["total"] == len(calls) <= 200
        assert {c["id"] for c in api_calls["items"]} == {c.id for c in calls}
        counted += len(calls)
    assert counted <= everything.calls.count
    assert client.get("/api/calls", params={"kind": "nope"}).status_code == 422


async def test_date_filter_narrows_the_overview(client, seeded):
    store, _ = seeded
    data_all = store.read(q.overview, q.EvaluationFilter())
    first_week = data_all.trend[1].week
    data = store.read(q.overview, q.EvaluationFilter(since=datetime.fromisoformat(first_week)))
    page = client.get(f"/evaluation?since={first_week}").text
    assert text_of(page, "m-total") == f"{data.total:,}"
    assert 0 < data.total < data_all.total


async def test_explorer_filters_and_paginates(client, seeded):
    store, _ = seeded
    flt = q.EvaluationFilter(kind="rubric", min_score=0.2, max_score=0.9)
    expected = store.read(q.list_page, flt, page=2, page_size=10)
    page = client.get("/evaluation/explorer?kind=rubric&min_score=0.2&max_score=0.9&page=2&page_size=10").text
    assert text_of(page, "result-count") == f"{expected.total:,}"
    shown = re.findall(r'<tr data-id="([^"]+)">', page)
    assert shown == [e.id for e in expected.items]
    assert f"/evaluation/evaluations/{shown[0]}" in page
    assert "page=3" in page and "page=1" in page  # older and newer links keep the filters
    assert "kind=rubric" in re.search(r'id="next-page" href="([^"]+)"', page).group(1)

    failure = store.read(q.failure_types)[0]
    page = client.get(f"/evaluation/explorer?failure={failure}&escalated=false").text
    n = store.read(q.list_page, q.EvaluationFilter(failure=failure, escalated=False)).total
    assert text_of(page, "result-count") == f"{n:,}"


async def test_explorer_names_gate_and_research_rows_by_their_question(client, seeded):
    """A gate's subject id is a hash of the question: the explorer and the API show the question
    (the research query), with the subject id kept in the cell's tooltip."""
    store, ids = seeded
    gate_id = ids["gate"][0]
    gate_subject = store.evaluation(gate_id).subject_id
    page = client.get("/evaluation/explorer?kind=gate").text
    row = re.search(rf'<tr data-id="{gate_id}">.*?</tr>', page, re.S).group(0)
    cell = re.search(r'<td class="subject" title="([^"]*)">([^<]*)</td>', row)
    assert cell.group(2) == "When was the Eiffel Tower built and how tall is it?"
    assert gate_subject in cell.group(1)
    listed = client.get("/api/evaluation/sessions?kind=research").json()["items"]
    assert {e["title"] for e in listed} >= {"What are the 2024 breakthroughs in quantum computing?",
                                            "Which sources discuss tidal energy?"}
    rubric = client.get("/api/evaluation/sessions?kind=rubric&page_size=1").json()["items"][0]
    assert rubric["title"] is None


async def test_pattern_links_filter_the_explorer(client, seeded):
    from jurist.analysis import latest_patterns

    store, _ = seeded
    found = await latest_patterns(store)
    assert found.patterns, "the synthetic history has low-scoring topics"
    page = client.get("/evaluation/patterns").text
    first = found.patterns[0]
    assert f"/evaluation/explorer?pattern={first.id}" in page
    assert f"{first.affected_count:,} subjects" in page
    assert esc(first.title) in page
    listed = client.get(f"/evaluation/explorer?pattern={first.id}").text
    from sqlalchemy import func, select

    from jurist.store.tables import pattern_evaluations

    linked = store.read(lambda conn: conn.execute(select(func.count()).where(
        pattern_evaluations.c.pattern_id == first.id)).scalar())
    assert linked >= first.affected_count  # every evaluation of the affected subjects
    assert text_of(listed, "result-count") == f"{linked:,}"


async def test_trace_pages_show_each_kind(client, seeded):
    store, ids = seeded
    page = client.get(f"/evaluation/evaluations/{ids['gate_regenerated']}").text
    assert text_of(page, "gate-before") == "The Eiffel Tower was built in 1889."
    assert text_of(page, "gate-after") == "Built in 1889; it is 330 m tall."
    assert "Give the height too." in page and "misses the height" in page
    trace = store.read(q.trace, ids["gate_regenerated"])
    assert page.count('<details class="call">') == len(trace["calls"]) >= 4
    assert "gate_quality" in page or "quality_evaluation" in page

    page = client.get(f"/evaluation/evaluations/{ids['research_full']}").text
    assert f'href="/evaluation/research/{ids["research_full"]}"' in page

    page = client.get(f"/evaluation/evaluations/{ids['checklist'][0]}").text
    assert "adenosine" in page and "0.92" in page


async def test_research_runtime_view(client, seeded):
    store, ids = seeded
    rec = store.evaluation(ids["research_full"]).payload
    page = client.get(f"/evaluation/research/{ids['research_full']}").text
    plan = rec["planEvaluation"]
    assert page.count('class="attempt"') >= len(plan["attempts"]) + len(rec["answerEvaluation"]["attempts"])
    assert f"Attempt 1/{plan['maxAttempts']}" in page
    assert "✗ Failed" in page and "✓ Passed" in page
    assert "Show details" in page and "(threshold 0.70)" in page
    assert esc(plan["attempts"][0]["iterationDecision"]["critique"]) in page
    assert "Retrieval quality warning" in page and "Context recall: 0.40" in page
    assert "Research continued without quality validation" not in page

    page = client.get(f"/evaluation/research/{ids['research_skipped']}").text
    assert "Plan evaluation skipped (" in page and "Research continued without quality validation" in page

    r = client.get(f"/evaluation/research/{ids['gate'][0]}")
    assert r.status_code == 404  # not a research evaluation


async def test_prompt_lab_diff_and_ab(client, seeded):
    from jurist.analysis import compare_versions

    store, _ = seeded
    page = client.get("/evaluation/prompts").text
    assert '/evaluation/prompts/rubric_judge"' in page and V2_NOTE in page
    cmp = await compare_versions(store, "rubric_judge", 1, 2)
    assert cmp.n_a == cmp.n_b == 5 and cmp.test == "paired t-test"
    page = client.get("/evaluation/prompts/rubric_judge?a=1&b=2").text
    assert text_of(page, "verdict") == cmp.verdict
    assert text_of(page, "mean-a") == f"{cmp.mean_a:.3f}" and text_of(page, "mean-b") == f"{cmp.mean_b:.3f}"
    assert text_of(page, "n-a") == "5" and text_of(page, "difference") == f"{cmp.difference:.3f}"
    assert f"{cmp.ci_low:.3f} to {cmp.ci_high:.3f}" in page
    assert '<span class="dadd">+ Quote the evidence before you score.' in page
    judges = page[page.index('id="ab-judges"'):page.index("</table>", page.index('id="ab-judges"'))]
    assert f'<tr class="compared"><td class="mono">{cmp.judge_model}</td><td class="num">5</td>' in judges
    assert text_of(page, "judge-compared") == cmp.judge_model
    assert client.get("/evaluation/prompts/rubric_judge").text.count('class="selected"') == 2  # v1 and v2 by default


async def test_bad_parameters_are_422(client):
    for url in ["/evaluation?min_score=abc", "/evaluation?kind=nope", "/evaluation/explorer?kind=nope",
                "/evaluation/explorer?min_score=abc", "/evaluation/explorer?max_score=2",
                "/evaluation/explorer?page=0", "/evaluation/explorer?page_size=100000",
                "/evaluation/explorer?since=yesterday", "/evaluation/explorer?escalated=maybe",
                "/evaluation/explorer?min_iterations=0", "/evaluation/prompts/rubric_judge?a=x"]:
        r = client.get(url)
        assert r.status_code == 422, (url, r.status_code, r.text[:200])
    assert client.get("/evaluation/explorer?min_score=0.9&max_score=0.1").status_code == 400


async def test_unknown_ids_are_404_pages(client):
    for url in ["/evaluation/evaluations/nope", "/evaluation/research/nope", "/evaluation/prompts/nope",
                "/evaluation/prompts/rubric_judge?a=1&b=99"]:
        r = client.get(url)
        assert r.status_code == 404, url
        assert r.headers["content-type"].startswith("text/html") and "Not found" in r.text
    r = client.get("/evaluation/evaluations/%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E")
    assert r.status_code == 404 and "<img" not in r.text.split("<main", 1)[1]
    assert "&lt;img src=x onerror=alert(1)&gt;" in r.text


async def test_untrusted_text_is_escaped(client, seeded):
    _, ids = seeded
    page = client.get(f"/evaluation/evaluations/{ids['xss']}").text
    for raw in (PWN_SCRIPT, PWN_IMG, 'onerror="window'):
        assert raw not in page
    assert esc(PWN_SCRIPT) in page and esc(PWN_IMG) in page
    # the judge's reasoning, the raw response and the transcript in the prompt are all there, as text
    assert page.count(esc(PWN_SCRIPT)) >= 3
    listing = client.get("/evaluation/explorer?subject_id=xss-session").text
    assert ids["xss"] in listing and PWN_IMG not in listing


async def test_plotly_is_served_locally(client):
    r = client.get("/evaluation/assets/plotly.min.js?v=1")
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/javascript")
    assert "max-age=31536000" in r.headers["cache-control"]
    assert len(r.content) > 1_000_000 and b"plotly" in r.content[:2000].lower()
