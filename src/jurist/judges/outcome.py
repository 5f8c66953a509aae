"""Failure as data: one outcome type and one guarded call.

Every capability (rubric scoring, gate, panel, research, checklist) turns an
evaluation that could not be made into an :class:`Outcome` with status
``failed`` (or ``skipped`` when it was not attempted) and a reason, never a
crash, a NaN or a made-up score. :func:`guarded` is the one place that runs an
evaluation under a time limit and catches its failures.

The file and API formats keep their documented names for these statuses
(``evaluation_failed`` in ``result.json``, ``evaluationSkipped`` in research
records); they are derived from an outcome where the record is written.
:func:`row_status` is the one mapping every capability shares: the
``status`` column of an ``evaluations`` row.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Awaitable, Callable, Final, Generic, Literal, TypeVar

from jurist.errors import Uncertain
from jurist.models.model import time_limit

T = TypeVar("T")

Status = Literal["ok", "failed", "skipped"]
#: The ``status`` column of an ``evaluations`` row (a batch or a research run may also be ``partial``).
RowStatus = Literal["scored", "partial", "failed", "skipped"]

OK: Final = "ok"
FAILED: Final = "failed"
SKIPPED: Final = "skipped"


def row_status(status: Status) -> RowStatus:
    """An outcome's status as an ``evaluations`` row says it: ``ok`` is ``scored``, the others keep their name."""
    return "scored" if status == OK else status


@dataclass
class Outcome(Generic[T]):
    """A value, or why there is none.

    ``status`` is ``ok``, ``failed`` or ``skipped``; ``error_type`` names the
    error class that caused a failure (``ModelTimeout``, ``JudgeParseError``,
    ``Unsupported``, ``TimeoutError``...), so policies can tell kinds apart
    without parsing the reason.
    """

    status: Status
    value: T | None = None
    reason: str | None = None
    error_type: str | None = None
    error: BaseException | None = field(default=None, repr=False, compare=False)  # the cause, in memory only

    @property
    def ok(self) -> bool:
        return self.status == OK

    @property
    def failed(self) -> bool:
        return self.status == FAILED

    @property
    def skipped(self) -> bool:
        return self.status == SKIPPED

    @classmethod
    def success(cls, value: T) -> "Outcome[T]":
        return cls(OK, value)

    @classmethod
    def failure(cls, reason: str, error_type: str | None = None,
                error: BaseException | None = None) -> "Outcome[T]":
        return cls(FAILED, None, reason, error_type, error)

    @classmethod
    def skip(cls, reason: str) -> "Outcome[T]":
        return cls(SKIPPED, None, reason)


def describe(exc: BaseException) -> str:
    """A one-line reason for a record: ``ErrorType: first line of the message`` (an undecided
    judge's own ``uncertain: ...`` as it is)."""
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)) and not str(exc).strip():
        return "timed out"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if isinstance(exc, Uncertain) and text:
        return text  # already reads "uncertain: ..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def timed_out(timeout: float | None, budget: str | None = None) -> str:
    """The reason of a time-out: ``timed out after 2 s (role_timeout)``."""
    reason = f"timed out after {timeout:g} s" if timeout else "timed out"
    return f"{reason} ({budget})" if budget else reason


async def guarded(
    fn: Callable[[], Awaitable[T]],
    *,
    timeout: float | None = None,
    budget: str | None = None,
    reason: Callable[[BaseException], str] = describe,
    catch: tuple[type[BaseException], ...] = (Exception,),
    reraise: tuple[type[BaseException], ...] = (),
) -> Outcome[T]:
    """Run ``fn`` within ``timeout`` seconds (none: no limit); its value is an
    ``ok`` outcome, a time-out or any exception a ``failed`` one.

    ``budget`` names the setting that set the time limit in the reason;
    ``reason`` turns a caught exception into the outcome's reason. Only the
    exception types in ``catch`` become data; those in ``reraise`` (checked
    first) and cancellation always propagate.
    """
    try:
        with time_limit(timeout or None):  # a call cut off by this clock counts as a time-out toward the breaker
            async with asyncio.timeout(timeout or None):
                value = await fn()
    except TimeoutError as exc:
        if timeout is None:  # an inner time limit that is not ours: a failure like any other
            if not isinstance(exc, catch) or isinstance(exc, reraise):
                raise
            return Outcome.failure(reason(exc), type(exc).__name__, exc)
        return Outcome.failure(timed_out(timeout, budget), "TimeoutError", exc)
    except reraise:
        raise
    except catch as exc:  # failure is data, not a crash
        return Outcome.failure(reason(exc), type(exc).__name__, exc)
    return Outcome.success(value)


__all__ = ["FAILED", "OK", "SKIPPED", "Outcome", "RowStatus", "Status", "describe", "guarded", "row_status",
           "timed_out"]
