"""Fake evaluators and pipeline callbacks for the research logic tests."""

from __future__ import annotations

import asyncio
from typing import Any

from jurist.judges.panel import SCORED, SKIPPED, Escalation, PanelResult, RoleResult
from jurist.research import stages as st

WEIGHTS = {stage: {d.key: d.weight for d in dims} for stage, dims in st.DIMENSIONS.items()}


def panel_result(scores: dict[str, float], stage: str = st.PLAN, *, confidence: float = 0.8,
                 critique: str = "fake critique", escalation: Escalation | None = None,
                 role: str = "fake_judge") -> PanelResult:
    """A scored PanelResult with the given final scores (overall: the stage's weights)."""
    w = WEIGHTS[stage]
    total = sum(w[k] for k in scores)
    overall = round(sum(w[k] * v for k, v in scores.items()) / total, 6)
    rr = RoleResult(role=role, model="fake/model", dimensions=list(scores), scores=dict(scores),
                    confidence=confidence, critique=critique, raw_response='{"fake": true}', latency_ms=1.5,
                    tokens_used=42)
    return PanelResult(status=SCORED, scores=dict(scores), overall=overall, confidence=confidence,
                       passed=overall >= 0.7, panel_scores=dict(scores), panel_overall=overall,
                       role_results=[rr], escalation=escalation)


def skipped_result(reason: str = "no role survived") -> PanelResult:
    return PanelResult(status=SKIPPED, scores={}, overall=None, confidence=0.0, passed=None, panel_scores={},
                       panel_overall=None, skip_reason=reason)


class FakeEvaluator:
    """Answers from a queue of score dicts (or PanelResults, or exceptions); the last one repeats."""

    def __init__(self, stage: str, *replies: Any, delay: float = 0.0) -> None:
        self.stage = stage
        self.replies = list(replies)
        self.delay = delay
        self.subjects: list[dict[str, str]] = []
        self.tasks: list[str] = []

    async def evaluate(self, subject: dict[str, str], *, task: str, trace_id: str | None = None) -> PanelResult:
        self.subjects.append(subject)
        self.tasks.append(task)
        if self.delay:
            await asyncio.sleep(self.delay)
        reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, PanelResult):
            return reply
        return panel_result(reply, self.stage)


GOOD_PLAN = {"intent_alignment": 0.9, "query_coverage": 0.85, "scope_appropriateness": 0.8}
BAD_PLAN = {"intent_alignment": 0.8, "query_coverage": 0.4, "scope_appropriateness": 0.7}
GOOD_RETRIEVAL = {"context_recall": 0.8, "context_precision": 0.75, "source_quality": 0.7}
GOOD_ANSWER = {"faithfulness": 0.9, "relevance": 0.85, "factual_accuracy": 0.8, "completeness": 0.8,
               "coherence": 0.9}
BAD_ANSWER = {"faithfulness": 0.2, "relevance": 0.4, "factual_accuracy": 0.3, "completeness": 0.3,
              "coherence": 0.6}


class Planner:
    """Records (mode, feedback) per call; returns plan_1, plan_2, ..."""

    def __init__(self, fail_on: int | None = None) -> None:
        self.calls: list[tuple[Any, Any]] = []
        self.fail_on = fail_on

    async def __call__(self, query: str, feedback: Any, mode: str | None) -> dict[str, Any]:
        self.calls.append((mode, feedback))
        n = len(self.calls)
        if self.fail_on == n:
            raise RuntimeError("planner broke")
        return {"objective": f"plan {n}", "search_queries": [f"query {n}"]}

    @property
    def modes(self) -> list[str | None]:
        return [m for m, _ in self.calls]


class Synthesiser:
    def __init__(self, fail_on: int | None = None) -> None:
        self.feedback: list[str | None] = []
        self.fail_on = fail_on

    async def __call__(self, query: str, sources: list[Any], feedback: str | None) -> str:
        self.feedback.append(feedback)
        if self.fail_on == len(self.feedback):
            raise RuntimeError("synthesiser broke")
        return f"answer {len(self.feedback)}"


SOURCES = [{"id": "a", "title": "A", "url": "https://a.example", "content": "alpha text"}, "plain beta text"]
