"""The prompt lab's routes: an active stored version and A/B tests reach every shipped prompt."""

import json

import pytest

from jurist.analysis import (ab_report, activate_version, active_routes, create_prompt_version, list_tests,
                             start_test, stop_test)
from jurist.errors import InputError, NotFound
from jurist.gate import Gate, GateConfig
from jurist.judges import Panel, Role
from jurist.judges.templates import builtin
from jurist.models.scripted import script
from jurist.prompt_router import PromptRouter, arm_of, bucket
from jurist.runtime import Runtime
from jurist.store import prompt_routes as q
from tests.gate.helpers import QUESTION, good

MARK_B = "VERSION-B-MARKER: judge strictly."


def _text(messages) -> str:
    return "\n".join(m.text for m in messages)


async def _version_b(store, name: str) -> dict:
    return await create_prompt_version(store, name, builtin(name).text + f"\n{MARK_B}\n", note="stricter")


def _gate(store) -> Gate:
    return Gate(GateConfig(strategy="blocking"), runtime=Runtime(store=store), judge="scripted/judge")


async def _gate_runs(store, questions: list[str]) -> list:
    g = _gate(store)
    out = []
    for q_text in questions:
        messages = [{"role": "user", "content": q_text}]
        out.append(await g.run(messages, "scripted/gen", wait_for_evaluation=True))
    await store.aflush()
    return out


def _judge_calls(store, purpose: str) -> list[dict]:
    return store.calls(limit=None, purpose=purpose)


async def test_an_active_version_changes_the_gate_judges_prompt(store):
    script("gen", default="The tower was built in 1889 and is 330 m tall.")
    judge = script("judge", default=good(0.9))
    await _gate_runs(store, ["When was the Eiffel Tower built?"])
    assert MARK_B not in _text(judge.requests[-1].messages)
    v2 = await _version_b(store, "gate_quality")
    await activate_version(store, "gate_quality", 2)
    assert (await active_routes(store))["gate_quality"].version == 2
    await _gate_runs(store, ["When was the Eiffel Tower built?"])
    assert MARK_B in _text(judge.requests[-1].messages)
    hashes = [c["template_hash"] for c in _judge_calls(store, "quality_evaluation")]
    assert set(hashes) == {builtin("gate_quality").hash, v2.hash}
    # Back to the shipped text: version 1.
    await activate_version(store, "gate_quality", 1)
    await _gate_runs(store, ["When was the Eiffel Tower finished?"])
    assert MARK_B not in _text(judge.requests[-1].messages)


async def test_panel_roles_are_routed_too(store):
    await _version_b(store, "panel_role")
    await activate_version(store, "panel_role", 2)
    judge = script("judge", default=json.dumps({"scores": {"intent": 0.9}, "confidence": 0.9, "critique": "ok"}))
    panel = Panel([Role("analyst", ["intent"])], {"intent": 1.0}, runtime=Runtime(store=store),
                  model="scripted/judge")
    result = await panel.evaluate({"plan": "the plan"}, task="Judge the plan.")
    assert result.status == "ok"
    assert MARK_B in _text(judge.requests[-1].messages)


async def test_the_checklist_tutors_prompt_is_routed_too(store):
    """The tutor's instructions are a shipped prompt like the judges': an active version reaches
    the tutor's next reply, and its call record names the version's hash."""
    from jurist.checklist import ChecklistSession
    from tests.checklist.conftest import CAFFEINE, judge_reply

    script("cljudge", default=judge_reply(("adenosine", 0.9)))
    tutor = script("cltutor", default="Good. What else do you remember?")
    session = await ChecklistSession.start(CAFFEINE, runtime=Runtime(store=store), tutor="scripted/cltutor",
                                           judge="scripted/cljudge")
    await session.process_user_message("It blocks adenosine receptors.")
    assert MARK_B not in _text(tutor.requests[-1].messages)
    v2 = await _version_b(store, "checklist_tutor")
    await activate_version(store, "checklist_tutor", 2)
    session.prompts.forget()  # the router re-reads its routes every 2 s; this reads them now
    await session.process_user_message("Its half-life is about five hours.")
    assert MARK_B in _text(tutor.requests[-1].messages)
    await store.aflush()
    hashes = [c["template_hash"] for c in store.calls(limit=None, purpose="checklist_tutor")]
    assert sorted(hashes) == sorted([builtin("checklist_tutor").hash, v2.hash])
    await session.aclose()


async def test_an_ab_test_routes_its_share_deterministically(store):
    script("gen", default="An answer.")
    judge = script("judge", default=good(0.8))
    v2 = await _version_b(store, "gate_quality")
    test = await start_test(store, "gate_quality", 1, 2, share=0.5, calls=1000)
    assert test.running and test.calls_a == 0 and test.calls_b == 0
    questions = [f"Question number {i}?" for i in range(60)]
    await _gate_runs(store, questions)
    route = (await active_routes(store))["gate_quality"]
    assert isinstance(route, q.TestRoute) and route.id == test.id and route.share == 0.5
    expected_b = sum(arm_of(route,
                            _route_key([{"role": "user", "content": q_text}])) == "b" for q_text in questions)
    calls = _judge_calls(store, "quality_evaluation")
    by_hash = {h: sum(c["template_hash"] == h for c in calls) for h in (builtin("gate_quality").hash, v2.hash)}
    assert by_hash[v2.hash] == expected_b and 15 <= expected_b <= 45  # about half
    assert by_hash[builtin("gate_quality").hash] == 60 - expected_b
    marked = sum(MARK_B in _text(r.messages) for r in judge.requests)
    assert marked == expected_b
    # A rerun goes to the same arms: the judge calls are answered from the cache.
    before = len(judge.requests)
    await _gate_runs(store, questions)
    assert len(judge.requests) == before
    report = await ab_report(store, test.id)
    assert (report.calls_a, report.calls_b) == (60 - expected_b, expected_b)  # cached calls not counted


def _route_key(messages: list[dict]) -> str:
    from jurist.judges.templates import variables_key

    return variables_key({"conversation": messages})


async def test_the_arm_depends_on_the_test_and_the_key_only():
    assert bucket("t1", "k") == bucket("t1", "k")
    assert 0.0 <= bucket("t1", "k") < 1.0
    shares = [bucket("t1", f"k{i}") < 0.2 for i in range(5000)]
    assert 0.17 < sum(shares) / 5000 < 0.23


async def test_the_call_count_ends_the_test_and_a_takes_over(store):
    script("gen", default="An answer.")
    judge = script("judge", default=good(0.7))
    await _version_b(store, "gate_quality")
    test = await start_test(store, "gate_quality", 1, 2, share=0.5, calls=3)
    await _gate_runs(store, [f"Q{i}?" for i in range(30)])
    router = PromptRouter(store, refresh=0)
    resolved = await router.resolve(builtin("gate_quality"), "any key")
    assert resolved.hash == builtin("gate_quality").hash  # ended: version A
    report = await ab_report(store, test.id)
    assert not report.running and report.ended_because == "each version had at least 3 calls"
    assert report.routed_calls is not None and report.routed_calls >= 6
    routes = await active_routes(store)
    assert routes["gate_quality"].status == q.ACTIVE and routes["gate_quality"].version == 1
    judge.requests.clear()
    await _gate_runs(store, [f"Fresh question {i}?" for i in range(5)])
    assert not any(MARK_B in _text(r.messages) for r in judge.requests)


async def test_significance_ends_the_test_and_the_better_version_is_kept(store):
    pytest.importorskip("scipy")
    script("gen", default="An answer.")

    def score_by_version(request) -> str:  # version B's judge scores lower
        return good(0.3 if MARK_B in _text(request.messages) else 0.9)

    script("judge", default=score_by_version)
    await _version_b(store, "gate_quality")
    test = await start_test(store, "gate_quality", 1, 2, share=0.5, alpha=0.01, better="lower")
    await _gate_runs(store, [f"Question {i}?" for i in range(50)])
    report = await ab_report(store, test.id)
    assert not report.running, report
    assert report.comparison is not None and report.comparison.significant
    assert report.comparison.mean_b < report.comparison.mean_a
    assert report.ended_because.startswith("significant at alpha 0.01") and "version 2 kept" in report.ended_because
    assert (await active_routes(store))["gate_quality"].version == 2


async def test_not_significant_keeps_running(store):
    pytest.importorskip("scipy")
    script("gen", default="An answer.")
    script("judge", default=good(0.8))
    await _version_b(store, "gate_quality")
    test = await start_test(store, "gate_quality", 1, 2, share=0.5, alpha=0.05)
    await _gate_runs(store, [f"Question {i}?" for i in range(20)])
    report = await ab_report(store, test.id)
    assert report.running and report.comparison is not None and not report.comparison.significant
    assert report.comparison.n_a + report.comparison.n_b == 20


async def test_stop_start_and_refusals(store):
    await _version_b(store, "gate_quality")
    with pytest.raises(InputError, match="end condition"):
        await start_test(store, "gate_quality", 1, 2, share=0.5)
    with pytest.raises(InputError, match="share"):
        await start_test(store, "gate_quality", 1, 2, share=1.0, calls=10)
    with pytest.raises(InputError, match="two different versions"):
        await start_test(store, "gate_quality", 2, 2, calls=10)
    with pytest.raises(NotFound):
        await start_test(store, "gate_quality", 1, 7, calls=10)
    with pytest.raises(NotFound):
        await start_test(store, "no_such_prompt", 1, 2, calls=10)
    first = await start_test(store, "gate_quality", 1, 2, calls=10)
    second = await start_test(store, "gate_quality", 2, 1, share=0.2, calls=10)
    tests = await list_tests(store, "gate_quality")
    assert [t.id for t in tests] == [second.id, first.id]
    assert tests[1].ended_because == f"replaced by test {second.id}"
    stopped = await stop_test(store, second.id, version=1)
    assert not stopped.running and stopped.ended_because == "stopped in the lab; version 1 kept"
    with pytest.raises(InputError, match="already ended"):
        await stop_test(store, second.id)
    assert (await active_routes(store))["gate_quality"].version == 1


async def test_user_templates_are_not_routed(store):
    from jurist.judges.templates import PromptTemplate

    await _version_b(store, "gate_quality")
    await activate_version(store, "gate_quality", 2)
    router = PromptRouter(store, refresh=0)
    own = PromptTemplate(name="gate_quality", version="x", text=builtin("gate_quality").text, source="mine.txt")
    assert await router.resolve(own, "k") is own
    routed = await router.resolve(builtin("gate_quality"), "k")
    assert MARK_B in routed.text


async def test_routing_survives_an_unreadable_store(tmp_path):
    from jurist.store import Store

    s = Store(f"sqlite:///{tmp_path}/gone.db")
    s.close()
    router = PromptRouter(s, refresh=0)
    shipped = builtin("gate_quality")
    assert await router.resolve(shipped, "k") is shipped


async def test_an_ab_test_records_each_routed_calls_judge_and_never_pools_judges(store):
    """Two judges scored the versions during one test (the second scores B far lower): the report
    counts the routed calls per judge, and the comparison refuses to pool them."""
    pytest.importorskip("scipy")
    script("gen", default="An answer.")
    script("judge", default=good(0.8))
    script("judge2", default=lambda request: good(0.2 if MARK_B in _text(request.messages) else 0.9))
    await _version_b(store, "gate_quality")
    test = await start_test(store, "gate_quality", 1, 2, share=0.5, alpha=0.05)
    await _gate_runs(store, [f"Question {i}?" for i in range(20)])
    other = Gate(GateConfig(strategy="blocking"), runtime=Runtime(store=store), judge="scripted/judge2")
    for i in range(20):
        await other.run([{"role": "user", "content": f"Another question {i}?"}], "scripted/gen",
                        wait_for_evaluation=True)
    await store.aflush()
    report = await ab_report(store, test.id)
    by_judge = {j.judge_model: (j.calls_a, j.calls_b) for j in report.calls_by_judge}
    assert set(by_judge) == {"scripted/judge", "scripted/judge2"}
    assert sum(a for a, _ in by_judge.values()) == report.calls_a and sum(b for _, b in by_judge.values()) == (
        report.calls_b)
    cmp = report.comparison
    assert cmp is not None and cmp.design == "randomized" and cmp.test is None and not cmp.significant
    assert cmp.refused == ("not compared: 2 judge models scored both versions (scripted/judge, scripted/judge2); "
                           "verdicts of different judges are not pooled: choose one judge")
    assert {j.judge_model for j in cmp.judges} == {"scripted/judge", "scripted/judge2"}
    assert report.running  # a refused comparison never ends a test


async def test_routes_are_stored_as_their_params(store):
    """The routes' rows keep the params JSON they always had (keys and order)."""
    v2 = await _version_b(store, "gate_quality")
    test = await start_test(store, "gate_quality", 1, 2, share=0.25, calls=50)
    await activate_version(store, "gate_quality", 2)
    from sqlalchemy import select

    from jurist.store.tables import analysis_runs

    rows = store.read(lambda conn: conn.execute(select(analysis_runs.c.id, analysis_runs.c.status,
                                                       analysis_runs.c.params)).all())
    params = {r.status: r.params for r in rows}
    assert list(params[q.TEST_DONE].items()) == [
        ("prompt", "gate_quality"), ("a", 1), ("b", 2), ("hash_a", builtin("gate_quality").hash),
        ("hash_b", v2.hash), ("share", 0.25), ("calls", 50), ("alpha", None), ("better", "higher")]
    assert params[q.ACTIVE] == {"prompt": "gate_quality", "version": 2}
    [stored] = await list_tests(store, "gate_quality")
    assert stored.id == test.id and not stored.running and stored.ended_because == "version 2 was activated"
