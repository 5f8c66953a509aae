"""The fail-safe wrapper around every stage evaluation (the note's "Graceful Degradation").

Evaluation is advisory: when it is disabled, fails, or times out, research
goes on and the record says ``evaluationSkipped`` with the ``skipReason``.
What a failure does depends on the stage's ``failAction``:

* ``continue``: logged (level INFO), the stage is skipped;
* ``warn``: logged (level WARNING) and added to the record's ``warnings``;
* ``block``: :class:`ResearchBlocked` is raised, which stops the research.

A :class:`CalibrationRequired` (``require_calibration`` unmet) is no evaluation failure:
it always propagates.

A stage that is disabled is skipped whatever its ``failAction``.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Awaitable, Callable, TypeVar

from jurist.errors import CalibrationRequired, EvaluationUnavailable, ResearchBlocked
from jurist.judges.outcome import FAILED, SKIPPED, Outcome, describe, guarded as guarded_call
from jurist.judges.panel import PanelResult
from jurist.research.config import ResearchConfig
from jurist.research.stages import TASKS, StageEvaluator

logger = logging.getLogger("jurist.research")

T = TypeVar("T")


@dataclass(frozen=True)
class StageOptions:
    """The fail-safe switches of one stage, times in seconds."""

    stage: str
    enabled: bool
    timeout: float | None
    fail_action: str = "continue"

    @classmethod
    def of(cls, stage: str, config: ResearchConfig) -> "StageOptions":
        switches = config.evaluation.of(stage)
        return cls(stage, config.evaluation.enabled and switches.enabled, switches.timeout_seconds,
                   switches.fail_action)


@dataclass
class Guarded(Outcome[T]):
    """The outcome of a guarded stage evaluation: ``ok`` with its value, ``failed``
    (the evaluator failed; failAction continue or warn) or ``skipped`` (disabled),
    with the reason, and the warning a ``warn`` adds to the record. Either of
    the last two is ``evaluationSkipped`` in the record."""

    warning: str | None = None


def disabled(stage: str) -> Guarded[T]:
    return Guarded(SKIPPED, reason=f"{stage} evaluation disabled by configuration")


def fail(options: StageOptions, reason: str, exc: BaseException | None = None) -> Guarded[T]:
    """Apply the stage's failAction to a failure: raise, or a failed outcome."""
    if options.fail_action == "block":
        raise ResearchBlocked(options.stage, reason) from exc
    message = f"{options.stage} evaluation skipped ({reason}); research continued without quality validation"
    error_type = type(exc).__name__ if exc is not None else None
    if options.fail_action == "warn":
        logger.warning(message)
        return Guarded(FAILED, reason=reason, error_type=error_type, error=exc, warning=message)
    logger.info(message)
    return Guarded(FAILED, reason=reason, error_type=error_type, error=exc)


async def guarded(options: StageOptions, fn: Callable[[], Awaitable[T]]) -> Guarded[T]:
    """Run ``fn`` under the stage's switches: enabled flag, timeout, failAction."""
    if not options.enabled:
        return disabled(options.stage)
    outcome = await guarded_call(fn, timeout=options.timeout, reraise=(ResearchBlocked, CalibrationRequired))
    if outcome.failed:  # evaluation never crashes research (unless the action is block)
        return fail(options, outcome.reason or "failed", outcome.error)
    return Guarded(outcome.status, outcome.value)


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
