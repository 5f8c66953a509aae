"""A small stand-in for ``jurist.gate.Gate`` that keeps its contract (its events and records), for the proxy tests.

Blocking strategy: each attempt's text is collected from the generator, judged
by ``scripted/judge`` (note 001's JSON: ``quality_score`` >= 0.4 passes,
``improvement_hint`` is the feedback),
regenerated with the judge's reason once, and only the accepted answer is
streamed as deltas. A generator failure becomes an ``error`` event carrying
``continue_context``.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any, AsyncGenerator

from jurist.gate.events import DeltaEvent, DoneEvent, ErrorEvent, EvaluationEvent, GateEvent, ThinkingEvent
from jurist.gate.records import Attempt, CallEntry, Evaluation, GateRecord, evaluations_list
from jurist.gate.types import CALL_GENERATION, CALL_QUALITY_EVALUATION, CALL_REGENERATION, REVISION_MESSAGE
from jurist.ids import new_id
from jurist.models import ChatRequest, scripted


class FakeGate:
    def __init__(self, config: Any = None, *, settings: Any = None, store: Any = None, **_: Any) -> None:
        self.config = config
        self.calls: list[dict[str, Any]] = []  # (messages, is_continuation) per run
        self.closed = False

    async def settle(self, trace_id, timeout=None) -> GateRecord | None:
        return None  # this gate evaluates before done: nothing runs after it

    async def run(self, messages, generate, *, is_continuation=False, trace_id=None) -> GateRecord:
        async for ev in self.stream(messages, generate, is_continuation=is_continuation, trace_id=trace_id):
            if isinstance(ev, (DoneEvent, ErrorEvent)):
                return ev.result
        raise AssertionError("the fake gate always ends with done or error")

    async def stream(self, messages, generate, *, is_continuation=False, trace_id=None) -> AsyncGenerator[GateEvent, None]:
        self.calls.append({"messages": messages, "is_continuation": is_continuation})
        trace_id = trace_id or new_id()
        judge = scripted("judge")
        attempts: list[Attempt] = []
        evaluations: list[Evaluation] = []
        llm_calls: list[CallEntry] = []
        current = list(messages)
        for number in (1, 2):
            kind = CALL_GENERATION if number == 1 else CALL_REGENERATION
            try:
                out = await generate(current)
                text = out if isinstance(out, str) else "".join([d async for d in out])
            except Exception as exc:
                yield ErrorEvent(code="GENERATION_FAILED", result=GateRecord(
                    accepted_attempt=0, accept_reason="error", llm_calls=llm_calls, trace_id=trace_id,
                    error=str(exc), continue_context=list(messages)))
                return
            llm_calls.append(CallEntry(type=kind, iteration=number, model="upstream", tokens=None, latency_ms=0.0,
                                       status="ok", call_id=new_id()))
            verdict = json.loads((await judge.complete(ChatRequest(messages=[{"role": "user", "content": text}]))).text)
            llm_calls.append(CallEntry(type=CALL_QUALITY_EVALUATION, iteration=number, model="scripted/judge",
                                       tokens=None, latency_ms=0.0, status="ok", call_id=new_id()))
            score = float(verdict["quality_score"])
            ev = Evaluation(attempt=number, passed=score >= 0.4, quality_score=score,
                            improvement_hint=verdict.get("improvement_hint"), issues=verdict.get("issues") or [])
            evaluations.append(ev)
            attempts.append(Attempt(number=number, kind=kind, text=text, latency_ms=0.0, evaluation=ev))
            if ev.passed or number == 2:
                break
            yield EvaluationEvent(evaluation=ev, accepted=False)
            yield ThinkingEvent(message=REVISION_MESSAGE, retry_count=number, ts=time.time(),
                                feedback=ev.improvement_hint)
            current = [*messages, {"role": "assistant", "content": text},
                       {"role": "user", "content": f"Improve your answer: {ev.improvement_hint}"}]
        for piece in re.findall(r"\S+\s*|\s+", attempts[-1].text):
            yield DeltaEvent(text=piece, attempt=len(attempts))
        reason = "passed" if evaluations[-1].passed else "max_regenerations"
        yield EvaluationEvent(evaluation=evaluations[-1], accepted=True, accepted_attempt=len(attempts),
                              accept_reason=reason)
        yield DoneEvent(result=GateRecord(answer=attempts[-1].text, accepted_attempt=len(attempts), accept_reason=reason,
                                          attempts=attempts, evaluations=evaluations, llm_calls=llm_calls,
                                          trace_id=trace_id, evaluations_list=evaluations_list(evaluations)))

    def wrap(self, model: Any) -> Any:
        return model  # this stand-in lists its calls by hand

    async def aclose(self) -> None:
        self.closed = True
