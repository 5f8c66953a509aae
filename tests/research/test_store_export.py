"""The record through the store (SQLite and PostgreSQL) and through `jurist export`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from jurist.errors import InputError
from jurist.research import EvaluationRecord, ResearchEvaluation, export_record, research_config
from jurist.research import stages as st
from jurist.store import Store

from tests.conftest import _CLEARED, run_cli
from tests.research.fakes import (
    BAD_ANSWER, BAD_PLAN, GOOD_ANSWER, GOOD_PLAN, GOOD_RETRIEVAL, SOURCES, FakeEvaluator, Planner, Synthesiser,
)
from tests.research.test_plan import critic, critic_reply

QUERY = "What are the 2024 breakthroughs in quantum computing?"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/research.db"
    return request.getfixturevalue("pg_url")


async def full_run(store: Store) -> ResearchEvaluation:
    evaluators = {st.PLAN: FakeEvaluator(st.PLAN, BAD_PLAN, GOOD_PLAN),
                  st.RETRIEVAL: FakeEvaluator(st.RETRIEVAL, dict(GOOD_RETRIEVAL, context_recall=0.4)),
                  st.ANSWER: FakeEvaluator(st.ANSWER, BAD_ANSWER, GOOD_ANSWER)}
    ev = ResearchEvaluation(research_config({}), store=store, evaluators=evaluators,
                            critic=critic(critic_reply("targeted_fix")))
    planner, synth = Planner(), Synthesiser()

    async def search(query: str, plan: object) -> list[object]:
        return SOURCES

    result = await ev.run(QUERY, planner, search, synth)
    assert result.answer == "answer 2" and result.plan["objective"] == "plan 2"
    return ev


async def test_record_round_trips_through_the_store(db_url):
    store = Store(db_url)
    try:
        ev = await full_run(store)
        rec = ev.record()
        [row] = [r for r in store.evaluations(kind="research", limit=None) if r["id"] == ev.log_id]
        assert row["subject_id"] == rec.query_id and row["trace_id"] == ev.log_id and row["status"] == "scored"
        assert row["score"] == pytest.approx(rec.overall_score) and row["max_score"] == 1.0
        assert row["judge_model"] == "fake/model"
        assert row["payload"] == rec.to_json()
        assert EvaluationRecord.model_validate(row["payload"]) == rec
        assert row["payload"]["logId"] == ev.log_id and row["payload"]["userQuery"] == QUERY
        assert row["payload"]["planEvaluation"]["attempts"][0]["iterationDecision"]["mode"] == "targeted_fix"
        assert row["payload"]["retrievalEvaluation"]["flaggedSevere"] is True
        assert row["payload"]["answerEvaluation"]["regenerated"] is True
        scores = {s.key: s for s in store.scores_of(ev.log_id)}
        assert set(scores) == {"overall", "plan.overall", "retrieval.overall", "answer.overall",
                               *(f"{s}.{d.key}" for s in st.STAGE_NAMES for d in st.DIMENSIONS[s])}
        assert scores["plan.query_coverage"].score == 0.85 and scores["plan.query_coverage"].weight == 0.35
        assert scores["retrieval.context_recall"].score == 0.4
        assert scores["answer.faithfulness"].score == 0.9 and scores["answer.faithfulness"].status == "scored"
        assert scores["overall"].score == pytest.approx(rec.overall_score)
        plan_o, ret_o, ans_o = (rec.plan_evaluation.overall, rec.retrieval_evaluation.overall,
                                rec.answer_evaluation.overall)
        assert rec.overall_score == pytest.approx(round((plan_o + ret_o + ans_o) / 3, 4))
    finally:
        store.close()


async def test_partial_record_status(tmp_path):
    store = Store(f"sqlite:///{tmp_path}/p.db")
    try:
        ev = ResearchEvaluation(research_config({}), store=store,
                                evaluators={st.PLAN: FakeEvaluator(st.PLAN, RuntimeError("down"))}, critic=None)
        await ev.evaluate_plan(QUERY, Planner())
        await ev.save()
        [row] = store.evaluations(kind="research")
        assert row["status"] == "skipped" and row["score"] is None
        scores = {s.key: s for s in store.scores_of(ev.log_id)}
        assert scores["plan.intent_alignment"].status == "skipped"
        assert scores["plan.overall"].reason == "RuntimeError: down"
    finally:
        store.close()


@pytest.mark.parametrize("config, replies, hit", [
    ({}, (BAD_PLAN, BAD_PLAN, BAD_PLAN), True),  # three attempts of three, the last failed
    ({}, (BAD_PLAN, GOOD_PLAN), False),  # passed on the second attempt
    ({"iteration": {"max_attempts": 2}}, (BAD_PLAN, BAD_PLAN), True),
    ({"evaluation": {"planEvaluation": {"iterationEnabled": False}}}, (BAD_PLAN,), False),  # no loop
    ({}, (BAD_PLAN, RuntimeError("panel down")), False),  # stopped by a failure, not by the limit
])
async def test_max_attempts_hit_is_stored(tmp_path, config, replies, hit):
    store = Store(f"sqlite:///{tmp_path}/m.db")
    try:
        ev = ResearchEvaluation(research_config(config), store=store,
                                evaluators={st.PLAN: FakeEvaluator(st.PLAN, *replies)},
                                critic=critic(*[critic_reply("targeted_fix")] * 3))
        await ev.evaluate_plan(QUERY, Planner())
        await ev.save()
        [row] = store.evaluations(kind="research")
        plan = row["payload"]["planEvaluation"]
        assert row["max_attempts_hit"] is hit, plan
        assert row["iterations"] == max(1, plan["totalIterations"])
    finally:
        store.close()


def _export_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`jurist export` by run_cli once cli/main.py registers it; until then the same app plus register()."""
    from jurist.cli.main import app

    if any(c.name == "export" for c in app.registered_commands):
        return run_cli("export", *args, env=env)
    code = ("import sys; from jurist.cli.main import app; from jurist.cli.research import register; "
            "register(app); app()")
    full_env = {k: v for k, v in __import__("os").environ.items() if k not in _CLEARED}
    full_env.update(env, COLUMNS="200")
    return subprocess.run([sys.executable, "-c", code, "export", *args], capture_output=True, text=True,
                          env=full_env, timeout=300)


async def test_export_writes_the_notes_folder(db_url, tmp_path):
    store = Store(db_url)
    try:
        ev = await full_run(store)
    finally:
        store.close()
    out = tmp_path / "exported"
    r = _export_cli(ev.log_id, "--output-dir", str(out), env={"JURIST_DATABASE_URL": db_url})
    assert r.returncode == 0, r.stdout + r.stderr
    folder = out / ev.log_id
    record = json.loads((folder / "evaluation.json").read_text())
    assert record["logId"] == ev.log_id and record["overallScore"] == ev.record().overall_score
    attempts = sorted(p.name for p in (folder / "plan_attempts").iterdir())
    assert attempts == ["attempt_1.json", "attempt_2.json"]
    a1 = json.loads((folder / "plan_attempts" / "attempt_1.json").read_text())
    assert a1["attemptNumber"] == 1 and a1["plan"]["objective"] == "plan 1" and a1["passed"] is False
    responses = sorted(p.name for p in (folder / "evaluator_responses").iterdir())
    assert responses == ["fake_judge.json", "plan_critic.json"]
    fake = json.loads((folder / "evaluator_responses" / "fake_judge.json").read_text())
    assert [(e["stage"], e["attempt"]) for e in fake] == [
        ("plan", 1), ("plan", 2), ("retrieval", None), ("answer", 1), ("answer", 2)]
    assert fake[0]["rawResponse"] == '{"fake": true}' and fake[0]["tokensUsed"] == 42
    assert ev.log_id in r.stdout and "evaluation.json" in r.stdout


async def test_export_unknown_id_is_a_clear_error(tmp_path):
    url = f"sqlite:///{tmp_path}/empty.db"
    r = _export_cli("0123456789abcdef", "--output-dir", str(tmp_path / "x"), env={"JURIST_DATABASE_URL": url})
    assert r.returncode == 2
    assert "no research evaluation with log id '0123456789abcdef'" in r.stderr
    assert not (tmp_path / "x").exists()
    store = Store(url)
    try:
        with pytest.raises(InputError, match="no research evaluation"):
            export_record(store, "nope", tmp_path / "y")
    finally:
        store.close()


def test_log_id_is_checked():
    with pytest.raises(InputError, match="1 to 32"):
        ResearchEvaluation(research_config({}), log_id="x" * 40)
    assert ResearchEvaluation(research_config({}), log_id="abc-1").log_id == "abc-1"


async def test_escalation_is_exported(tmp_path):
    from jurist.judges.panel import Escalation

    from tests.research.fakes import panel_result

    esc = Escalation(triggers=["disagreement"], model="openai/strong", panel_review="roles disagree",
                     trust_decisions={"fake_judge": 0.9}, final_verdict="pass", scores=GOOD_PLAN, latency_ms=3.0,
                     tokens_used=7)
    store = Store(f"sqlite:///{tmp_path}/e.db")
    try:
        ev = ResearchEvaluation(research_config({}), store=store, critic=None,
                                evaluators={st.PLAN: FakeEvaluator(st.PLAN, panel_result(GOOD_PLAN, escalation=esc))})
        await ev.evaluate_plan(QUERY, Planner())
        rec = await ev.save()
        assert rec.plan_evaluation.escalated_to_large_model
        attempt = rec.plan_evaluation.attempts[0]
        assert attempt.escalation.trigger == "disagreement" and attempt.escalation.trust_decisions == {"fake_judge": 0.9}
        folder = export_record(store, ev.log_id, tmp_path / "out")
        [entry] = json.loads((folder / "evaluator_responses" / "escalation.json").read_text())
        assert entry["model"] == "openai/strong" and entry["panelReview"] == "roles disagree"
    finally:
        store.close()


async def test_export_reads_an_old_row_through_read_payload_and_walks_the_model(tmp_path):
    """A record stored before ``kind`` and ``version`` existed exports as today's record; a payload
    that is no research record is a PayloadError naming what does not fit."""
    from sqlalchemy import update

    from jurist.errors import PayloadError
    from jurist.store.tables import evaluations

    store = Store(f"sqlite:///{tmp_path}/old.db")
    try:
        ev = ResearchEvaluation(research_config({}), store=store, critic=None,
                                evaluators={st.PLAN: FakeEvaluator(st.PLAN, GOOD_PLAN)})
        await ev.evaluate_plan(QUERY, Planner())
        rec = await ev.save()
        old = {k: v for k, v in rec.to_json().items() if k not in ("kind", "version")}
        with store.engine.begin() as conn:
            conn.execute(update(evaluations).where(evaluations.c.id == ev.log_id).values(payload=old))
        folder = export_record(store, ev.log_id, tmp_path / "out")
        written = json.loads((folder / "evaluation.json").read_text())
        assert (written["kind"], written["version"]) == ("research", "1.0") and written == rec.to_json()
        [first] = json.loads((folder / "evaluator_responses" / "fake_judge.json").read_text())
        assert (first["stage"], first["attempt"], first["latency"]) == ("plan", 1, 1.5) and "latency_ms" not in first
        with store.engine.begin() as conn:
            conn.execute(update(evaluations).where(evaluations.c.id == ev.log_id).values(
                payload={"session_id": "s1", "summary": {}}))
        with pytest.raises(PayloadError, match="research payload does not fit"):
            export_record(store, ev.log_id, tmp_path / "again")
    finally:
        store.close()
