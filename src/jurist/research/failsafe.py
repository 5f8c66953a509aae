"""The fail-safe wrapper around every stage evaluation (the note's "Graceful Degradation").

Evaluation is advisory: when it is disabled, fails, or times out, research
goes on and the record says ``evaluationSkipped`` with the ``skipReason``.
What a failure does depends on the stage's ``failAction``:

* ``continue``: logged (level INFO), the stage is skipped;
* ``warn``: logged (level WARNING) and added to the record's ``warnings``;
* ``block``: :class:`ResearchBlocked` is raised, which stops the research.

A stage that is disabled is skipped whatever its ``failAction``.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Awaitable, Callable, Generic, TypeVar

from jurist.errors import JuristError
from jurist.judges.panel import SKIPPED, PanelResult
from jurist.research.config import ResearchConfig
from jurist.research.stages import ANSWER, PLAN, RETRIEVAL, TASKS, StageEvaluator

logger = logging.getLogger("jurist.research")

T = TypeVar("T")


class ResearchBlocked(JuristError):
    """A stage's evaluation failed and its ``failAction`` is ``block``."""

    def __init__(self, stage: str, reason: str) -> None:
        self.stage = stage
        self.reason = reason
        super().__init__(
            f"{stage} evaluation failed ({reason}) and its failAction is 'block', so the research stops; "
            f"set research.evaluation.{stage}Evaluation.failAction to 'continue' or 'warn' to proceed without it"
        )


class EvaluationUnavailable(JuristError):
    """The evaluator produced no scores (for a panel: no role survived)."""


@dataclass(frozen=True)
class StageOptions:
    """The fail-safe switches of one stage, times in seconds."""

    stage: str
    enabled: bool
    timeout: float | None
    fail_action: str = "continue"

    @classmethod
    def of(cls, stage: str, config: ResearchConfig) -> "StageOptions":
        ev = config.evaluation
        section = {PLAN: ev.plan_evaluation, RETRIEVAL: ev.retrieval_evaluation, ANSWER: ev.answer_evaluation}[stage]
        return cls(stage, ev.enabled and section.enabled, section.timeout / 1000.0, section.fail_action)


@dataclass
class Guarded(Generic[T]):
    """The outcome of a guarded evaluation: its value, or why it was skipped."""

    value: T | None
    skipped: bool = False
    reason: str | None = None
    warning: str | None = None


def describe(exc: BaseException) -> str:
    """A one-line reason for the record."""
    if isinstance(exc, asyncio.TimeoutError):
        return "timed out"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def disabled(stage: str) -> Guarded[T]:
    return Guarded(None, skipped=True, reason=f"{stage} evaluation disabled by configuration")


def fail(options: StageOptions, reason: str, exc: BaseException | None = None) -> Guarded[T]:
    """Apply the stage's failAction to a failure: raise, or a skipped outcome."""
    if options.fail_action == "block":
        raise ResearchBlocked(options.stage, reason) from exc
    message = f"{options.stage} evaluation skipped ({reason}); research continued without quality validation"
    if options.fail_action == "warn":
        logger.warning(message)
        return Guarded(None, skipped=True, reason=reason, warning=message)
    logger.info(message)
    return Guarded(None, skipped=True, reason=reason)


async def guarded(options: StageOptions, fn: Callable[[], Awaitable[T]]) -> Guarded[T]:
    """Run ``fn`` under the stage's switches: enabled flag, timeout, failAction."""
    if not options.enabled:
        return disabled(options.stage)
    try:
        if options.timeout:
            value = await asyncio.wait_for(fn(), options.timeout)
        else:
            value = await fn()
    except ResearchBlocked:
        raise
    except asyncio.TimeoutError as exc:
        return fail(options, f"timed out after {options.timeout:g} s", exc)
    except Exception as exc:  # evaluation never crashes research (unless the action is block)
        return fail(options, describe(exc), exc)
    return Guarded(value)


async def evaluate_subject(
    evaluator: StageEvaluator, stage: str, subject: dict[str, str], *, trace_id: str | None,
    timeout: float | None = None,
) -> PanelResult:
    """One evaluator call for ``stage``; a result without scores (a panel with
    no surviving role) raises :class:`EvaluationUnavailable`, so the fail-safe
    rules treat it like any evaluator failure."""
    coro = evaluator.evaluate(subject, task=TASKS[stage], trace_id=trace_id)
    result = await (asyncio.wait_for(coro, timeout) if timeout else coro)
    if result.status == SKIPPED or result.overall is None:
        raise EvaluationUnavailable(result.skip_reason or "the evaluator produced no scores")
    return result
