"""Cost where calls are shown (jurist logs, summary.json, the dashboard overview), evaluate-batch's
--max-cost (stops, resumes, finishes; refuses a model whose price is unknown) and --dry-run (no call)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from genai_prices import Usage, calc_price

from jurist.cli.evaluate import print_batch_report
from jurist.config import Settings
from jurist.models import Limiter
from jurist.models.base import CallRecord
from jurist.models.cost import CostBudget, charged_to, format_usd
from jurist.models.model import Model
from jurist.models.openai import OpenAIChat
from jurist.rubrics import evaluate_batch
from jurist.rubrics.batch import EXIT_BUDGET
from jurist.rubrics.models import Rubric, RubricSet
from jurist.store import Store
from jurist.testing import ProviderServer, Reply

from tests.cli.test_cli import FREE, env_for
from tests.conftest import run_cli
from tests.rubrics.test_batch import make_sessions

ONE = RubricSet(rubrics=[Rubric(id="a", name="A", scoring_criteria="c")])
PER_CALL = float(calc_price(Usage(input_tokens=1000, output_tokens=500), "gpt-4o-mini",
                            provider_id="openai").total_price)


def call(cid: str, cost: float | None, note: str | None) -> CallRecord:
    return CallRecord(id=cid, trace_id="t", purpose="rubric_judge", model="openai/gpt-4o-mini",
                      endpoint="https://api.openai.com/v1", messages=[{"role": "user", "content": "hi"}], params={},
                      request_hash=cid, response_text="SCORE: 4", input_tokens=1000, output_tokens=500,
                      latency_ms=12.0, attempts=1, status="ok", cost_usd=cost, cost_note=note)


def stored_calls(db: str) -> Store:
    store = Store(db)
    store.record_call(call("priced", PER_CALL, None))
    store.record_call(call("free", 0.0, "offline judge: no charge"))
    store.record_call(call("unknown", None, "http://127.0.0.1:9/v1 is not a provider's API"))
    store.flush()
    return store


def test_logs_show_each_cost_and_the_total_with_the_unknown_ones(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/j.db"
    stored_calls(db).close()
    shown = run_cli("logs", "--db", db, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.split())
    assert "$0.00045" in text and "unknown" in text
    assert f"cost of these 3 calls: ${PER_CALL:.2g} (unknown for 1 call: not included)" in text
    rows = {json.loads(line)["id"]: json.loads(line)
            for line in run_cli("logs", "--json", "--db", db, cwd=tmp_path).stdout.splitlines()}
    assert {k: (r["cost_usd"], r["cost_note"]) for k, r in rows.items()} == {
        "priced": (pytest.approx(PER_CALL), None), "free": (0.0, "offline judge: no charge"),
        "unknown": (None, "http://127.0.0.1:9/v1 is not a provider's API")}


def test_the_dashboard_overview_shows_the_cost(tmp_path: Path) -> None:
    from jurist.server import create_app

    store = stored_calls(f"sqlite:///{tmp_path}/j.db")
    try:
        with TestClient(create_app(Settings(home=str(tmp_path)), store=store), base_url="http://localhost") as client:
            page = client.get("/evaluation?period=all").text
            metrics = client.get("/api/evaluation/metrics").json()
    finally:
        store.close()
    assert re.search(r'id="m-cost">\$0\.00045 ', page)
    assert re.search(r'id="m-cost-unknown">\(unknown for 1 call: not included\)', page)
    assert metrics["calls"]["cost_usd"] == pytest.approx(PER_CALL) and metrics["calls"]["cost_unknown_calls"] == 1


def test_max_cost_with_a_price_it_cannot_know_is_refused_before_any_call(provider, tmp_path: Path) -> None:
    sessions = make_sessions(tmp_path / "sessions", 2)
    env = env_for(provider, tmp_path)  # openai/gpt-4o-mini at a server on 127.0.0.1: not OpenAI's prices
    args = ("evaluate-batch", "--rubrics", FREE, "--sessions-dir", str(sessions), "--output-dir", str(tmp_path / "o"))
    refused = run_cli(*args, "--max-cost", "0.01", env=env, cwd=tmp_path)
    assert refused.returncode == 2 and provider.requests == []
    message = " ".join(refused.stderr.split())
    assert "--max-cost cannot be kept" in message and provider.base_url in message
    assert "--allow-unknown-cost" in message
    provider.default = Reply(text="SCORE: 4\nREASONING: fine")
    ran = run_cli(*args, "--max-cost", "0.01", "--allow-unknown-cost", env=env, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert "the budget counts only known costs" in " ".join(ran.stderr.split())
    n = len(provider.requests)
    cost = json.loads((tmp_path / "o" / "summary.json").read_text())["cost"]
    assert n > 0 and cost["calls"] == n and cost["cost_unknown_calls"] == n and cost["cost_usd"] == 0
    assert cost["max_cost_usd"] == 0.01 and not cost["stopped_by_budget"]
    assert f"unknown for {n} calls" in " ".join(ran.stdout.split())


def test_a_dry_run_prints_the_expected_calls_and_makes_none(provider, tmp_path: Path) -> None:
    sessions = make_sessions(tmp_path / "sessions", 3)
    rubrics = json.loads(Path(FREE).read_text())
    shown = run_cli("evaluate-batch", "--rubrics", FREE, "--sessions-dir", str(sessions), "--output-dir",
                    str(tmp_path / "o"), "--dry-run", env=env_for(provider, tmp_path), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert provider.requests == [] and not (tmp_path / "o").exists()
    text = " ".join(shown.stdout.split())
    calls = 3 * len(rubrics["rubrics"])
    assert "expected calls (none made)" in text and "openai/gpt-4o-mini" in text
    assert f"3 sessions would be scored (0 already done): {calls} calls" in text
    assert f"the cost of {calls} calls is unknown" in text  # a server on 127.0.0.1 is not OpenAI
    assert "estimate" in text  # no tokenizer of the model available offline here: said so


async def test_max_cost_stops_the_batch_cleanly_and_a_rerun_resumes_and_finishes(tmp_path: Path, capsys) -> None:
    sessions = make_sessions(tmp_path / "sessions", 6)
    out = tmp_path / "out"
    settings = Settings.load(database_url=f"sqlite:///{tmp_path}/j.db")
    with ProviderServer(Reply(text='{"score": 4, "reasoning": "ok"}', input_tokens=1000, output_tokens=500)) as server:
        def judge() -> Model:  # a gateway at 127.0.0.1 that charges OpenAI's prices
            return Model(OpenAIChat("gpt-4o-mini", base_url=server.base_url, api_key="k"), Limiter(4),
                         prices_from="openai", cache=False)

        budget = CostBudget(max_usd=PER_CALL * 2.5)  # spent by the third call
        with charged_to(budget):
            stopped = await evaluate_batch(ONE, sessions, out, judge=judge(), settings=settings, parallel=1)
        assert len(server.requests) == 3 and stopped.exit_code == EXIT_BUDGET == 3
        assert (stopped.scored, stopped.budget_stopped) == (3, 3) and stopped.budget_note
        summary = json.loads((out / "summary.json").read_text())
        assert summary["batch_summary"]["total_sessions"] == 3
        assert summary["cost"] == {"cost_usd": pytest.approx(3 * PER_CALL), "calls": 3, "cost_unknown_calls": 0,
                                   "max_cost_usd": PER_CALL * 2.5, "stopped_by_budget": True,
                                   "sessions_not_scored": 3}
        assert len(list(out.glob("*_result.json"))) == 3
        print_batch_report(stopped)
        shown = " ".join(capsys.readouterr().out.split())
        assert f"cost of this run's 3 calls: {format_usd(3 * PER_CALL)}, budget {format_usd(PER_CALL * 2.5)}" in shown
        assert "3 sessions were not scored; rerun with a larger --max-cost to resume" in shown

        with charged_to(CostBudget(max_usd=1.0)):
            done = await evaluate_batch(ONE, sessions, out, judge=judge(), settings=settings, parallel=1)
        assert len(server.requests) == 6  # no session judged twice
        assert (done.scored, done.skipped, done.budget_stopped, done.exit_code) == (3, 3, 0, 0)
        finished = json.loads((out / "summary.json").read_text())
        assert finished["batch_summary"]["total_sessions"] == 6
        assert finished["cost"]["cost_usd"] == pytest.approx(3 * PER_CALL) and not finished["cost"]["stopped_by_budget"]


async def test_a_call_waiting_when_the_budget_runs_out_never_starts_and_its_session_is_resumed(tmp_path: Path) -> None:
    sessions = make_sessions(tmp_path / "sessions", 2)
    out = tmp_path / "out"
    two = RubricSet(rubrics=[Rubric(id="a", name="A", scoring_criteria="c"),
                             Rubric(id="b", name="B", scoring_criteria="d")])
    db = f"sqlite:///{tmp_path}/j.db"
    settings = Settings.load(database_url=db)
    store = Store(db)
    with ProviderServer(Reply(text='{"score": 4, "reasoning": "ok"}', input_tokens=1000, output_tokens=500)) as server:
        def judge() -> Model:  # one call at a time: a session's second rubric waits for the first
            return Model(OpenAIChat("gpt-4o-mini", base_url=server.base_url, api_key="k"), Limiter(1),
                         prices_from="openai", sink=store)

        with charged_to(CostBudget(max_usd=PER_CALL / 2)):
            stopped = await evaluate_batch(two, sessions, out, judge=judge(), settings=settings, parallel=1)
        assert len(server.requests) == 1 and stopped.exit_code == 3
        assert (stopped.scored, stopped.budget_stopped) == (0, 2) and not list(out.glob("*_result.json"))
        store.flush()
        refused = [c for c in store.calls(limit=None) if c["status"] == "error"]
        assert len(refused) == 1 and refused[0]["error"].startswith("BudgetExceeded:")
        assert (refused[0]["cost_usd"], refused[0]["cost_note"]) == (0.0, "not made: the cost budget was spent")

        with charged_to(CostBudget(max_usd=1.0)):
            done = await evaluate_batch(two, sessions, out, judge=judge(), settings=settings, parallel=1)
        # the first rubric's answer came from the call cache: 3 more requests, not 4
        assert len(server.requests) == 4 and (done.scored, done.exit_code) == (2, 0)
        assert done.summary["cost"]["cost_usd"] == pytest.approx(3 * PER_CALL)
    store.close()


def test_cost_options_that_cannot_hold_are_refused_before_any_call(provider, tmp_path: Path) -> None:
    sessions = make_sessions(tmp_path / "sessions", 1)
    args = ("evaluate-batch", "--rubrics", FREE, "--sessions-dir", str(sessions), "--output-dir", str(tmp_path / "o"))
    env = env_for(provider, tmp_path)
    on_ray = run_cli(*args, "--engine", "ray", "--max-cost", "1", env=env, cwd=tmp_path)
    assert on_ray.returncode == 2 and "--engine local" in " ".join(on_ray.stderr.split())
    alone = run_cli(*args, "--allow-unknown-cost", env=env, cwd=tmp_path)
    assert alone.returncode == 2 and "--allow-unknown-cost goes with --max-cost" in " ".join(alone.stderr.split())
    assert provider.requests == [] and not (tmp_path / "o").exists()
