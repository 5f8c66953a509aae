"""The events of a running research evaluation, for a live view (the note's "Runtime UI").

A :class:`~jurist.research.ResearchEvaluation` given ``events=`` (any callable
taking one event; it may return an awaitable) calls it, in order, with::

    started                                     the query, once
    attempt(stage, attempt, max_attempts)       a stage's evaluation starts ("Evaluating plan (2/3)")
    evaluation(stage, attempt, overall, ...)    its score landed: dimensions, failed rules, critiques
    thinking(stage, attempt, mode, critique)    plan: iterating with the critic's feedback;
                                                answer: regenerating below the bar
    flagged(stage, dimensions, message)         retrieval: a severe failure (below 0.5)
    decision(stage, options, default, ...)      the research waits for proceed / retry (or its time-out)
    decided(stage, choice, by)                  user | timeout
    skipped(stage, attempt, reason)             the fail-safe rules skipped an evaluation
    stage_done(stage, overall, passed, ...)     a stage's final result
    done(overall_score, summary) | error        the last event

The names follow the gate's events (:class:`jurist.gate.GateEvent`):
``evaluation`` when a score lands, ``thinking`` when a new attempt is made
with the judge's feedback, ``done`` and ``error`` last; each event's JSON
(:meth:`ResearchEvent.data`) is what the server sends as one SSE message
whose ``event:`` is the type. Events carry the run's ``log_id`` and a
sequence number ``seq`` (from 1) that a reconnecting reader resumes after.

Model text (critiques, issues, reasons) is in the events as data: whoever
shows it must escape it (the live page sets it with ``textContent``).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Annotated, Any, Awaitable, Callable, Literal, Union, cast

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from jurist.errors import InputError
from jurist.research import stages as st
from jurist.research.config import ResearchConfig
from jurist.research.records import Issue, StageResult, now

Stage = Literal["plan", "retrieval", "answer"]
Choice = Literal["proceed", "retry"]
By = Literal["user", "timeout"]
CHOICES: tuple[Choice, ...] = ("proceed", "retry")

_LABELS = {d.key: d.label for dims in st.DIMENSIONS.values() for d in dims}


class DimensionScore(BaseModel):
    """One dimension's score, with its threshold (plan dimensions) and whether it is below it."""

    key: str
    label: str
    score: float
    threshold: float | None = None
    below: bool = False
    hint: str | None = None  # flagged: what a low score of this dimension means


class Critique(BaseModel):
    role: str
    model: str
    text: str
    error: str | None = None


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid")

    log_id: str = ""
    seq: int = 0
    at: str = Field(default_factory=now)

    def data(self) -> dict[str, JsonValue]:
        """The event as JSON data (what an SSE message carries)."""
        return self.model_dump(mode="json")


class Started(_Event):
    type: Literal["started"] = "started"
    query: str
    max_attempts: int


class AttemptStarted(_Event):
    type: Literal["attempt"] = "attempt"
    stage: Stage
    attempt: int
    max_attempts: int | None = None  # plan: the loop's bound; retrieval and answer: none


class Scored(_Event):
    type: Literal["evaluation"] = "evaluation"
    stage: Stage
    attempt: int
    max_attempts: int | None = None
    overall: float | None
    passed: bool | None
    pass_threshold: float
    dimensions: list[DimensionScore] = Field(default_factory=list)
    failed_rules: list[str] = Field(default_factory=list)
    critiques: list[Critique] = Field(default_factory=list)
    escalated: bool = False


class Iterating(_Event):
    type: Literal["thinking"] = "thinking"
    stage: Stage
    attempt: int  # the attempt about to be made
    mode: str | None = None  # plan: the iteration mode
    critique: str = ""
    issues: list[Issue] = Field(default_factory=list)
    feedback: str = ""


class Flagged(_Event):
    type: Literal["flagged"] = "flagged"
    stage: Stage
    overall: float | None
    dimensions: list[DimensionScore] = Field(default_factory=list)  # the severe ones
    message: str


class Skipped(_Event):
    type: Literal["skipped"] = "skipped"
    stage: Stage
    attempt: int | None = None
    reason: str


class StageDone(_Event):
    type: Literal["stage_done"] = "stage_done"
    stage: Stage
    overall: float | None
    passed: bool | None
    attempts: int
    chosen_attempt: int | None = None
    skipped: bool = False
    skip_reason: str | None = None
    warnings: list[str] = Field(default_factory=list)


class DecisionRequested(_Event):
    type: Literal["decision"] = "decision"
    stage: Stage
    reason: str
    options: list[Choice] = Field(default_factory=lambda: list(CHOICES))
    default: Choice
    timeout_s: float
    # How a front end answers (not part of the JSON): resolve("proceed" | "retry") -> False if already decided.
    resolve: Callable[[str], bool] | None = Field(default=None, exclude=True, repr=False)


class Decided(_Event):
    type: Literal["decided"] = "decided"
    stage: Stage
    choice: Choice
    by: By


class Done(_Event):
    type: Literal["done"] = "done"
    overall_score: float | None
    evaluation_skipped: bool
    skip_reason: str | None = None
    summary: dict[str, JsonValue] = Field(default_factory=dict)


class Failed(_Event):
    type: Literal["error"] = "error"
    error: str
    error_type: str


ResearchEvent = Annotated[
    Union[Started, AttemptStarted, Scored, Iterating, Flagged, Skipped, StageDone, DecisionRequested, Decided, Done,
          Failed],
    Field(discriminator="type")]
#: What ``events=`` takes: called with each event in order; may return an awaitable.
EventSink = Callable[[Any], Union[Awaitable[None], None]]
#: What the stage functions call (the evaluation numbers the event and hands it to the sink).
Emit = Callable[[Any], Awaitable[None]]


async def ignore(event: Any) -> None:
    """The emitter of a stage run without a sink."""


# --- building events from the records ------------------------------------------------


def dimension_scores(stage: str, scores: dict[str, float], config: ResearchConfig) -> list[DimensionScore]:
    dims = config.stages.of(stage).dimensions
    out = []
    for key, score in scores.items():
        cfg = dims.get(key)
        threshold = cfg.threshold if cfg is not None else None
        out.append(DimensionScore(key=key, label=_LABELS.get(key, key.replace("_", " ").capitalize()), score=score,
                                  threshold=threshold, below=threshold is not None and score < threshold))
    return out


def scored(stage: Stage, result: StageResult, attempt: int, config: ResearchConfig, *,
           max_attempts: int | None = None, failed_rules: list[str] | None = None) -> Scored:
    """The ``evaluation`` event of one scored attempt (or stage)."""
    critiques = [Critique(role=r.role, model=r.model, text=r.critique, error=r.error)
                 for r in result.evaluator_results if r.critique or r.error]
    return Scored(stage=stage, attempt=attempt, max_attempts=max_attempts, overall=result.overall,
                  passed=result.passed, pass_threshold=config.stages.of(stage).pass_threshold,
                  dimensions=dimension_scores(stage, result.aggregated_scores, config),
                  failed_rules=list(failed_rules or []), critiques=critiques, escalated=result.escalation is not None)


# --- a decision the research waits for -----------------------------------------------


class PendingDecision:
    """One question to the user (proceed or retry), answered from any thread, once.

    :meth:`resolve` is what a front end calls; :meth:`wait` is what the
    research awaits, ``default`` after ``timeout`` seconds."""

    def __init__(self, default: Choice) -> None:
        if default not in CHOICES:
            raise InputError(f"a decision's default must be one of {', '.join(CHOICES)}, not {default!r}")
        self.default: Choice = default
        self.choice: Choice | None = None
        self.by: By | None = None
        self._lock = threading.Lock()
        self._loop = asyncio.get_running_loop()
        self._future: asyncio.Future[Choice] = self._loop.create_future()

    def resolve(self, choice: str) -> bool:
        """Answer with ``choice``; False when the question was already answered (or timed out)."""
        if choice not in CHOICES:
            raise InputError(f"a decision is one of {', '.join(CHOICES)}, not {choice!r}")
        with self._lock:
            if self.choice is not None:
                return False
            self.choice, self.by = cast(Choice, choice), "user"
        self._loop.call_soon_threadsafe(self._settle, choice)
        return True

    def _settle(self, choice: Choice) -> None:
        if not self._future.done():
            self._future.set_result(choice)

    async def wait(self, timeout: float) -> tuple[Choice, By]:
        """(choice, by): the user's answer, or the default after ``timeout`` seconds."""
        try:
            await asyncio.wait_for(asyncio.shield(self._future), timeout)
        except asyncio.TimeoutError:
            with self._lock:
                if self.choice is None:
                    self.choice, self.by = self.default, "timeout"
                    return self.default, "timeout"
            await self._future  # answered while the time ran out: the answer wins
        assert self.choice is not None and self.by is not None
        return self.choice, self.by
