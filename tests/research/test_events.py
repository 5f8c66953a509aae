"""The events of a running research evaluation, in order, and the proceed / retry decision."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from pydantic import TypeAdapter

from jurist.errors import InputError, ResearchBlocked
from jurist.research import ResearchEvaluation, ResearchEvent, research_config
from jurist.research import stages as st
from jurist.store import Store

from tests.research.fakes import (
    BAD_ANSWER, BAD_PLAN, GOOD_ANSWER, GOOD_PLAN, GOOD_RETRIEVAL, SOURCES, FakeEvaluator, Planner, Synthesiser,
)
from tests.research.test_plan import critic, critic_reply

QUERY = "What are the 2024 breakthroughs in quantum computing?"
SEVERE = dict(GOOD_RETRIEVAL, context_recall=0.42)


class Sink:
    """Collects events; sync or async (both are allowed)."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    def __call__(self, event: Any) -> None:
        self.events.append(event)

    def steps(self) -> list[tuple[Any, ...]]:
        return [(e.type, getattr(e, "stage", None), getattr(e, "attempt", None)) for e in self.events]


def evaluation(store: Store, sink: Any, plan: tuple[Any, ...] = (BAD_PLAN, GOOD_PLAN),
               retrieval: tuple[Any, ...] = (GOOD_RETRIEVAL,), answer: tuple[Any, ...] = (GOOD_ANSWER,),
               config: dict[str, Any] | None = None, **kw: Any) -> ResearchEvaluation:
    evaluators = {st.PLAN: FakeEvaluator(st.PLAN, *plan), st.RETRIEVAL: FakeEvaluator(st.RETRIEVAL, *retrieval),
                  st.ANSWER: FakeEvaluator(st.ANSWER, *answer)}
    return ResearchEvaluation(research_config(config or {}), store=store, evaluators=evaluators,
                              critic=critic(critic_reply("targeted_fix")), events=sink, **kw)


@pytest.fixture
def store(tmp_path):
    s = Store(f"sqlite:///{tmp_path}/events.db")
    yield s
    s.close()


class Searches:
    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, query: str, plan: Any) -> list[Any]:
        self.calls += 1
        return SOURCES


async def test_a_run_emits_every_stage_in_order(store):
    sink = Sink()
    async with evaluation(store, sink) as ev:
        result = await ev.run(QUERY, Planner(), Searches(), Synthesiser())
    assert sink.steps() == [
        ("started", None, None),
        ("attempt", "plan", 1), ("evaluation", "plan", 1), ("thinking", "plan", 2),
        ("attempt", "plan", 2), ("evaluation", "plan", 2), ("stage_done", "plan", None),
        ("attempt", "retrieval", 1), ("evaluation", "retrieval", 1), ("stage_done", "retrieval", None),
        ("attempt", "answer", 1), ("evaluation", "answer", 1), ("stage_done", "answer", None),
        ("done", None, None),
    ]
    events = sink.events
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert {e.log_id for e in events} == {ev.log_id}
    started, first, failed, thinking, second, passed, plan_done = events[:7]
    assert started.query == QUERY and started.max_attempts == 3
    assert first.max_attempts == 3 and second.attempt == 2
    assert failed.passed is False and failed.failed_rules == ["query_coverage 0.40 < 0.6 (iterate)"]
    coverage = next(d for d in failed.dimensions if d.key == "query_coverage")
    assert (coverage.label, coverage.score, coverage.threshold, coverage.below) == ("Query Coverage", 0.4, 0.6, True)
    assert failed.critiques[0].text == "fake critique" and failed.pass_threshold == 0.7
    assert thinking.mode == "targeted_fix" and thinking.issues[0].fix == "add '2024' to queries"
    assert "2024 breakthroughs" in thinking.critique and thinking.feedback.startswith("Attempt 1 failed")
    assert passed.passed is True and passed.overall == pytest.approx(result.record.plan_evaluation.overall)
    assert plan_done.chosen_attempt == 2 and plan_done.attempts == 2 and plan_done.passed is True
    done = events[-1]
    assert done.overall_score == result.record.overall_score and done.summary["iterations"] == 2
    # every event is JSON the SSE stream can send, and reads back as the same typed event
    adapter: TypeAdapter[Any] = TypeAdapter(ResearchEvent)
    for e in events:
        again = adapter.validate_python(e.data())
        assert type(again) is type(e) and again.data() == e.data()


async def test_answer_regeneration_and_an_async_sink(store):
    seen: list[str] = []

    async def sink(event: Any) -> None:
        await asyncio.sleep(0)
        seen.append(f"{event.type}:{getattr(event, 'stage', '')}:{getattr(event, 'attempt', '')}")

    async with evaluation(store, sink, plan=(GOOD_PLAN,), answer=(BAD_ANSWER, GOOD_ANSWER)) as ev:
        plan = (await ev.evaluate_plan(QUERY, Planner())).plan
        await ev.evaluate_retrieval(QUERY, plan, SOURCES)
        await ev.evaluate_answer(QUERY, SOURCES, Synthesiser())
        await ev.save()
    answer = seen[seen.index("attempt:answer:1"):]
    assert answer == ["attempt:answer:1", "evaluation:answer:1", "thinking:answer:2", "attempt:answer:2",
                      "evaluation:answer:2", "stage_done:answer:", "done::"]


async def test_a_severe_retrieval_is_flagged_and_a_skipped_stage_says_why(store):
    sink = Sink()
    cfg = {"evaluation": {"answerEvaluation": {"enabled": False}}}
    async with evaluation(store, sink, plan=(GOOD_PLAN,), retrieval=(SEVERE,), config=cfg) as ev:
        await ev.run(QUERY, Planner(), Searches(), Synthesiser())
    steps = sink.steps()
    assert ("flagged", "retrieval", None) in steps and ("decision", "retrieval", None) not in steps  # no timeout set
    flagged = next(e for e in sink.events if e.type == "flagged")
    [dim] = flagged.dimensions
    assert (dim.key, dim.label, dim.score, dim.threshold, dim.hint) == (
        "context_recall", "Context Recall", 0.42, 0.5, "may be missing key sources")
    assert flagged.message.startswith("Retrieval quality warning: context_recall 0.42")
    skipped = next(e for e in sink.events if e.type == "skipped")
    assert skipped.stage == "answer" and skipped.reason == "answer evaluation disabled by configuration"
    assert ("attempt", "answer", 1) not in steps  # nothing was evaluated
    assert sink.events[-1].type == "done" and sink.events[-1].evaluation_skipped


async def test_a_failing_evaluator_is_a_skipped_event(store):
    sink = Sink()
    async with evaluation(store, sink, plan=(RuntimeError("judge down"),)) as ev:
        await ev.evaluate_plan(QUERY, Planner())
    assert sink.steps()[1:] == [("attempt", "plan", 1), ("skipped", "plan", 1), ("stage_done", "plan", None)]
    assert sink.events[2].reason == "RuntimeError: judge down" and sink.events[3].skipped


async def test_retry_decision_searches_again(store):
    sink = Sink()
    searches = Searches()

    def answer_when_asked(event: Any) -> None:
        sink(event)
        if event.type == "decision":
            assert event.resolve is not None and "resolve" not in event.data()
            threading.Thread(target=event.resolve, args=("retry",)).start()  # from another thread

    async with evaluation(store, answer_when_asked, plan=(GOOD_PLAN,), retrieval=(SEVERE, GOOD_RETRIEVAL),
                          decision_timeout=5) as ev:
        result = await ev.run(QUERY, Planner(), searches, Synthesiser())
    assert searches.calls == 2
    steps = sink.steps()
    i = steps.index(("flagged", "retrieval", None))
    assert steps[i:i + 6] == [("flagged", "retrieval", None), ("stage_done", "retrieval", None),
                              ("decision", "retrieval", None), ("decided", "retrieval", None),
                              ("attempt", "retrieval", 2), ("evaluation", "retrieval", 2)]
    asked, decided = sink.events[i + 2], sink.events[i + 3]
    assert asked.default == "proceed" and asked.timeout_s == 5 and asked.options == ["proceed", "retry"]
    assert asked.reason.startswith("Retrieval quality warning")
    assert (decided.choice, decided.by) == ("retry", "user")
    rec = result.record
    assert not rec.retrieval_evaluation.flagged_severe
    [d] = rec.decisions
    assert (d.stage, d.choice, d.by, d.default, d.timeout) == ("retrieval", "retry", "user", "proceed", 5)
    assert "search 1 replaced by search 2" in rec.warnings
    assert any(w.startswith("Retrieval quality warning") for w in rec.warnings)  # the first search's, kept
    assert rec.to_json()["decisions"][0]["choice"] == "retry"


async def test_without_an_answer_the_default_wins_after_the_timeout(store):
    sink = Sink()
    searches = Searches()
    async with evaluation(store, sink, plan=(GOOD_PLAN,), retrieval=(SEVERE,), decision_timeout=0.05) as ev:
        result = await ev.run(QUERY, Planner(), searches, Synthesiser())
        assert ev.decide("retry") is False  # nothing is waiting any more
    assert searches.calls == 1
    decided = next(e for e in sink.events if e.type == "decided")
    assert (decided.choice, decided.by) == ("proceed", "timeout")
    assert [(d.choice, d.by) for d in result.record.decisions] == [("proceed", "timeout")]


async def test_retries_are_bounded(store):
    sink = Sink()
    searches = Searches()
    async with evaluation(store, sink, plan=(GOOD_PLAN,), retrieval=(SEVERE,), decision_timeout=0.05,
                          decision_default="retry") as ev:
        result = await ev.run(QUERY, Planner(), searches, Synthesiser())
    assert searches.calls == 3  # the first search and MAX_SEARCH_RETRIES more
    assert [d.by for d in result.record.decisions] == ["timeout", "timeout"]
    assert result.record.retrieval_evaluation.flagged_severe  # still bad: the research went on all the same


async def test_decision_api_directly(store):
    asked = asyncio.Event()
    ev = evaluation(store, lambda e: asked.set() if e.type == "decision" else None)
    assert ev.decide("proceed") is False
    waiting = asyncio.create_task(ev.decision(timeout=5, default="retry", reason="looks thin"))
    await asked.wait()
    with pytest.raises(InputError):
        ev.decide("maybe")
    assert ev.decide("proceed") is True and ev.decide("retry") is False  # answered once
    assert await waiting == "proceed"
    assert ev.record().decisions[0].reason == "looks thin"
    with pytest.raises(InputError):
        await ev.decision(timeout=0)
    with pytest.raises(InputError):
        evaluation(store, None, decision_default="maybe")
    await ev.aclose()


async def test_a_broken_sink_never_stops_the_research(store):
    calls: list[str] = []

    def sink(event: Any) -> None:
        calls.append(event.type)
        raise RuntimeError("view is gone")

    async with evaluation(store, sink) as ev:
        result = await ev.run(QUERY, Planner(), Searches(), Synthesiser())
    assert result.record.plan_evaluation.passed and calls[0] == "started" and calls[-1] == "done"


async def test_a_stopped_run_ends_with_an_error_event(store):
    sink = Sink()
    cfg = {"evaluation": {"planEvaluation": {"failAction": "block"}}}
    with pytest.raises(ResearchBlocked):
        async with evaluation(store, sink, plan=(RuntimeError("judge down"),), config=cfg) as ev:
            await ev.run(QUERY, Planner(), Searches(), Synthesiser())
    last = sink.events[-1]
    assert (last.type, last.error_type) == ("error", "ResearchBlocked") and "judge down" in last.error
    assert [e.type for e in sink.events].count("error") == 1  # run() and the context manager: one event

    sink2 = Sink()
    with pytest.raises(KeyError):
        async with evaluation(store, sink2, plan=(GOOD_PLAN,)) as ev:  # stage by stage, the app's own error
            await ev.evaluate_plan(QUERY, Planner())
            raise KeyError("search index missing")
    assert sink2.events[-1].type == "error" and sink2.events[-1].error_type == "KeyError"
