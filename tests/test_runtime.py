"""The runtime owns what the capabilities share: settings, the store, and the pool of
endpoint limiters every model it resolves takes its bound from."""

from __future__ import annotations

import pytest

import jurist
from jurist.checklist import ChecklistSession
from jurist.config import Settings
from jurist.errors import ConfigError, UsageError
from jurist.judges.panel import Panel, Role
from jurist.models import LimiterPool, script
from jurist.research.evaluation import ResearchEvaluation

ROLE_REPLY = '{"scores": {"accuracy": 0.9}, "confidence": 0.9, "critique": "fine"}'


def test_models_take_their_limiter_from_the_runtimes_pool(tmp_path):
    pool = LimiterPool()
    with jurist.open(judge="scripted/j", database_url=f"sqlite:///{tmp_path / 'a.db'}", limiters=pool) as rt:
        model = rt.model("scripted/j")
        assert model.limiter is pool.get(model.endpoint)
        assert rt.judge().limiter is model.limiter  # one bound per endpoint in the runtime
    with jurist.open(judge="scripted/j", database_url=f"sqlite:///{tmp_path / 'b.db'}") as other:
        assert other.model("scripted/j").limiter is not model.limiter  # the process's pool, not the given one


async def test_a_panel_given_a_runtime_resolves_through_it_and_records_in_its_store(tmp_path):
    pool = LimiterPool()
    script("role", default=ROLE_REPLY)
    async with jurist.open(database_url=f"sqlite:///{tmp_path / 'p.db'}", limiters=pool) as rt:
        panel = Panel([Role("expert", ["accuracy"], instructions="Check the facts.")], {"accuracy": 1.0}, runtime=rt,
                      model="scripted/role")
        result = await panel.evaluate({"answer": "Paris."}, task="Judge it.", trace_id="t-panel")
        assert result.status == "ok"
        [(_, judge)] = panel._judges
        assert judge.model.limiter is pool.get("scripted:role")
        await rt.aflush()
        assert [c["purpose"] for c in rt.store.calls(trace_id="t-panel")] == ["panel_role"]


def test_a_panel_needs_a_runtime_or_settings():
    with pytest.raises(ConfigError, match="runtime="):
        Panel([Role("expert", ["accuracy"])], {"accuracy": 1.0}, model="scripted/role")


async def test_research_panels_and_critic_use_the_runtimes_limiters(tmp_path):
    pool = LimiterPool()
    async with jurist.open(judge="scripted/r", database_url=f"sqlite:///{tmp_path / 'r.db'}", limiters=pool) as rt:
        ev = ResearchEvaluation(runtime=rt)
        critic = ev._build_critic()
        assert critic.model.limiter is pool.get(critic.model.endpoint)
        panel = ev.build_panel("plan")
        assert panel._judges and all(j.model.limiter is pool.get(j.model.endpoint) for _, j in panel._judges)


async def test_a_checklist_session_runs_in_the_runtime_it_is_given(tmp_path):
    pool = LimiterPool()
    script("tutor", default="Tell me what you remember.")
    checklist = {"title": "Rivers", "points": [{"id": "p1", "text": "The Nile is in Africa."}]}
    async with jurist.open(database_url=f"sqlite:///{tmp_path / 'c.db'}", limiters=pool) as rt:
        session = await ChecklistSession.start(checklist, runtime=rt, tutor="scripted/tutor",
                                               judge="scripted/tutor")
        assert session.tutor.limiter is pool.get("scripted:tutor")
        assert session.store is rt.store
        resumed = await ChecklistSession.resume(session.session_id, runtime=rt)
        assert resumed.checklist.title == "Rivers"
        await session.aclose()
        await resumed.aclose()


async def test_a_checklist_session_needs_a_runtime_or_a_store():
    with pytest.raises(UsageError, match="runtime="):
        await ChecklistSession.start({"title": "T", "points": [{"id": "p", "text": "x"}]},
                                     settings=Settings())
