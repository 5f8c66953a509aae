"""The per-request state of a gate, its task helper and the parallel strategy's snapshots."""

from __future__ import annotations

import asyncio
import contextvars
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Coroutine

from jurist.gate import policy
from jurist.gate.records import ATTEMPT
from jurist.gate.types import Attempt, Evaluation

if TYPE_CHECKING:
    from jurist.gate.gate import Gate


@dataclass
class Run:
    """The state of one gated request."""

    trace_id: str
    messages: list[dict[str, Any]]  # what the generator and evaluator see
    original: list[dict[str, Any]]  # as received (the continue context)
    deadline: float
    calls: list[dict[str, Any]]
    attempts: list[Attempt] = field(default_factory=list)
    gen_s: list[float] = field(default_factory=list)
    eval_s: list[float] = field(default_factory=list)

    def remaining(self) -> float:
        return self.deadline - time.monotonic() - policy.BUDGET_MARGIN_S


def spawn(coro: Coroutine[Any, Any, Any], attempt: int) -> asyncio.Task[Any]:
    """A task whose LLM calls are recorded as belonging to ``attempt``."""
    ctx = contextvars.copy_context()
    ctx.run(ATTEMPT.set, attempt)
    return asyncio.create_task(coro, context=ctx)


class Snapshots:
    """The parallel strategy: judge snapshots of a streaming answer, one at a time."""

    def __init__(self, gate: "Gate", run: Run, number: int) -> None:
        self.gate, self.run, self.number = gate, run, number
        self.started = time.monotonic()
        self.done: list[tuple[int, Evaluation]] = []  # (chars judged, evaluation)
        self.pending: tuple[int, asyncio.Task[Evaluation]] | None = None

    def feed(self, text: str) -> None:
        """Start judging the text so far if no judgement is running."""
        self._collect()
        judged = max([n for n, _ in self.done] + [0])
        if self.pending is None and len(text) >= self.gate.config.parallel_min_chars and len(text) > judged:
            coro = self.gate.evaluator.evaluate(self.run.messages, text, trace_id=self.run.trace_id)
            self.pending = (len(text), spawn(coro, self.number))

    def _collect(self) -> None:
        if self.pending and self.pending[1].done():
            n, task = self.pending
            self.pending = None
            if not task.cancelled() and task.exception() is None:
                self.done.append((n, task.result()))

    async def decide(self, text: str) -> Evaluation:
        """The evaluation of the finished answer: a trusted snapshot pass, or a full judgement."""
        cfg = self.gate.config
        if self.pending:
            wait = min(cfg.parallel_wait_fraction * (time.monotonic() - self.started), self.run.remaining())
            if self.pending[0] == len(text):
                wait = min(cfg.judge_timeout_s, self.run.remaining())
            await asyncio.wait([self.pending[1]], timeout=max(wait, 0.0))
            self._collect()
        best = max(self.done, key=lambda d: d[0], default=None)
        if best is not None:
            n, ev = best
            cover = n / len(text) if text else 1.0
            if cover >= 1.0 or (ev.passed and cover >= cfg.parallel_min_coverage):
                ev.attempt, ev.coverage = self.number, None if cover >= 1.0 else round(cover, 4)
                ev.latency_ms = round((time.monotonic() - self.started) * 1000.0, 3)
                self.run.eval_s.append(0.0)
                await self.cancel()
                return ev
        await self.cancel()
        return await self.gate._evaluate(self.run, text, self.number)

    async def cancel(self) -> None:
        if self.pending:
            self.pending[1].cancel()
            await asyncio.gather(self.pending[1], return_exceptions=True)
            self.pending = None
