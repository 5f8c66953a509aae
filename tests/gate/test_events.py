"""Event order per strategy, errors with continue context, continuation, the store record."""

from __future__ import annotations

import json

import pytest

from jurist.errors import ModelUnavailable
from jurist.gate import CALL_GENERATION, Gate, GateConfig, IterationLimit
from jurist.models import script
from tests.gate.helpers import QUESTION, bad, collect, gate, good, kinds, slow_words
from tests.quoting import prompt_text

LONG_OK = " ".join(["Built in 1889 and 330 m tall."] * 8)


@pytest.mark.parametrize("strategy,expected", [
    ("blocking", ["delta", "evaluation", "done"]),
    ("revision", ["delta", "evaluation", "done"]),
    ("parallel", ["delta", "evaluation", "done"]),
])
async def test_order_when_the_first_answer_passes(strategy, expected):
    script("gen", LONG_OK)
    script("judge", default=good())
    g = gate(strategy=strategy)
    events = await collect(g)
    await g.aclose()
    assert kinds(events) == expected
    assert events[-1].data["trace_id"] == events[-1].result.trace_id


@pytest.mark.parametrize("strategy,expected", [
    ("blocking", ["evaluation", "thinking", "delta", "evaluation", "done"]),
    ("revision", ["delta", "evaluation", "thinking", "revision", "evaluation", "done"]),
    ("parallel", ["delta", "evaluation", "thinking", "revision", "evaluation", "done"]),
])
async def test_order_when_one_regeneration_is_needed(strategy, expected):
    script("gen", "Built in 1889 only, nothing else said here at all.", LONG_OK)
    # The verdict follows the text judged, not the order of the calls: the parallel strategy's
    # snapshot judgements (some cancelled) would otherwise take the scripted replies in any order.
    script("judge", default=lambda req: good() if "330" in prompt_text(req.messages) else bad())
    g = gate(strategy=strategy)
    events = await collect(g)
    await g.aclose()
    assert kinds(events) == expected
    result = events[-1].result
    assert result.accepted_attempt == 2
    shown = "".join(e.data["text"] for e in events if e.type == "delta")
    if strategy == "blocking":
        assert shown == result.answer  # only the accepted answer was released
    else:
        assert shown.startswith("Built in 1889 only")
        revision = next(e for e in events if e.type == "revision")
        assert revision.data == {"text": result.answer, "attempt": 2, "replaces": 1}
    assert [e.data["accepted"] for e in events if e.type == "evaluation"] == [False, True]


async def test_parallel_judges_while_streaming():
    script("judge", default=good()).delay = 0.2
    g = gate(strategy="parallel")
    events = await collect(g, generate=slow_words(LONG_OK, 0.6))
    await g.aclose()
    result = events[-1].result
    assert result.accept_reason == "passed"
    ev = result.evaluations[0]
    assert ev.coverage is None or ev.coverage >= 0.5  # a snapshot judged before the stream ended


async def test_generation_failure_gives_continue_context_then_continuation_keeps_tool_results():
    history = [{"role": "user", "content": "Find flights to Oslo."},
               {"role": "assistant", "content": None, "tool_calls": [{"id": "t1", "type": "function",
                                                                   "function": {"name": "flights", "arguments": "{}"}}]},
               {"role": "tool", "tool_call_id": "t1", "content": "FLIGHT SK123 09:00"}]

    async def tool_loop(messages):
        raise IterationLimit(messages=messages + [{"role": "tool", "tool_call_id": "t2", "content": "HOTEL X"}])

    script("judge", default=good())
    g = gate()
    events = await collect(g, messages=history, generate=tool_loop)
    assert [e.type for e in events] == ["error"]
    err = events[0]
    assert err.data["code"] == "MAX_ITERATIONS" and err.data["show_continue_button"]
    context = err.data["continue_context"]
    assert [m.get("content") for m in context if m["role"] == "tool"] == ["FLIGHT SK123 09:00", "HOTEL X"]
    assert err.result.error and err.result.continue_context == context
    seen = []

    async def resumed(messages):
        seen.append(messages)
        return "SK123 at 09:00, Hotel X."

    result = await g.run(context, resumed, is_continuation=True)
    await g.aclose()
    assert result.accept_reason == "passed" and result.answer == "SK123 at 09:00, Hotel X."
    assert [m["content"] for m in seen[0] if m["role"] == "tool"] == ["FLIGHT SK123 09:00", "HOTEL X"]


async def test_first_request_drops_tool_results_of_earlier_cycles():
    messages = [{"role": "user", "content": "q1"}, {"role": "tool", "tool_call_id": "a", "content": "OLD"},
                {"role": "assistant", "content": "a1"}, {"role": "user", "content": "q2"},
                {"role": "tool", "tool_call_id": "b", "content": "NEW"}]
    seen = []

    async def generate(msgs):
        seen.append([m["content"] for m in msgs])
        return "answer"

    script("judge", default=good())
    g = gate()
    await g.run(messages, generate)
    await g.run(messages, generate, is_continuation=True)
    await g.aclose()
    assert seen == [["q1", "a1", "q2", "NEW"], ["q1", "OLD", "a1", "q2", "NEW"]]


async def test_model_unavailable_mid_stream_is_an_error_event():
    async def generate(messages):
        yield "partial "
        raise ModelUnavailable("upstream went away")

    g = gate(strategy="revision")
    script("judge", default=good())
    events = await collect(g, generate=generate)
    await g.aclose()
    assert [e.type for e in events] == ["delta", "error"]
    assert events[-1].data["code"] == "GENERATION_FAILED"
    assert events[-1].data["partial_answer"] == "partial "
    assert events[-1].data["continue_context"] == QUESTION


async def test_scripted_model_failure_is_an_error_event():
    script("gen", ModelUnavailable("no capacity"))
    g = gate()
    events = await collect(g)
    await g.aclose()
    assert events[-1].type == "error" and "no capacity" in events[-1].data["error"]
    assert [(c.type, c.status) for c in events[-1].result.llm_calls] == [(CALL_GENERATION, "error")]


async def test_record_in_the_store():
    script("gen", "first", "second")
    script("judge", bad(), good(0.8))
    g = gate()
    result = await g.run(QUESTION, "scripted/gen", trace_id="trace-1")
    g.store.flush()
    [row] = g.store.evaluations(kind="gate")
    assert row["trace_id"] == "trace-1" and row["status"] == "scored" and row["score"] == 0.8
    payload = row["payload"]
    assert payload["accepted_attempt"] == 2 and payload["strategy"] == "blocking"
    assert payload["evaluations_list"] == [
        {"attempt": 1, "passed": False, "quality_score": 0.2, "issues": ["misses the height"]},
        {"attempt": 2, "passed": True, "quality_score": 0.8, "issues": []}]
    json.dumps(payload)
    scores = {s.key: s for s in g.store.scores_of(row["id"])}
    assert scores["attempt.1"].score == 0.2 and scores["attempt.2"].name == "regeneration"
    purposes = [c["purpose"] for c in g.store.calls(trace_id="trace-1")]
    assert sorted(purposes) == sorted(c.type for c in result.llm_calls)
    await g.aclose()


async def test_judge_model_instance_and_no_judge_configured():
    from jurist.config import Settings
    from jurist.models.registry import resolve_model

    script("gen", "answer")
    script("j2", good())
    model = resolve_model("scripted/j2", Settings.load())
    g = Gate(GateConfig(evaluate_feedback_enabled=True), judge=model)
    result = await g.run(QUESTION, "scripted/gen")
    await g.aclose()
    assert [c.model for c in result.llm_calls] == ["scripted/gen", "scripted/j2"]


@pytest.mark.parametrize("generator", ["model", "function"])
async def test_a_failed_regeneration_is_one_call_record(generator):
    script("judge", bad(), default=good())
    if generator == "model":
        script("gen", "Built in 1889.", ModelUnavailable("no capacity"))
        generate = "scripted/gen"
    else:
        answers = iter(["Built in 1889."])

        async def generate(messages):
            try:
                return next(answers)
            except StopIteration:
                raise ModelUnavailable("no capacity") from None
    g = gate()
    result = await g.run(QUESTION, generate, trace_id=f"regen-{generator}")
    g.store.flush()
    assert result.accept_reason == "regeneration_failed"
    regenerations = [c for c in result.llm_calls if c.type == "regeneration"]
    assert [(c.iteration, c.status) for c in regenerations] == [(2, "error")]
    assert "no capacity" in (regenerations[0].error or "")
    if generator == "model":  # the list is the trace's call records, as stored
        stored = g.store.calls(trace_id=f"regen-{generator}")
        assert sorted(c["id"] for c in stored) == sorted(c.call_id for c in result.llm_calls)
    await g.aclose()


async def test_the_stored_payload_is_the_record_of_the_result():
    from jurist.gate.records import gate_payload

    script("gen", "first", "second")
    script("judge", bad(), good(0.8))
    g = gate()
    result = await g.run(QUESTION, "scripted/gen", trace_id="trace-payload")
    g.store.flush()
    [row] = g.store.evaluations(kind="gate")
    assert row["payload"] == json.loads(json.dumps(gate_payload(result)))
    assert row["payload"]["strategy"] == "blocking" and row["payload"]["evaluator"] == "quality"
    await g.aclose()
