"""One answer's fail-safe evaluation, and the per-request state it is recorded in.

Shared by the gate (:mod:`jurist.gate.gate`) and its parallel strategy
(:mod:`jurist.gate.parallel`).
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from dataclasses import dataclass, field
from typing import Any, Coroutine

from pydantic import JsonValue

from jurist.gate import policy
from jurist.gate.config import GateConfig
from jurist.gate.evaluators import FunctionEvaluator, GateEvaluator
from jurist.gate.records import ATTEMPT, Attempt, CallEntry, Evaluation
from jurist.models.messages import Message


@dataclass
class Run:
    """The state of one gated request."""

    trace_id: str
    messages: list[Message]  # what the generator and evaluator see
    received: list[Message]  # as received
    original: list[dict[str, JsonValue]]  # as received, the JSON given (the continue context)
    deadline: float
    calls: list[CallEntry]
    attempts: list[Attempt] = field(default_factory=list)
    gen_s: list[float] = field(default_factory=list)
    eval_s: list[float] = field(default_factory=list)
    after_done: bool = False  # feedback off: the evaluation runs on after ``done`` and closes the trace

    def remaining(self) -> float:
        return self.deadline - time.monotonic() - policy.BUDGET_MARGIN_S

    def evaluated(self, number: int, evaluation: Evaluation) -> Attempt:
        """Attempt ``number`` with its evaluation (it replaces the attempt in :attr:`attempts`)."""
        i = next(i for i, a in enumerate(self.attempts) if a.number == number)
        self.attempts[i] = attempt = self.attempts[i].model_copy(update={"evaluation": evaluation})
        return attempt


def spawn(coro: Coroutine[Any, Any, Any], attempt: int) -> asyncio.Task[Any]:
    """A task whose LLM calls are recorded as belonging to ``attempt``."""
    ctx = contextvars.copy_context()
    ctx.run(ATTEMPT.set, attempt)
    return asyncio.create_task(coro, context=ctx)


async def evaluate_attempt(evaluator: GateEvaluator, config: GateConfig, run: Run, text: str, number: int, *,
                           coverage: float | None = None) -> Evaluation:
    """Evaluate one answer, fail-safe: any failure or timeout is a skipped evaluation."""
    timeout = min(config.judge_timeout_s, run.remaining())
    started = time.monotonic()
    if timeout <= 0:
        ev = skipped(number, "no time left in the budget to evaluate")
    else:
        try:
            ev = await asyncio.wait_for(spawn(evaluator.evaluate(run.messages, text, trace_id=run.trace_id), number),
                                        timeout)
        except asyncio.TimeoutError:
            ev = skipped(number, f"the evaluator gave no verdict within {timeout:.2f} s")
        except Exception as exc:
            ev = skipped(number, f"{type(exc).__name__}: {exc}")
    elapsed = time.monotonic() - started
    ev = ev.model_copy(update={"attempt": number, "latency_ms": round(elapsed * 1000.0, 3), "coverage": coverage})
    run.eval_s.append(elapsed)
    if isinstance(evaluator, FunctionEvaluator):  # a user's function: listed, not a model call
        run.calls.append(CallEntry(type=evaluator.call_type, iteration=number, model=evaluator.model_name,
                                   latency_ms=ev.latency_ms, status="ok" if ev.passed is not None else "error",
                                   call_id=None))
    return ev


def skipped(number: int, reason: str) -> Evaluation:
    """The evaluation of an attempt the evaluator gave no verdict on."""
    return Evaluation(attempt=number, passed=None, skipped_reason=reason)
