"""The parallel strategy: judge snapshots of a streaming answer, one at a time."""

from __future__ import annotations

import asyncio
import time

from jurist.gate.config import GateConfig
from jurist.gate.evaluation import Run, evaluate_attempt, spawn
from jurist.gate.evaluators import GateEvaluator
from jurist.gate.records import Evaluation


class Snapshots:
    """The parallel strategy: judge snapshots of a streaming answer, one at a time."""

    def __init__(self, config: GateConfig, evaluator: GateEvaluator, run: Run, number: int) -> None:
        self.config, self.evaluator, self.run, self.number = config, evaluator, run, number
        self.started = time.monotonic()
        self.done: list[tuple[int, Evaluation]] = []  # (chars judged, evaluation)
        self.pending: tuple[int, asyncio.Task[Evaluation]] | None = None

    def feed(self, text: str) -> None:
        """Start judging the text so far if no judgement is running."""
        self._collect()
        judged = max([n for n, _ in self.done] + [0])
        if self.pending is None and len(text) >= self.config.parallel_min_chars and len(text) > judged:
            coro = self.evaluator.evaluate(self.run.messages, text, trace_id=self.run.trace_id)
            self.pending = (len(text), spawn(coro, self.number))

    def _collect(self) -> None:
        if self.pending and self.pending[1].done():
            n, task = self.pending
            self.pending = None
            if not task.cancelled() and task.exception() is None:
                self.done.append((n, task.result()))

    async def decide(self, text: str) -> Evaluation:
        """The evaluation of the finished answer: a trusted snapshot pass, or a full judgement."""
        cfg = self.config
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
                self.run.eval_s.append(0.0)
                await self.cancel()
                return ev.model_copy(update={
                    "attempt": self.number, "coverage": None if cover >= 1.0 else round(cover, 4),
                    "latency_ms": round((time.monotonic() - self.started) * 1000.0, 3)})
        await self.cancel()
        return await evaluate_attempt(self.evaluator, self.config, self.run, text, self.number)

    async def cancel(self) -> None:
        if self.pending:
            self.pending[1].cancel()
            await asyncio.gather(self.pending[1], return_exceptions=True)
            self.pending = None
