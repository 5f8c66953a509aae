"""One answer's fail-safe evaluation, and the per-request state it is recorded in.

Shared by the gate (:mod:`jurist.gate.gate`) and its parallel strategy
(:mod:`jurist.gate.parallel`).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import time
from dataclasses import dataclass, field
from typing import Any, Coroutine, Iterator

from pydantic import JsonValue

from jurist.gate import policy
from jurist.gate.config import GateConfig
from jurist.gate.evaluators import TRUNCATED_NOTE, FunctionEvaluator, GateEvaluator
from jurist.gate.records import ATTEMPT, GENERATION_CALLS, PURPOSE, Attempt, CallEntry, Evaluation
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

    def cut_off(self, number: int) -> bool:
        """Whether attempt ``number`` was cut off at the token limit (its generation call's
        ``finish_reason`` is ``length``)."""
        return any(c.finish_reason == "length" and c.iteration == number and c.type in GENERATION_CALLS
                   for c in self.calls)

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


@contextlib.contextmanager
def calls_of(attempt: int, kind: str | None = None) -> Iterator[None]:
    """The LLM calls awaited inside are recorded as belonging to ``attempt`` (and, with ``kind``,
    as made for it: ``generation``, ``regeneration``), in the running task: no task of their own,
    which under load would wait its turn on the event loop twice."""
    attempt_token = ATTEMPT.set(attempt)
    kind_token = PURPOSE.set(kind) if kind is not None else None
    try:
        yield
    finally:
        if kind_token is not None:
            PURPOSE.reset(kind_token)
        ATTEMPT.reset(attempt_token)


async def evaluate_attempt(evaluator: GateEvaluator, config: GateConfig, run: Run, text: str, number: int, *,
                           coverage: float | None = None) -> Evaluation:
    """Evaluate one answer, fail-safe: any failure or timeout is a skipped evaluation.

    An answer cut off at the token limit (:meth:`Run.cut_off`) is judged as such: the evaluator is
    told (``truncated=True``, where its ``evaluate`` takes it), and a verdict that calls it
    comprehensive is overruled (not comprehensive, not passed, :func:`not_complete`)."""
    timeout = min(config.judge_timeout_s, run.remaining())
    started = time.monotonic()
    cut = run.cut_off(number)
    told = {"truncated": True} if cut and takes_truncated(evaluator) else {}
    if timeout <= 0:
        ev = skipped(number, "no time left in the budget to evaluate")
    else:
        try:
            with calls_of(number):
                async with asyncio.timeout(timeout):
                    ev = await evaluator.evaluate(run.messages, text, trace_id=run.trace_id, **told)
        except TimeoutError:
            ev = skipped(number, f"the evaluator gave no verdict within {timeout:.2f} s")
        except Exception as exc:
            ev = skipped(number, f"{type(exc).__name__}: {exc}")
    if cut and ev.comprehensive:
        ev = not_complete(ev)
    elapsed = time.monotonic() - started
    ev = ev.model_copy(update={"attempt": number, "latency_ms": round(elapsed * 1000.0, 3), "coverage": coverage})
    run.eval_s.append(elapsed)
    if isinstance(evaluator, FunctionEvaluator):  # a user's function: listed, not a model call
        run.calls.append(CallEntry(type=evaluator.call_type, iteration=number, model=evaluator.model_name,
                                   latency_ms=ev.latency_ms, status="ok" if ev.passed is not None else "error",
                                   call_id=None))
    return ev


def takes_truncated(evaluator: GateEvaluator) -> bool:
    """Whether ``evaluator.evaluate`` takes the ``truncated`` keyword (a user's own evaluator may not)."""
    try:
        params = inspect.signature(evaluator.evaluate).parameters
    except (TypeError, ValueError):
        return False
    return "truncated" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def not_complete(ev: Evaluation) -> Evaluation:
    """A verdict that called a cut-off answer comprehensive, overruled: not comprehensive, not passed."""
    said = f"; the evaluator said comprehensive: {ev.reason}" if ev.reason else ""
    return ev.model_copy(update={"passed": False, "comprehensive": False, "reason": TRUNCATED_NOTE + said,
                                 "issues": [TRUNCATED_NOTE, *ev.issues]})


def skipped(number: int, reason: str) -> Evaluation:
    """The evaluation of an attempt the evaluator gave no verdict on."""
    return Evaluation(attempt=number, passed=None, skipped_reason=reason)
