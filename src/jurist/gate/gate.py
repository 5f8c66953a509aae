"""The response gate: evaluate an answer before it is final, regenerate on a low score.

``Gate.stream`` yields :data:`~jurist.gate.events.GateEvent`s in order; ``Gate.run``
consumes it and returns the :class:`~jurist.gate.records.GateRecord`. For every attempt
the sequence is::

    rejected attempt:  evaluation(accepted=false), thinking(strategy=regenerate, retry_count)
    accepted answer:   delta* (if nothing was shown yet) | revision (if another was shown),
                       evaluation(accepted=true), done(trace_id)
    generation error:  error(continue_context)          (nothing after it)
    feedback off:      delta*, done(evaluation_pending), evaluation(after_done=true)

With ``evaluate_feedback_enabled`` off (the default) ``done`` goes out as soon as
the answer is complete, and the evaluation runs after it (note 001's flow): a
task the gate owns, whose record goes to the store when the judge has answered.
A consumer that reads on after ``done`` gets that evaluation as one more event;
one that stops at ``done`` (the proxy, :meth:`Gate.run`) does not wait for it.
:meth:`Gate.aclose` (and :meth:`Gate.drain`) wait for the evaluations still
running; those that outlive ``close_timeout_s`` are recorded as skipped.

Strategies: ``blocking`` releases nothing until an answer is accepted;
``revision`` streams the first answer at once and replaces it with a
``revision`` event; ``parallel`` streams it at once while judging snapshots of
it, one at a time, and decides right after the stream ends (a pass on at
least ``parallel_min_coverage`` of the text is trusted; anything else is
judged again on the whole text). With ``evaluate_feedback_enabled`` off the
answer streams at once and is only scored, after ``done``. A ``structured``
request (its answer is JSON, or tool calls: usable only whole) is never shown
before it is accepted, whatever the strategy: no ``revision`` follows an
answer already shown, and the regeneration notice is only the ``thinking``
event's ``message``, never text of the answer.

An answer cut off at the token limit (its generation's ``finish_reason`` is
``length``) is judged as such: the evaluator is told, the comprehensiveness check
counts it as not comprehensive (reason: "the answer was cut off at the token
limit"), a regeneration asks for a complete answer that fits, and the record says
``truncated`` when the released answer is one.

Fail-safe: a failing or timed-out evaluator accepts the answer
(``evaluation_skipped``); the budget (``budget_s``) bounds everything, and when
another regenerate + evaluate would not fit, the best answer so far is accepted.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import inspect
import logging
import shlex
import time
from typing import Any, AsyncGenerator, AsyncIterator, Callable, Iterable, Mapping, Sequence

from jurist.config import Settings
from jurist.errors import ConfigError, IterationLimit
from jurist.gate import policy
from jurist.gate.config import GateConfig
from jurist.gate.evaluators import (
    ComprehensivenessEvaluator,
    FunctionEvaluator,
    GateEvaluator,
    QualityEvaluator,
    last_question,
)
from jurist.gate.evaluation import Run, calls_of, evaluate_attempt, skipped
from jurist.gate.events import (
    DeltaEvent,
    DoneEvent,
    ErrorEvent,
    EvaluationEvent,
    GateEvent,
    RevisionEvent,
    ThinkingEvent,
)
from jurist.gate.parallel import Snapshots
from jurist.gate.records import (
    Attempt,
    CallCollector,
    CallEntry,
    Evaluation,
    GateRecord,
    evaluation_row,
    evaluations_list,
    score_rows,
)
from jurist.gate.types import (
    CALL_GENERATION,
    QUESTION_CHARS,
    REVISION_MESSAGE,
    AcceptReason,
    AttemptKind,
    ErrorCode,
    Generator,
)
from jurist.ids import new_id
from jurist.judges.calibration import LABELS_PLACEHOLDER, JudgeUse, identity_of, require_calibrated
from jurist.judges.judge import Judge
from jurist.models.base import ChatRequest, MeaningJudge
from jurist.models.messages import Message, openai_messages
from jurist.models.model import Model
from jurist.runtime import Runtime, runtime_for
from jurist.store import Store

log = logging.getLogger("jurist.gate")


class _OutOfBudget(Exception):
    """Generation did not finish within the budget."""


class Gate:
    """Evaluate before send; regenerate with the judge's feedback (see the module doc)."""

    def __init__(self, config: GateConfig | None = None, *, runtime: Runtime | None = None,
                 settings: Settings | None = None, store: Store | None = None,
                 evaluator: str | Callable[..., Any] | GateEvaluator | None = None,
                 judge: str | Model | MeaningJudge | None = None) -> None:
        """``runtime`` (or ``settings`` and ``store`` to build one from) resolves the models and
        holds the store the records go to. The constructor opens nothing: :meth:`astart` (or
        ``async with``) opens the store off the event loop before the first request; otherwise
        the first request opens it, before its budget starts."""
        self.config = config or GateConfig()
        self._own_runtime = runtime is None
        self.runtime = runtime_for(runtime, settings, store)
        self.settings = self.runtime.settings
        self._collector = CallCollector(self.runtime.sink)
        self._models: dict[str, Model] = {}
        self._owned_models: list[Model] = []
        # feedback off: the evaluations running after done (all of them; and the latest by trace id)
        self._after_done: set[asyncio.Task[GateRecord]] = set()
        self._after_done_of: dict[str, asyncio.Task[GateRecord]] = {}
        self.evaluator = self._build_evaluator(evaluator, judge)
        self._calibration = self._calibration_uses()  # checked against the store before the first judge call

    @property
    def collector(self) -> CallCollector:
        """The sink that keeps each open trace's call entries (in front of the runtime's)."""
        return self._collector

    @property
    def store(self) -> Store:
        """The store the gate's records go to (the runtime's)."""
        return self.runtime.store

    # -- construction -------------------------------------------------------------------
    def wrap(self, model: Model) -> Model:
        """A copy of ``model`` whose calls (on a request's trace id) are also in
        that request's ``llm_calls``: for a generator that calls a model itself."""
        clone = copy.copy(model)
        clone.sink = self._collector.sharing(model.sink)
        return clone

    def _build_evaluator(self, evaluator: Any, judge: Any) -> GateEvaluator:
        cfg = self.config
        if evaluator is not None and not isinstance(evaluator, str):
            if isinstance(evaluator, GateEvaluator):
                return evaluator
            if callable(evaluator):
                return FunctionEvaluator(evaluator, cfg.threshold)
            raise ConfigError(f"evaluator must be 'quality', 'comprehensiveness' or an async function, not {evaluator!r}")
        name = evaluator or cfg.evaluator
        if name not in ("quality", "comprehensiveness"):
            raise ConfigError(f"unknown gate evaluator {name!r}; use 'quality' or 'comprehensiveness'")
        self.config = cfg = cfg.model_copy(update={"evaluator": name})
        if isinstance(judge, Model) or (judge is not None and not isinstance(judge, str)):
            model = self.wrap(self.runtime.judge(judge))
        else:
            ref = judge or cfg.judge or ("fast" if "fast" in self.settings.aliases else None)
            model = self.runtime.model(self.runtime.judge_ref(ref), sink=self._collector)
            self._owned_models.append(model)
        cls = QualityEvaluator if name == "quality" else ComprehensivenessEvaluator
        return cls(model, cfg.threshold, prompts=self.runtime.prompts)

    def _calibration_uses(self) -> list[JudgeUse]:
        """The evaluator's judge and the bar its calibration must meet (none without ``require_calibration``)."""
        bar = self.config.require_calibration
        if bar is None:
            return []
        judge = getattr(self.evaluator, "judge", None)
        if not isinstance(judge, Judge):
            raise ConfigError(f"require_calibration needs a judge (a model and a prompt template) to look calibrations "
                              f"up for; the {self.evaluator.name} evaluator {type(self.evaluator).__name__} has none")
        name = self.evaluator.name
        if name in ("quality", "comprehensiveness"):
            args = ["jurist", "calibrate", "--gate", name, "--judge", judge.model.name]
            if name == "quality":
                args += ["--threshold", f"{self.config.threshold:g}"]
            command = shlex.join(args + ["--labels", LABELS_PLACEHOLDER, "--sessions", "SESSIONS/"])
        else:
            command = ("await jurist.analysis.calibrate_gate.calibrate_gate(gate, labels, [sessions]) (Python; labels "
                       f'with "rubric": "{name}"; see docs/calibration.md)')
        return [JudgeUse(identity_of(judge, name), bar, command, routed=judge)]

    async def check_calibration(self) -> None:
        """With ``require_calibration``: raise :class:`~jurist.errors.CalibrationRequired` unless the
        store holds a good enough calibration of the evaluator's judge (looked up once per gate)."""
        if self._calibration:
            await require_calibrated(self.runtime, self._calibration)
            self._calibration = []

    def _generator_model(self, ref: str) -> Model:
        if ref not in self._models:
            self._models[ref] = model = self.runtime.model(ref, sink=self._collector, cache=False)
            self._owned_models.append(model)
        return self._models[ref]

    # -- public API ---------------------------------------------------------------------
    async def run(self, messages: Iterable[Message | Mapping[str, Any]], generate: Generator, *, is_continuation: bool = False,
                  trace_id: str | None = None, wait_for_evaluation: bool = False,
                  structured: bool = False) -> GateRecord:
        """Gate one request and return its record (consumes :meth:`stream` up to ``done`` or ``error``).
        ``messages``: typed messages or OpenAI-style dicts (checked strictly: an InputError names a bad one).

        With feedback off the record is returned at ``done``, its evaluation still
        running (``evaluation_pending``); ``wait_for_evaluation=True`` returns the
        record with the evaluation instead (the one that is stored). ``structured``:
        as for :meth:`stream`."""
        result: GateRecord | None = None
        events = self.stream(messages, generate, is_continuation=is_continuation, trace_id=trace_id,
                             structured=structured)
        async with contextlib.aclosing(events):
            async for ev in events:
                if ev.result is not None:
                    result = ev.result
                    if isinstance(ev, (DoneEvent, ErrorEvent)) and not (wait_for_evaluation
                                                                        and result.evaluation_pending):
                        break
        assert result is not None
        return result

    async def stream(self, messages: Iterable[Message | Mapping[str, Any]], generate: Generator, *, is_continuation: bool = False,
                     trace_id: str | None = None, structured: bool = False) -> AsyncGenerator[GateEvent, None]:
        """Gate one request, yielding its events in order (the last is ``done`` or ``error``).

        ``structured``: the answer is usable only whole (JSON asked with ``response_format``, or
        tool calls): with feedback on, no strategy shows it before it is accepted (``revision``
        and ``parallel`` hold it as ``blocking`` does), so the client gets one answer, never a
        first one followed by a ``revision``; a regeneration's notice is the ``thinking``
        event's ``message`` only."""
        trace_id = trace_id or new_id()
        typed, raw = policy.read_messages(messages)
        await self.astart()  # the store opened before the budget starts
        run = Run(trace_id, policy.current_cycle(typed, is_continuation), typed, raw,
                  time.monotonic() + self.config.budget_s, self._collector.open(trace_id))
        try:
            async for ev in self._drive(run, generate, structured):
                yield ev
        finally:
            if not run.after_done:  # else the evaluation after done closes the trace
                self._collector.close(trace_id)

    async def evaluate(self, messages: Iterable[Message | Mapping[str, Any]], answer: str, *, attempt: int = 1,
                       trace_id: str | None = None) -> Evaluation:
        """Evaluate one answer on its own (fail-safe, bounded by ``judge_timeout_s``), as the LangGraph node does."""
        trace_id = trace_id or new_id()
        typed, raw = policy.read_messages(messages)
        await self.check_calibration()
        run = Run(trace_id, typed, typed, raw, time.monotonic() + self.config.budget_s,
                  self._collector.open(trace_id))
        try:
            return await evaluate_attempt(self.evaluator, self.config, run, answer, attempt)
        finally:
            self._collector.close(trace_id)

    async def astart(self) -> "Gate":
        """Open the store (off the event loop) so that no request waits for it; with
        ``require_calibration``, check the evaluator's calibration there."""
        if self.runtime.has_store:
            await self.runtime.astore()
        await self.check_calibration()
        return self

    async def __aenter__(self) -> "Gate":
        return await self.astart()

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def settle(self, trace_id: str, timeout: float | None = None) -> GateRecord | None:
        """The record of ``trace_id`` once its evaluation after ``done`` has ended and its record is
        queued for the store (feedback off; :meth:`Store.aflush` then commits it); None when none is
        running for it, or it still runs after ``timeout`` s."""
        task = self._after_done_of.get(trace_id)
        if task is None or task.get_loop() is not asyncio.get_running_loop():
            return None
        await asyncio.wait([task], timeout=timeout)
        return task.result() if task.done() and not task.cancelled() and task.exception() is None else None

    async def drain(self, timeout: float | None = None) -> None:
        """Wait for the evaluations still running after ``done`` (feedback off) and their
        records; after ``timeout`` seconds the rest are cancelled and recorded as skipped."""
        loop = asyncio.get_running_loop()
        tasks = {t for t in self._after_done if not t.done() and t.get_loop() is loop}
        if not tasks:
            return
        _, late = await asyncio.wait(tasks, timeout=timeout)
        for task in late:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def aclose(self) -> None:
        """Finish the evaluations still running after ``done`` (at most ``close_timeout_s``;
        the rest recorded as skipped), then close the models this gate resolved and the
        store it opened."""
        await self.drain(self.config.close_timeout_s)
        for model in self._owned_models:
            await model.aclose()
        self._owned_models.clear()
        if self._own_runtime:
            await self.runtime.aclose()

    # -- one request --------------------------------------------------------------------
    async def _drive(self, run: Run, generate: Generator, structured: bool = False) -> AsyncIterator[GateEvent]:
        cfg = self.config
        feedback = cfg.evaluate_feedback_enabled
        strategy = cfg.strategy if feedback else "revision"
        # An answer usable only whole is held until accepted when it may be replaced (feedback on).
        hold = structured and feedback
        cap = cfg.regenerations() if feedback else 0
        gen_messages: list[Message] = run.messages
        kind: AttemptKind = CALL_GENERATION
        shown: int | None = None  # the number of the attempt the client has seen
        deltas: list[str] = []
        reason: AcceptReason = "passed"
        while True:
            number = len(run.attempts) + 1
            live = strategy != "blocking" and shown is None and not hold
            snaps = Snapshots(cfg, self.evaluator, run, number) if strategy == "parallel" and feedback else None
            text, deltas, started = "", [], time.monotonic()
            try:
                async for delta in self._generate(run, generate, gen_messages, kind, number):
                    text += delta
                    deltas.append(delta)
                    if live:
                        yield DeltaEvent(text=delta, attempt=number)
                    if snaps:
                        snaps.feed(text)
            except Exception as exc:
                if snaps:
                    await snaps.cancel()
                if not run.attempts:
                    yield await self._error(run, exc, text)
                    return
                reason = "budget" if isinstance(exc, _OutOfBudget) else "regeneration_failed"
                break
            run.gen_s.append(time.monotonic() - started)
            run.attempts.append(Attempt(number=number, kind=kind, text=text,
                                        latency_ms=round(run.gen_s[-1] * 1000.0, 3)))
            if live:
                shown = number
            if not feedback:  # note 001: done first, the evaluation after it
                reason = "feedback_disabled"
                break
            cut = run.cut_off(number)  # cut at the token limit: judged whole, told so; no snapshot is trusted
            if snaps and cut:
                await snaps.cancel()
                snaps = None
            ev = await (snaps.decide(text) if snaps else evaluate_attempt(self.evaluator, cfg, run, text, number))
            run.evaluated(number, ev)
            if ev.passed is None:
                reason = "evaluation_skipped"
            elif ev.passed:
                reason = "passed"
            elif number - 1 >= cap:
                reason = "max_regenerations"
            elif not policy.fits(run.remaining(), run.gen_s, run.eval_s):
                reason = "budget"
            else:
                yield EvaluationEvent(evaluation=ev, accepted=False)
                yield ThinkingEvent(message=REVISION_MESSAGE, retry_count=number, ts=time.time(),
                                    feedback=ev.improvement_hint or ev.reason)
                gen_messages, kind = policy.regeneration_request(run.messages, text, ev, cfg.previous_chars,
                                                                cut=cut)
                continue
            break
        accepted = run.attempts[-1] if reason in ("passed", "evaluation_skipped", "feedback_disabled") \
            else policy.best_attempt(run.attempts)
        if shown is None:
            chunks = deltas if accepted is run.attempts[-1] and reason != "regeneration_failed" else [accepted.text]
            for delta in chunks:
                yield DeltaEvent(text=delta, attempt=accepted.number)
        elif shown != accepted.number:
            yield RevisionEvent(text=accepted.text, attempt=accepted.number, replaces=shown)
        result = self.record_of(run, accepted, reason)
        if not feedback:
            async for event in self._done_first(run, accepted, result):
                yield event
            return
        last = run.attempts[-1].evaluation
        if last is not None:
            yield EvaluationEvent(evaluation=last, accepted=True, accepted_attempt=accepted.number,
                                  accept_reason=reason)
        await self.save(result)
        yield DoneEvent(result=result)

    async def _done_first(self, run: Run, accepted: Attempt, result: GateRecord) -> AsyncIterator[GateEvent]:
        """``done`` now, the evaluation in a task the gate owns; to a consumer that reads on, its event."""
        assert result.accept_reason is not None
        run.after_done = True
        task = asyncio.create_task(self._evaluate_after_done(run, accepted, result.accept_reason))
        self._after_done.add(task)
        self._after_done_of[run.trace_id] = task
        task.add_done_callback(lambda t: self._forget(run.trace_id, t))
        yield DoneEvent(result=result.model_copy(update={"evaluation_pending": True}))
        final = await asyncio.shield(task)  # a consumer that stops waiting does not stop the evaluation
        yield EvaluationEvent(evaluation=final.evaluations[-1], accepted=True, accepted_attempt=accepted.number,
                              accept_reason=final.accept_reason, after_done=True, result=final)

    def _forget(self, trace_id: str, task: asyncio.Task[GateRecord]) -> None:
        self._after_done.discard(task)
        if self._after_done_of.get(trace_id) is task:
            del self._after_done_of[trace_id]

    async def _evaluate_after_done(self, run: Run, attempt: Attempt, reason: AcceptReason) -> GateRecord:
        """Evaluate the answer already sent and store the record. The budget bounded what the user
        waited for; this evaluation gets its own ``judge_timeout_s``. Cancelled (the gate closing),
        it is recorded as skipped: the record is never lost."""
        cfg = self.config
        run.deadline = max(run.deadline, time.monotonic() + cfg.judge_timeout_s + policy.BUDGET_MARGIN_S)
        started = time.monotonic()
        try:
            try:
                ev = await evaluate_attempt(self.evaluator, cfg, run, attempt.text, attempt.number)
            except asyncio.CancelledError:
                ev = skipped(attempt.number, "the gate closed before the evaluator answered").model_copy(
                    update={"latency_ms": round((time.monotonic() - started) * 1000.0, 3)})
            result = self.record_of(run, run.evaluated(attempt.number, ev), reason)
            try:
                # Queued like every other record: the store's writer commits it with the records and
                # calls queued around it, one transaction for many (a commit of its own for each
                # answer cost the writer more than the inserts). A reader that must see it flushes
                # the store first (GET /api/gate/{trace_id}?wait= does); closing the store writes it.
                await self.save(result)
            except Exception:  # nobody awaits this task's outcome: say it where it can be read
                log.exception("the gate could not store the record of trace %s", run.trace_id)
            return result
        finally:
            self._collector.close(run.trace_id)

    async def _generate(self, run: Run, generate: Generator, messages: Sequence[Message], kind: str,
                        number: int) -> AsyncIterator[str]:
        """The attempt's text deltas, bounded by the budget. The generator is read in this task,
        each piece awaited under the budget's clock: no task of its own and no queue, so that a
        piece is not handed from task to task (under load each hand-over waits its turn on the
        event loop). The calls it makes are recorded as attempt ``number``'s, for ``kind``."""
        started = time.monotonic()
        failure: BaseException | None = None
        pieces = self._pieces(run, generate, messages, kind)
        try:
            async with contextlib.aclosing(pieces):
                while True:
                    remaining = run.remaining()
                    if remaining <= 0:
                        raise _OutOfBudget(f"the {self.config.budget_s:g} s budget ran out while generating")
                    try:
                        with calls_of(number, kind):
                            async with asyncio.timeout(remaining):
                                item = await anext(pieces, None)
                    except TimeoutError:
                        raise _OutOfBudget(f"the {self.config.budget_s:g} s budget ran out while generating") from None
                    if item is None:
                        break
                    yield item
        except BaseException as exc:
            failure = exc
            raise
        finally:
            # A function generator is listed as one call, unless it made (and so recorded) its own model call.
            if not isinstance(generate, str) and not any(
                    c.type == kind and c.iteration == number for c in run.calls):
                failed = failure is not None and not isinstance(failure, GeneratorExit)
                run.calls.append(CallEntry(type=kind, iteration=number, model=_fn_name(generate),
                                           latency_ms=round((time.monotonic() - started) * 1000.0, 3),
                                           status="error" if failed else "ok", call_id=None,
                                           error=f"{type(failure).__name__}: {failure}" if failed else None))

    async def _pieces(self, run: Run, generate: Generator, messages: Sequence[Message],
                      kind: str) -> AsyncGenerator[str, None]:
        """The text pieces of one generation: from the generator model named ``generate``, or from
        a user's function (a string, an awaitable of one, or an async iterator of pieces)."""
        if isinstance(generate, str):
            s = self.settings
            request = ChatRequest(messages=tuple(policy.for_model(messages)),
                                  temperature=self.config.temperature if
                                  self.config.temperature is not None else s.temperature,
                                  max_tokens=self.config.max_tokens or s.max_tokens)
            stream = self._generator_model(generate).stream(request, purpose=kind, trace_id=run.trace_id)
            async with contextlib.aclosing(stream):
                async for delta in stream:
                    if isinstance(delta, str):  # a generator model's text (it is asked for no tools)
                        yield delta
            return
        out: Any = generate(openai_messages(messages))  # a user's function: OpenAI-style dicts
        if inspect.isawaitable(out):
            out = await out
        if isinstance(out, str):
            yield out
            return
        try:
            async for delta in out:
                yield str(delta)
        finally:
            close = getattr(out, "aclose", None)
            if close is not None:
                await close()

    async def _error(self, run: Run, exc: Exception, partial: str) -> ErrorEvent:
        code: ErrorCode = "MAX_ITERATIONS" if isinstance(exc, IterationLimit) else (
            "BUDGET" if isinstance(exc, _OutOfBudget) else "GENERATION_FAILED")
        typed, context = run.received, run.original
        loop_messages = exc.messages if isinstance(exc, IterationLimit) else None
        if loop_messages:  # a tool loop's conversation so far
            typed, context = policy.read_messages(loop_messages, "the generator's messages")
        last_user = policy.last_user_index(typed)
        result = GateRecord(answer=partial, accepted_attempt=0, accept_reason="error", llm_calls=list(run.calls),
                            trace_id=run.trace_id, error=f"{type(exc).__name__}: {exc}",
                            continue_context=context, strategy=self.config.strategy,
                            evaluator=self.evaluator.name, question=_question(run.received))
        await self.save(result)
        return ErrorEvent(code=code, last_user_message=context[last_user] if last_user >= 0 else None, result=result)

    async def failed(self, run: Run, exc: Exception, partial: str = "") -> GateRecord:
        """The stored record of a request whose first generation failed (``error`` set, no answer)."""
        event = await self._error(run, exc, partial)
        assert event.result is not None
        return event.result

    def record_of(self, run: Run, accepted: Attempt, reason: AcceptReason) -> GateRecord:
        """The record of ``run`` releasing ``accepted`` for ``reason``."""
        evs = [a.evaluation for a in run.attempts if a.evaluation is not None]
        skipped = next((e for e in reversed(evs) if e.passed is None), None)
        return GateRecord(answer=accepted.text, accepted_attempt=accepted.number, accept_reason=reason,
                          attempts=list(run.attempts), evaluations=evs, llm_calls=list(run.calls),
                          trace_id=run.trace_id, evaluation_skipped=skipped is not None,
                          skip_reason=skipped.skipped_reason if skipped else None,
                          strategy=self.config.strategy, evaluator=self.evaluator.name,
                          question=_question(run.received), evaluations_list=evaluations_list(evs))

    async def save(self, result: GateRecord, *, committed: bool = False) -> None:
        """Queue the record for the store; ``committed``: return once it is written."""
        if not self.runtime.has_store:
            return
        model = self.evaluator.model_name
        store = await self.runtime.astore()
        assert result.trace_id is not None  # the gate's records always have one
        row = evaluation_row(result, evaluation_id=new_id(), subject_id=result.trace_id, judge_model=model,
                             strategy=self.config.strategy, evaluator=self.evaluator.name)
        if committed:
            await store.asave_evaluation(row, score_rows(result, judge_model=model))
        else:
            store.save_evaluation(row, score_rows(result, judge_model=model))


def _question(messages: Sequence[Message]) -> str | None:
    """What the user asked: the last user message's text, bounded (the record's title)."""
    return last_question(messages)[:QUESTION_CHARS] or None


def _fn_name(fn: Any) -> str:
    return f"fn:{getattr(fn, '__qualname__', type(fn).__name__)}"
