"""The gate's loop: accept, regenerate, cap, fail-safe evaluation, budget, custom evaluators."""

from __future__ import annotations

import time

from jurist.gate import (
    CALL_COMPREHENSIVE_RETRY,
    CALL_GENERATION,
    CALL_QUALITY_EVALUATION,
    CALL_REGENERATION,
    CALL_SELF_EVALUATION,
    ENCOURAGEMENT,
    REVISION_MESSAGE,
    Evaluation,
    Gate,
    GateConfig,
)
from jurist.config import Settings
from jurist.models import script
from jurist.models.messages import openai_messages
from jurist.runtime import Runtime
from tests.gate.helpers import QUESTION, bad, collect, comp, gate, good, kinds, slow_words
from tests.quoting import prompt_text


async def test_accepts_on_first_pass():
    script("gen", "It was built in 1889 and is 330 m tall.")
    script("judge", good())
    g = gate()
    result = await g.run(QUESTION, "scripted/gen")
    await g.aclose()
    assert result.answer.strip() == "It was built in 1889 and is 330 m tall."
    assert (result.accepted_attempt, result.accept_reason) == (1, "passed")
    assert [c.type for c in result.llm_calls] == [CALL_GENERATION, CALL_QUALITY_EVALUATION]
    assert result.evaluations[0].quality_score == 0.9 and result.evaluations[0].passed


async def test_regenerates_once_with_feedback_and_accepts():
    gen = script("gen", "It was built in 1889. " + "x" * 600, "Built in 1889; 330 m tall.")
    script("judge", bad(), good())
    g = gate()
    events = await collect(g)
    await g.aclose()
    result = events[-1].result
    assert result.accepted_attempt == 2 and result.accept_reason == "passed"
    assert result.answer.strip() == "Built in 1889; 330 m tall."
    thinking = next(e for e in events if e.type == "thinking")
    assert thinking.data["message"] == REVISION_MESSAGE
    assert thinking.data["strategy"] == "regenerate" and thinking.data["retry_count"] == 1
    regen = gen.requests[1].messages[-1].text
    assert "Feedback: Give the height too." in regen and "misses the height" in regen
    assert "DO NOT repeat this" in regen and "x" * 600 not in regen  # only the first 500 characters
    assert [(c.type, c.iteration) for c in result.llm_calls] == [
        (CALL_GENERATION, 1), (CALL_QUALITY_EVALUATION, 1), (CALL_REGENERATION, 2), (CALL_QUALITY_EVALUATION, 2)]
    assert [a.kind for a in result.attempts] == [CALL_GENERATION, CALL_REGENERATION]


async def test_cap_reached_accepts_the_best_answer():
    script("gen", "first answer", "second answer")
    script("judge", bad(0.3), bad(0.1))
    g = gate()
    result = await g.run(QUESTION, "scripted/gen")
    await g.aclose()
    assert len(result.attempts) == 2  # quality: one regeneration by default
    assert result.accept_reason == "max_regenerations"
    assert result.accepted_attempt == 1 and result.answer.strip() == "first answer"


async def test_comprehensiveness_retries_twice_with_encouragement():
    gen = script("gen", "a1", "a2", "a3")
    script("judge", comp(False), comp(False), comp(False))
    g = gate(evaluator="comprehensiveness")
    result = await g.run(QUESTION + [{"role": "tool", "content": "SECRET TOOL OUTPUT"}], "scripted/gen")
    await g.aclose()
    assert len(result.attempts) == 3 and result.accept_reason == "max_regenerations"
    assert openai_messages(gen.requests[1].messages[-2:]) == [{"role": "assistant", "content": "a1 "},
                                             {"role": "user", "content": ENCOURAGEMENT}]
    assert [c.type for c in result.llm_calls] == [
        CALL_GENERATION, CALL_SELF_EVALUATION, CALL_COMPREHENSIVE_RETRY, CALL_SELF_EVALUATION,
        CALL_COMPREHENSIVE_RETRY, CALL_SELF_EVALUATION]
    judged = prompt_text(script("judge").requests[0].messages)
    assert "SECRET TOOL OUTPUT" not in judged and "Eiffel" in judged  # user/assistant turns only
    assert [e.comprehensive for e in result.evaluations] == [False, False, False]


async def test_judge_timeout_accepts_and_records_the_skip():
    script("gen", "an answer")
    script("judge", good()).delay = 5.0
    g = gate(judge_timeout_s=0.2)
    started = time.monotonic()
    result = await g.run(QUESTION, "scripted/gen")
    await g.aclose()
    assert time.monotonic() - started < 2.0
    assert result.accept_reason == "evaluation_skipped" and result.evaluation_skipped
    assert "within 0.20 s" in result.skip_reason
    assert result.evaluations[0].passed is None


async def test_garbage_from_the_judge_is_a_skipped_evaluation():
    script("gen", "an answer")
    script("judge", "I like this answer a lot", "still no json")
    g = gate()
    result = await g.run(QUESTION, "scripted/gen")
    await g.aclose()
    assert result.accept_reason == "evaluation_skipped"
    assert "could not be parsed" in result.skip_reason
    assert len(script("judge").requests) == 2  # one re-ask


async def test_budget_accepts_best_so_far_and_is_never_exceeded():
    # generation 0.3 s, judge 1 s: the judge has 1.65 s of the budget left (room for a loaded machine),
    # and then another regenerate + evaluate (1.35 s) does not fit in the 0.7 s that remain
    script("judge", bad(0.3)).delay = 1.0
    g = await gate(budget_s=2.0).astart()  # the store is open before the request
    started = time.monotonic()
    result = await g.run(QUESTION, slow_words("a slow first answer", 0.3))
    elapsed = time.monotonic() - started
    await g.aclose()
    assert result.accept_reason == "budget" and len(result.attempts) == 1
    assert elapsed < 2.0


async def test_budget_cuts_a_hanging_regeneration():
    calls = []

    async def generate(messages):
        calls.append(messages)
        if len(calls) > 1:
            return slow_words("never finishes in time", 10.0)(messages)
        return "quick but poor"

    script("judge", bad())
    g = await gate(budget_s=0.8).astart()
    started = time.monotonic()
    events = await collect(g, generate=generate)
    await g.aclose()
    assert time.monotonic() - started < 0.8
    result = events[-1].result
    assert events[-1].type == "done" and result.accept_reason == "budget"
    assert result.answer == "quick but poor"


async def test_feedback_disabled_sends_done_first_then_only_scores():
    script("gen", "a poor answer")
    script("judge", bad())
    g = Gate(GateConfig(strategy="blocking"), judge="scripted/judge")
    events = await collect(g)
    await g.aclose()
    assert kinds(events) == ["delta", "done", "evaluation"]  # note 001's flow: done, then evaluate
    done, after = events[-2], events[-1]
    assert done.data["evaluation_pending"] is True and done.data["evaluations"] == []
    assert done.result.evaluation_pending and done.result.evaluations == []
    assert [c["type"] for c in done.data["llm_calls"]] == [CALL_GENERATION]
    assert after.data["after_done"] is True and after.data["quality_score"] == 0.2
    result = after.result
    assert len(result.attempts) == 1 and result.accept_reason == "feedback_disabled"
    assert not result.evaluation_pending and result.evaluations[0].quality_score == 0.2
    assert [c.type for c in result.llm_calls] == [CALL_GENERATION, CALL_QUALITY_EVALUATION]
    assert len(script("gen").requests) == 1  # scored, never regenerated


def stored_gate_rows(runtime: Runtime) -> list[dict]:
    runtime.store.flush()
    return runtime.store.evaluations(kind="gate")


async def test_feedback_off_done_comes_before_a_slow_judge_and_the_record_after():
    script("gen", "It was built in 1889 and is 330 m tall.")
    script("judge", good()).delay = 2.0
    rt = Runtime(Settings.load())
    g = await Gate(GateConfig(), runtime=rt, judge="scripted/judge").astart()
    started = time.monotonic()
    result = await g.run(QUESTION, "scripted/gen", trace_id="done-first")
    at_done = time.monotonic() - started
    assert at_done < 1.0, at_done  # the judge takes 2 s: done did not wait for it
    assert result.answer.strip() == "It was built in 1889 and is 330 m tall."
    assert result.evaluation_pending and result.evaluations == [] and result.accept_reason == "feedback_disabled"
    assert stored_gate_rows(rt) == []  # recorded once the judge has answered
    await g.drain()
    assert time.monotonic() - started >= 2.0
    [row] = stored_gate_rows(rt)
    assert row["trace_id"] == "done-first" and row["score"] == 0.9 and row["passed"] is True
    payload = row["payload"]
    assert "evaluation_pending" not in payload and payload["evaluations_list"][0]["quality_score"] == 0.9
    assert [c["type"] for c in payload["llm_calls"]] == [CALL_GENERATION, CALL_QUALITY_EVALUATION]
    assert {c["purpose"] for c in rt.store.calls(trace_id="done-first")} == {CALL_GENERATION, CALL_QUALITY_EVALUATION}
    await g.aclose()
    await rt.aclose()


async def test_feedback_off_run_can_wait_for_the_evaluation():
    script("gen", "an answer")
    script("judge", good()).delay = 0.3
    g = Gate(GateConfig(), judge="scripted/judge")
    started = time.monotonic()
    result = await g.run(QUESTION, "scripted/gen", wait_for_evaluation=True)
    assert time.monotonic() - started >= 0.3
    await g.aclose()
    assert not result.evaluation_pending and result.evaluations[0].quality_score == 0.9


async def test_feedback_on_still_waits_for_the_judge_before_done():
    script("gen", "It was built in 1889 and is 330 m tall.")
    script("judge", good()).delay = 1.0
    g = await gate(strategy="blocking").astart()
    started = time.monotonic()
    seen: list[tuple[str, float]] = []
    async for ev in g.stream(QUESTION, "scripted/gen"):
        seen.append((ev.type, time.monotonic() - started))
        if ev.type == "done":
            done = ev
    await g.aclose()
    assert [t for t, _ in seen][-2:] == ["evaluation", "done"] and seen[-1][0] == "done"
    assert seen[-1][1] >= 1.0  # blocking: the answer is final only once judged
    assert not done.result.evaluation_pending and done.result.evaluations[0].quality_score == 0.9
    assert "evaluation_pending" not in done.data


async def test_closing_the_gate_finishes_the_evaluations_still_running():
    script("judge", default=good()).delay = 0.5
    rt = Runtime(Settings.load())
    g = Gate(GateConfig(), runtime=rt, judge="scripted/judge")
    for i in range(3):
        script("gen", f"answer {i}")
        result = await g.run(QUESTION, "scripted/gen", trace_id=f"close-{i}")
        assert result.evaluation_pending
    await g.aclose()  # waits for the three evaluations (close_timeout_s 10 s)
    rows = stored_gate_rows(rt)
    assert sorted(r["trace_id"] for r in rows) == ["close-0", "close-1", "close-2"]
    assert [(r["score"], r["status"]) for r in rows] == [(0.9, "scored")] * 3
    await rt.aclose()


async def test_two_requests_on_one_trace_id_are_both_finished_on_close():
    script("judge", default=good()).delay = 0.3
    rt = Runtime(Settings.load())
    g = Gate(GateConfig(), runtime=rt, judge="scripted/judge")
    for text in ("first", "second"):
        script("gen", text)
        await g.run(QUESTION, "scripted/gen", trace_id="same")  # a client may send the same trace id twice
    await g.aclose()
    assert sorted(r["payload"]["answer"].strip() for r in stored_gate_rows(rt)) == ["first", "second"]
    await rt.aclose()


async def test_evaluations_outliving_the_close_timeout_are_recorded_as_skipped():
    script("gen", "an answer")
    script("judge", good()).delay = 30.0
    rt = Runtime(Settings.load())
    g = Gate(GateConfig(close_timeout_s=0.2), runtime=rt, judge="scripted/judge")
    result = await g.run(QUESTION, "scripted/gen", trace_id="cut-short")
    started = time.monotonic()
    await g.aclose()
    assert time.monotonic() - started < 2.0
    [row] = stored_gate_rows(rt)
    assert row["trace_id"] == "cut-short" and row["status"] == "skipped" and row["failure"] == "evaluation_skipped"
    payload = row["payload"]
    assert payload["answer"] == result.answer and payload["skip_reason"] == "the gate closed before the evaluator answered"
    assert payload["evaluations"][0]["passed"] is None
    await rt.aclose()


async def test_custom_evaluator_function():
    seen = []

    async def judge(messages, answer):
        seen.append(answer)
        return {"quality_score": 0.9 if "330" in answer else 0.1, "issues": [] if "330" in answer else ["no height"]}

    script("gen", "Built in 1889.", "Built in 1889, 330 m tall.")
    g = Gate(GateConfig(evaluate_feedback_enabled=True), evaluator=judge)
    result = await g.run(QUESTION, "scripted/gen")
    await g.aclose()
    assert result.accepted_attempt == 2 and result.accept_reason == "passed"
    assert [round(e.quality_score, 1) for e in result.evaluations] == [0.1, 0.9]
    assert [c.type for c in result.llm_calls] == [
        CALL_GENERATION, CALL_QUALITY_EVALUATION, CALL_REGENERATION, CALL_QUALITY_EVALUATION]


async def test_failing_custom_evaluator_never_blocks():
    async def judge(messages, answer):
        raise RuntimeError("judge service down")

    script("gen", "an answer")
    g = Gate(GateConfig(evaluate_feedback_enabled=True), evaluator=judge)
    result = await g.run(QUESTION, "scripted/gen")
    await g.aclose()
    assert result.accept_reason == "evaluation_skipped"
    assert result.skip_reason == "RuntimeError: judge service down"


async def test_custom_evaluator_may_return_an_evaluation_or_bool():
    async def by_bool(messages, answer):
        return True

    async def by_evaluation(messages, answer):
        return Evaluation(attempt=0, passed=None, quality_score=0.5)

    for fn in (by_bool, by_evaluation):
        script("gen", "an answer")
        g = Gate(GateConfig(evaluate_feedback_enabled=True), evaluator=fn)
        result = await g.run(QUESTION, "scripted/gen")
        await g.aclose()
        assert result.accept_reason == "passed"


def test_the_done_first_example_in_the_docs_runs_as_written(capsys):
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "gate.md").read_text(encoding="utf-8")
    example = text.split("## Feedback off: done first", 1)[1].split("```python", 1)[1].split("```", 1)[0]
    exec(compile(example, "docs/gate.md", "exec"), {"__name__": "__main__"})
    assert capsys.readouterr().out.splitlines() == ["True []", "0.9"]
