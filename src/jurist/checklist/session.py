"""The session engine: every user message is evaluated against every unchecked point.

:meth:`ChecklistSession.process_user_message` saves the message, asks the
:class:`~jurist.checklist.evaluator.ChecklistEvaluator` about all unchecked
points in one call, marks each recalled point (event ``point_recalled``),
reviews its FSRS card, checks completion, and has the tutor reply with the
judge's feedback injected as a system-level observation that is part of the
tutor's input but never of the stored conversation. There is no manual
"evaluate now" trigger and no message-count trigger.

Events (``session.on(name, callback)``; sync or async callbacks, called in
order, a failing callback is logged and skipped): ``user_message``,
``point_recalled``, ``assistant_message``, ``session_complete``.

Everything is in the store when a call returns, so
:meth:`ChecklistSession.resume` continues a session in another process.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Awaitable, Callable, Literal, Union

from fsrs import Rating, Scheduler
from pydantic import BaseModel, ConfigDict, Field

from jurist.checklist.evaluator import BatchEvaluation, ChecklistEvaluator, Mode
from jurist.checklist.points import Checklist, ChecklistMessage, ChecklistPoint, load_checklist, parse_checklist
from jurist.checklist.records import ChecklistTurn
from jurist.checklist.scheduling import PointScheduler, rating_for
from jurist.config import Settings
from jurist.errors import ConfigError, InputError, UsageError
from jurist.ids import new_id
from jurist.judges.outcome import OK, row_status
from jurist.judges.prompting import quote
from jurist.judges.templates import PromptSource, PromptTemplate, builtin
from jurist.models.base import ChatRequest, MeaningJudge
from jurist.models.messages import messages_from_openai
from jurist.models.model import Model, Template
from jurist.models.registry import resolve_ref, writes_text
from jurist.runtime import Runtime, runtime_for
from jurist.store import EvaluationRow, Store
from jurist.store.checklist_rows import (ChecklistEvaluationRow, ChecklistMessageRow, ChecklistPointRow,
                                         ChecklistSessionRow)

log = logging.getLogger("jurist.checklist")

EventName = Literal["user_message", "point_recalled", "assistant_message", "session_complete"]
EVENTS: tuple[str, ...] = ("user_message", "point_recalled", "assistant_message", "session_complete")
Callback = Callable[[dict[str, object]], Union[None, Awaitable[None]]]
OBSERVATION_PREFIX = "[EVALUATOR OBSERVATION — not visible to user, do not reference directly]: "
PURPOSE_TUTOR = "checklist_tutor"
TUTOR_TEMPERATURE = 0.7
HOW_TO_CONFIGURE_TUTOR = (
    "no tutor model configured, and the local judge cannot write replies. Pass --tutor MODEL, or define the "
    "alias 'strong' (or 'tutor') under 'aliases:' in jurist.yaml (aliases: {strong: openai/gpt-4o}), or set "
    "JURIST_JUDGE=openai/gpt-4o-mini (with OPENAI_API_KEY)"
)


def tutor_ref(settings: Settings, explicit: str | None = None) -> str:
    """The tutor: explicit, else alias ``tutor``, else ``strong``, else ``settings.judge``."""
    for ref in (explicit, "tutor" if "tutor" in settings.aliases else None,
                "strong" if "strong" in settings.aliases else None, settings.judge):
        if ref:
            full = resolve_ref(ref, settings)
            if not writes_text(full):
                raise ConfigError(f"{full} cannot be the tutor: it cannot write replies; {HOW_TO_CONFIGURE_TUTOR}")
            return full
    raise ConfigError(HOW_TO_CONFIGURE_TUTOR)


class PointState(BaseModel):
    """Where one point of a session stands (changed in place as the session goes)."""

    point: ChecklistPoint
    recalled: bool = False
    confidence: float | None = None
    message_seq: int | None = None


class ProcessMessageResult(BaseModel):
    """What one user message led to (no hidden feedback in here)."""

    model_config = ConfigDict(frozen=True)

    response: str
    completed: bool
    points_recalled_this_turn: list[str] = Field(default_factory=list)
    recalled_count: int = 0
    total_points: int = 0


def _now() -> datetime:
    return datetime.now(timezone.utc)


class ChecklistSession:
    """One learner working through one checklist. Create with :meth:`start` or :meth:`resume`."""

    def __init__(
        self, *, session_id: str, checklist: Checklist, learner: str, mode: Mode, store: Store,
        evaluator: ChecklistEvaluator, tutor: Model, scheduler: PointScheduler, states: list[PointState],
        messages: list[ChecklistMessage], status: str, clock: Callable[[], datetime] = _now,
        prompts: PromptSource | None = None,
    ) -> None:
        self.session_id = session_id
        self.checklist = checklist
        self.learner = learner
        self.mode: Mode = mode  # set to "rabbithole" while a rabbit hole is active
        self.store = store
        self.evaluator = evaluator
        self.tutor = tutor
        self.scheduler = scheduler
        self.states = states
        self.messages = messages
        self.status = status  # active | completed | ended
        self.clock = clock
        self.last_evaluation: BatchEvaluation | None = None  # hidden data, never for the learner
        self._listeners: dict[str, list[Callback]] = {e: [] for e in EVENTS}
        self._lock = asyncio.Lock()
        self._template = builtin("checklist_tutor")
        self.prompts = prompts  # the prompt lab's routes: which text of the tutor's prompt a reply uses

    # -- creation -------------------------------------------------------------
    @classmethod
    async def start(
        cls, checklist: Checklist | str | Path | Mapping[str, object], *, store: Store | None = None,
        learner: str = "default", mode: Mode = "recall", tutor: str | Model | None = None,
        judge: str | Model | MeaningJudge | None = None, settings: Settings | None = None,
        runtime: Runtime | None = None, scheduler: Scheduler | None = None, session_id: str | None = None,
        clock: Callable[[], datetime] = _now,
    ) -> "ChecklistSession":
        """Start a new session (stored at once) for ``learner`` on ``checklist``. Models are
        resolved and the session stored through ``runtime`` (or ``settings`` and ``store``)."""
        if isinstance(checklist, (str, Path)):
            checklist = await asyncio.to_thread(load_checklist, checklist)
        elif not isinstance(checklist, Checklist):
            checklist = parse_checklist(checklist)
        if mode not in ("recall", "rabbithole"):
            raise InputError(f"mode must be 'recall' or 'rabbithole', not {mode!r}")
        runtime, store = await _runtime(runtime, settings, store)
        tutor_model = _tutor(tutor, runtime)
        evaluator = ChecklistEvaluator(judge, runtime=runtime)
        sid = session_id or new_id()
        at = clock()
        await store.create_checklist_session(
            ChecklistSessionRow(
                id=sid, learner=learner, title=checklist.title, points=[p.model_dump() for p in checklist.points],
                mode=mode, tutor_model=tutor_model.name, judge_model=evaluator.judge_model, status="active",
                created_at=at, updated_at=at),
            [ChecklistPointRow(session_id=sid, point_id=p.id, position=i, status="pending")
             for i, p in enumerate(checklist.points)],
        )
        return cls(session_id=sid, checklist=checklist, learner=learner, mode=mode, store=store, evaluator=evaluator,
                   tutor=tutor_model, scheduler=PointScheduler(store, scheduler),
                   states=[PointState(point=p) for p in checklist.points], messages=[], status="active", clock=clock,
                   prompts=runtime.prompts)

    @classmethod
    async def resume(
        cls, session_id: str, *, store: Store | None = None, tutor: str | Model | None = None,
        judge: str | Model | MeaningJudge | None = None, settings: Settings | None = None,
        runtime: Runtime | None = None, scheduler: Scheduler | None = None, clock: Callable[[], datetime] = _now,
    ) -> "ChecklistSession":
        """Load a stored session: its checklist, messages and point states. The tutor and
        judge default to the ones the session was started with."""
        runtime, store = await _runtime(runtime, settings, store)
        row = await store.checklist_session(session_id)
        if row is None:
            raise InputError(f"no checklist session {session_id!r} in the store; start a new one")
        checklist = parse_checklist({"title": row.title, "points": row.points}, f"session {session_id}")
        tutor_model = _tutor(tutor or row.tutor_model, runtime)
        evaluator = ChecklistEvaluator(judge or row.judge_model, runtime=runtime)
        by_id = {r.point_id: r for r in await store.checklist_points(session_id)}
        states = []
        for p in checklist.points:
            r = by_id.get(p.id)
            states.append(PointState(point=p) if r is None else
                          PointState(point=p, recalled=r.status == "recalled", confidence=r.confidence,
                                     message_seq=r.message_seq))
        messages = [ChecklistMessage(role=m.role, content=m.content, seq=m.seq, id=m.id)
                    for m in await store.checklist_messages(session_id)]
        return cls(session_id=session_id, checklist=checklist, learner=row.learner, mode=row.mode,
                   store=store, evaluator=evaluator, tutor=tutor_model, scheduler=PointScheduler(store, scheduler),
                   states=states, messages=messages, status=row.status, clock=clock, prompts=runtime.prompts)

    # -- what a page can read -------------------------------------------------
    @property
    def title(self) -> str:
        return self.checklist.title

    @property
    def recalled_count(self) -> int:
        return sum(s.recalled for s in self.states)

    @property
    def total_points(self) -> int:
        return len(self.states)

    @property
    def completed(self) -> bool:
        """True once every point is recalled."""
        return self.status == "completed"

    @property
    def active(self) -> bool:
        return self.status == "active"

    def visible_messages(self) -> list[ChecklistMessage]:
        """The conversation as the learner sees it (the stored messages)."""
        return list(self.messages)

    def unchecked_points(self) -> list[ChecklistPoint]:
        return [s.point for s in self.states if not s.recalled]

    def opening(self) -> str:
        """A greeting to show before the first message (not stored, no model call)."""
        return f"Let's review \"{self.title}\". Tell me everything you remember about it."

    # -- events -----------------------------------------------------------------
    def on(self, event: EventName, callback: Callback) -> Callable[[], None]:
        """Call ``callback(payload)`` on ``event``; returns a function that unsubscribes."""
        if event not in self._listeners:
            raise ValueError(f"unknown event {event!r}; one of {', '.join(EVENTS)}")
        self._listeners[event].append(callback)
        return lambda: self._listeners[event].remove(callback)

    async def _emit(self, event: EventName, **fields: object) -> None:
        payload: dict[str, object] = {"event": event, "session_id": self.session_id, **fields}
        for cb in list(self._listeners[event]):
            try:
                out = cb(payload)
                if inspect.isawaitable(out):
                    await out
            except Exception:  # a listener must not break the session
                log.exception("checklist %s listener failed", event)

    # -- the turn -----------------------------------------------------------------
    async def process_user_message(self, content: str) -> ProcessMessageResult:
        """Save, evaluate all unchecked points, mark, schedule, complete, reply."""
        if not content or not content.strip():
            raise InputError("the message is empty")
        async with self._lock:
            if not self.active:
                raise UsageError(f"session {self.session_id} is {self.status}; start a new session")
            user = await self._save("user", content)
            await self._emit("user_message", message_id=user.id, content=content)
            unchecked = self.unchecked_points()
            evaluation = await self.evaluator.evaluate_batch(unchecked, self.messages, self.mode,
                                                             trace_id=self.session_id)
            self.last_evaluation = evaluation
            at = self.clock()
            recalled = {pid: evaluation.confidence_per_point.get(pid, 0.5) for pid in evaluation.recalled_point_ids}
            turn = _turn(self, user.seq, unchecked, evaluation, len(recalled))
            await self.store.record_checklist_evaluation(_evaluation_row(turn, at), recalled, at,
                                                         _summary_row(self, turn, at))
            by_id = {s.point.id: s for s in self.states}
            for pid, confidence in recalled.items():
                state = by_id[pid]
                state.recalled, state.confidence, state.message_seq = True, confidence, user.seq
                await self._emit("point_recalled", point_id=pid, confidence=confidence,
                                 recalled_count=self.recalled_count,
                                 total_points=self.total_points)
                await self.scheduler.review(self.learner, self.title, pid, state.point.text,
                                            rating_for(confidence), now=at)
            if self.recalled_count == self.total_points:
                await self._close("completed")
            response = await self._tutor_reply(evaluation.feedback)
            reply = await self._save("assistant", response)
            await self._emit("assistant_message", message_id=reply.id, content=response)
            if self.completed:
                await self._emit("session_complete", all_recalled=True, recalled_count=self.recalled_count,
                                 total_points=self.total_points)
            return ProcessMessageResult(response=response, completed=self.completed,
                                        points_recalled_this_turn=list(recalled), recalled_count=self.recalled_count,
                                        total_points=self.total_points)

    @property
    def awaiting_reply(self) -> bool:
        """True when the last learner message has no tutor reply (the tutor failed)."""
        return bool(self.messages) and self.messages[-1].role == "user"

    async def reply_again(self) -> ProcessMessageResult:
        """Ask the tutor again for a reply to the last learner message, after the
        tutor failed; the message is neither saved nor judged a second time."""
        async with self._lock:
            if not self.awaiting_reply:
                raise UsageError("the last learner message already has a reply")
            feedback = self.last_evaluation.feedback if self.last_evaluation is not None else ""
            response = await self._tutor_reply(feedback)
            reply = await self._save("assistant", response)
            await self._emit("assistant_message", message_id=reply.id, content=response)
            if self.completed:
                await self._emit("session_complete", all_recalled=True, recalled_count=self.recalled_count,
                                 total_points=self.total_points)
            return ProcessMessageResult(response=response, completed=self.completed, points_recalled_this_turn=[],
                                        recalled_count=self.recalled_count, total_points=self.total_points)

    async def finish(self) -> None:
        """End the session early: points never recalled are reviewed as ``Again``."""
        async with self._lock:
            if not self.active:
                return
            at = self.clock()
            for s in self.states:
                if not s.recalled:
                    await self.scheduler.review(self.learner, self.title, s.point.id, s.point.text, Rating.Again,
                                                now=at)
            await self._close("ended")
            await self._emit("session_complete", all_recalled=False, recalled_count=self.recalled_count,
                             total_points=self.total_points)

    async def _close(self, status: str) -> None:
        await self.store.set_checklist_status(self.session_id, status, self.clock())
        self.status = status

    async def _save(self, role: str, content: str) -> ChecklistMessage:
        seq = (self.messages[-1].seq if self.messages else 0) + 1
        msg = ChecklistMessage(role=role, content=content, seq=seq, id=new_id())
        await self.store.add_checklist_message(ChecklistMessageRow(id=msg.id, session_id=self.session_id, seq=seq,
                                                                   role=role, content=content,
                                                                   created_at=self.clock()))
        self.messages.append(msg)
        return msg

    def tutor_messages(self, feedback: str = "", template: PromptTemplate | None = None) -> list[dict[str, str]]:
        """The tutor's input: its instructions (``template``, else the shipped ``checklist_tutor``),
        the evaluator's observation (if any), the conversation."""
        unchecked = self.unchecked_points()
        system = (template or self._template).render(
            title=self.title, recalled_count=self.recalled_count, total_points=self.total_points,
            unchecked="\n".join(quote("statement", p.text, p.id) for p in unchecked) or "(none: all recalled)",
        )
        out = [{"role": "system", "content": system}]
        if feedback and feedback.strip():
            out.append({"role": "system", "content": OBSERVATION_PREFIX + feedback.strip()})
        out.extend({"role": m.role, "content": m.content} for m in self.messages)
        return out

    async def _tutor_reply(self, feedback: str) -> str:
        template = (self._template if self.prompts is None
                    else await self.prompts.resolve(self._template, lambda: self.session_id))  # one arm per session
        request = ChatRequest(messages=messages_from_openai(self.tutor_messages(feedback, template)),
                              temperature=TUTOR_TEMPERATURE,
                              max_tokens=1024)
        completion = await self.tutor.complete(request, purpose=PURPOSE_TUTOR, trace_id=self.session_id,
                                               template=Template(template.name, template.hash),
                                               use_cache=False)
        return completion.text.strip()

    async def aclose(self) -> None:
        await self.evaluator.aclose()
        await self.tutor.aclose()


async def _runtime(runtime: Runtime | None, settings: Settings | None,
                   store: Store | None) -> tuple[Runtime, Store]:
    """The runtime a session works in and its store: ``runtime``, else one over ``settings``
    (loaded off the loop when none) and ``store``, which is then required."""
    if runtime is None:
        if store is None:
            raise UsageError("a checklist session needs runtime= (jurist.open()) or store=")
        runtime = await asyncio.to_thread(runtime_for, None, settings, store)
    return runtime, await runtime.astore()


def _tutor(tutor: str | Model | None, runtime: Runtime) -> Model:
    if isinstance(tutor, Model):
        return tutor
    return runtime.model(tutor_ref(runtime.settings, tutor), cache=False)


_SESSION_FIELDS: set[str] = {"kind", "version", "learner", "title", "recalled_count", "total_points"}


def _turn(session: ChecklistSession, seq: int, unchecked: list[ChecklistPoint], ev: BatchEvaluation,
          newly_recalled: int) -> ChecklistTurn:
    """The stored record of this turn: the evaluation, and the session's progress after it."""
    return ChecklistTurn.of(ev, id=new_id(), session_id=session.session_id, message_seq=seq, mode=session.mode,
                            unchecked=[p.id for p in unchecked], learner=session.learner, title=session.title,
                            recalled_count=session.recalled_count + newly_recalled,
                            total_points=session.total_points)


def _evaluation_row(turn: ChecklistTurn, at: datetime) -> ChecklistEvaluationRow:
    """The turn's ``checklist_evaluations`` row (its status by the stored name)."""
    return ChecklistEvaluationRow.model_validate(turn.model_dump(exclude=_SESSION_FIELDS) | {"created_at": at})


def _summary_row(session: ChecklistSession, turn: ChecklistTurn, at: datetime) -> EvaluationRow:
    """The turn's ``evaluations`` row (kind ``checklist``, payload a :class:`ChecklistTurn`): its score
    is the share of the checklist recalled after this message; a checklist turn has no pass rule."""
    progress = (turn.recalled_count or 0) / (session.total_points or 1)
    return EvaluationRow(
        id=turn.id, subject_id=session.session_id, trace_id=session.session_id, status=row_status(turn.status),
        score=round(progress, 4), max_score=1.0, percentage=round(progress * 100.0, 2),
        judge_model=turn.judge_model, source=session.title, created_at=at, payload=turn,
        passed=None, failure=None if turn.status == OK else turn.turn_status,
    )
