"""The Model wrapper: everything around an adapter's one provider call.

``Model`` owns the limiter slot, the endpoint's circuit breaker, the
per-attempt timeout, retries with capped exponential backoff and jitter
(honouring ``Retry-After``), the judge-call cache, the bound on a parsed
reply's size, timing, usage and the call record. Adapters stay thin.

A caller that bounds a whole judgement in time (a rubric's ``rubric_timeout``:
every attempt, backoff and re-ask) says so with :func:`time_limit` around it.
Within it, no retry waits a backoff that would outlast the limit (the call
fails with its last error instead), and an attempt the caller cancels when
the limit runs out counts toward the endpoint's breaker as a time-out, as if
the attempt's own timeout had fired: whichever clock runs out first, a hung
endpoint opens the breaker.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import json
import random
import time
from jurist.ids import new_id
from contextlib import contextmanager
from dataclasses import dataclass
from typing import (Any, AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator, Protocol, TypedDict, TypeVar,
                    cast)

from pydantic import JsonValue

from jurist.errors import ModelError, ModelTimeout, RateLimited, Unsupported
from jurist.models.base import (CallRecord, CallStatus, ChatModel, ChatRequest, Completion, CoverageResult,
                                MeaningJudge, RelevanceScore, ReplyMeta, StatementCheck, StreamItem, SupportResult,
                                kept_headers)
from jurist.models.breaker import CircuitBreaker
from jurist.models.cost import (BudgetExceeded, Cost, DryRunCall, RequestEstimate, active_budget, active_dry_run,
                                call_cost, estimate_request, is_free)
from jurist.models.limiter import RequestLimiter
from jurist.models.messages import UserMessage


T = TypeVar("T")
#: A meaning question's inputs, as its call record's message shows them: texts and lists of texts.
MeaningRequest = dict[str, str | list[str]]


@dataclass(frozen=True)
class _Limit:
    """A caller's time limit on the model calls it makes: when it runs out (``time.monotonic()``)."""

    at: float
    seconds: float


_LIMIT: contextvars.ContextVar[_Limit | None] = contextvars.ContextVar("jurist_call_time_limit", default=None)
# asyncio runs a timer up to this much before its time (BaseEventLoop._clock_resolution)
_CLOCK_RESOLUTION = time.get_clock_info("monotonic").resolution


@contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Tell the model calls made in the block (in this task) that their caller cancels them
    ``seconds`` from now (``None``: no limit; an enclosing, earlier limit stays). The caller keeps
    its own clock (``asyncio.timeout``); this lets ``Model`` give up a retry that could not end in
    time, and count a call cancelled when the limit runs out as a time-out toward the breaker."""
    outer = _LIMIT.get()
    limit = outer
    if seconds is not None and (outer is None or time.monotonic() + seconds < outer.at):
        limit = _Limit(time.monotonic() + seconds, seconds)
    token = _LIMIT.set(limit)
    try:
        yield
    finally:
        _LIMIT.reset(token)


def _time_left() -> float | None:
    limit = _LIMIT.get()
    return None if limit is None else limit.at - time.monotonic()


def _as_reported(model: str, exc: BaseException) -> BaseException:
    """What the breaker is told of an attempt that failed with ``exc``: a cancellation at the
    caller's time limit is a time-out like the attempt's own."""
    limit = _LIMIT.get()
    if isinstance(exc, asyncio.CancelledError) and limit is not None and \
            time.monotonic() >= limit.at - _CLOCK_RESOLUTION:
        return ModelTimeout(f"{model} gave no answer within the caller's time limit of {limit.seconds:g} s",
                            model=model)
    return exc


class CachedReply(TypedDict):
    """The latest successful answer to an identical request, as the call cache keeps it."""

    text: str
    input_tokens: int
    output_tokens: int


class CallSink(Protocol):
    """Where calls are recorded and cached answers looked up (the store)."""

    def record_call(self, record: CallRecord) -> None:
        ...

    async def cached_reply(self, request_hash: str) -> CachedReply | None:
        ...


@dataclass
class RetryPolicy:
    max_retries: int = 4
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    retry_after_max: float = 120.0

    def delay(self, attempt: int, error: ModelError) -> float:
        """Seconds to wait before retry number ``attempt`` (1-based)."""
        backoff = min(self.backoff_max, self.backoff_base * 2.0 ** (attempt - 1))
        backoff *= random.uniform(0.5, 1.0)
        retry_after = getattr(error, "retry_after", None)
        if isinstance(error, RateLimited) and retry_after is not None:
            return min(self.retry_after_max, max(backoff, float(retry_after)))
        return backoff


@dataclass
class Template:
    """Which prompt template built a request, for the record."""

    name: str
    hash: str


def cut_reply(text: str, limit: int) -> str:
    """The first ``limit`` characters of ``text``, and a marker saying how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[... {len(text) - limit:,} more characters cut]"


def _reply_meta(completion: Completion | None, failure: BaseException | None) -> ReplyMeta | None:
    """What the endpoint's answer carried (its HTTP status and headers, finish reason), for the record:
    the completion's, else the failed call's error status and headers."""
    if isinstance(failure, ModelError) and failure.status is not None:
        return ReplyMeta(http_status=failure.status, http_headers=kept_headers(failure.headers))
    if completion is None or completion.reply is None:
        return None
    if completion.reply.finish_reason is None and completion.finish_reason is not None:
        completion.reply.finish_reason = completion.finish_reason
    return completion.reply


def _recorded_value(completion: Completion | None) -> Any:
    """A call record's ``parsed``: the parsed reply, or the tool calls of a reply that calls tools."""
    if completion is None:
        return None
    if completion.parsed is None and completion.tool_calls:
        return {"tool_calls": _jsonable(completion.tool_calls)}
    return _jsonable(completion.parsed)


def _jsonable(value: Any) -> Any:
    """A parsed verdict as plain JSON data for the record."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


class MeaningBackend:
    """Any object answering the meaning questions (:class:`MeaningJudge`), such as
    a user's own judge, as a backend behind :class:`Model`: it answers meaning
    questions and, like the local judge, cannot write free text."""

    chats = False
    endpoint = "local"

    def __init__(self, judge: MeaningJudge) -> None:
        self.judge = judge
        self.name = getattr(judge, "name", type(judge).__name__)

    async def expresses(self, text: str, statements: list[str]) -> Any:
        return await self.judge.expresses(text, statements)

    async def coverage(self, question: str, answer: str, parts: list[str] | None = None) -> Any:
        return await self.judge.coverage(question, answer, parts)

    async def relevance(self, query: str, passages: list[str]) -> Any:
        return await self.judge.relevance(query, passages)

    async def support(self, answer: str, sources: list[str]) -> Any:
        return await self.judge.support(answer, sources)

    async def complete(self, request: ChatRequest, *, timeout: float | None = None) -> Completion:
        raise Unsupported(f"{self.name} answers meaning questions only; it cannot write free text")

    def stream(self, request: ChatRequest, *, timeout: float | None = None,
               into: Completion | None = None) -> AsyncIterator[str]:
        raise Unsupported(f"{self.name} answers meaning questions only; it cannot write free text")

    async def aclose(self) -> None:
        return None


class MeaningCalls:
    """The meaning questions of one purpose and trace, asked through a
    :class:`Model` (limiter slot, call record); ``call_ids`` lists the calls made."""

    def __init__(self, model: "Model", purpose: str, trace_id: str | None) -> None:
        self.model = model
        self.name = model.name
        self.purpose = purpose
        self.trace_id = trace_id
        self.call_ids: list[str] = []

    async def _ask(self, question: str, request: MeaningRequest, fn: Callable[[MeaningJudge], Awaitable[T]]) -> T:
        # listed once asked, answered or not: a failed question is on record too (status error)
        answer, _ = await self.model.ask(question, request, fn, purpose=self.purpose, trace_id=self.trace_id,
                                         asked=self.call_ids)
        return answer

    async def expresses(self, text: str, statements: list[str]) -> list[StatementCheck]:
        return await self._ask("expresses", {"statements": statements, "text": text},
                               lambda j: j.expresses(text, statements))

    async def coverage(self, question: str, answer: str, parts: list[str] | None = None) -> CoverageResult:
        request: MeaningRequest = {"text": question, "answer": answer}
        if parts is not None:
            request["parts"] = parts
        return await self._ask("coverage", request, lambda j: j.coverage(question, answer, parts))

    async def relevance(self, query: str, passages: list[str]) -> list[RelevanceScore]:
        return await self._ask("relevance", {"text": query, "passages": passages},
                               lambda j: j.relevance(query, passages))

    async def support(self, answer: str, sources: list[str]) -> SupportResult:
        return await self._ask("support", {"answer": answer, "sources": sources},
                               lambda j: j.support(answer, sources))


class Model:
    """A model reference ready to call: adapter + limiter + policy + record."""

    def __init__(
        self,
        adapter: ChatModel,
        limiter: RequestLimiter,
        *,
        timeout: float = 60.0,
        retry: RetryPolicy | None = None,
        sink: CallSink | None = None,
        cache: bool = True,
        breaker: CircuitBreaker | None = None,
        max_reply_chars: int | None = None,
        prices_from: str | None = None,
    ) -> None:
        self.adapter = adapter
        self.limiter = limiter
        self.timeout = timeout
        self.retry = retry or RetryPolicy()
        self.sink = sink
        self.cache = cache
        self.breaker = breaker  # the endpoint's, shared like the limiter; None: no breaker
        self.max_reply_chars = max_reply_chars  # a longer reply to parse is cut and not parsed
        # the price table's provider whose prices the endpoint charges (a gateway in front of it), where
        # its address alone does not show it; None: priced by the reference's provider at its own API only
        self.prices_from = prices_from

    @property
    def name(self) -> str:
        return self.adapter.name

    @property
    def endpoint(self) -> str:
        return self.adapter.endpoint

    @property
    def chats(self) -> bool:
        """Whether the backend writes text (an LLM); the local judge does not."""
        return bool(getattr(self.adapter, "chats", True))

    @property
    def answers_meaning(self) -> bool:
        """Whether the backend answers the meaning questions itself (the local judge)."""
        return isinstance(self.adapter, MeaningJudge)

    def meaning(self, purpose: str, trace_id: str | None = None) -> MeaningCalls:
        """This backend's meaning questions, each one a recorded call (see :meth:`ask`)."""
        return MeaningCalls(self, purpose, trace_id)

    async def ask(
        self, question: str, request: MeaningRequest, fn: Callable[[MeaningJudge], Awaitable[T]], *,
        purpose: str, trace_id: str | None = None, asked: list[str] | None = None,
    ) -> tuple[T, str]:
        """Ask the backend a meaning question (``fn(adapter)``) in a limiter slot and put it on
        record like a chat call: the question and its inputs as the message, the answer as the
        response. Returns the answer and the call id; a failure is recorded and raised. The id
        is added to ``asked`` once the question is asked, whether it is answered or fails."""
        if not self.answers_meaning:
            raise Unsupported(f"{self.name} does not answer meaning questions directly; ask it through a Judge")
        dry = active_dry_run()
        if dry is not None:  # counted, not asked
            free = is_free(self.name)
            dry.add(RequestEstimate(self.name, 0, 0, "estimate", call_cost(self.name, self.endpoint, 0, 0) if free else
                                    Cost(None, f"{self.name[:80]} is the caller's own judge")))
            raise DryRunCall(f"dry run: {self.name} was not asked", model=self.name)
        started = time.perf_counter()
        call_id = new_id()
        if asked is not None:
            asked.append(call_id)
        answer: Any = None
        error: str | None = None
        try:
            async with self.limiter.slot(0):
                answer = await fn(cast(MeaningJudge, self.adapter))
            return answer, call_id
        except BaseException as exc:
            error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            raise
        finally:
            # the offline judge costs nothing (call_cost says so); another meaning judge is the caller's own
            cost = call_cost(self.name, self.endpoint, 0, 0) if is_free(self.name) else Cost(
                None, f"{self.name[:80]} is the caller's own judge: jurist does not know what it costs")
            budget = active_budget()
            if budget is not None:
                budget.add(cost)
            if self.sink is not None:
                self.sink.record_call(CallRecord(
                    id=call_id, trace_id=trace_id, purpose=purpose, model=self.name, endpoint=self.endpoint,
                    messages=(UserMessage(content=json.dumps({"question": question, **request},
                                                             ensure_ascii=False, default=str)),),
                    params={"question": question}, request_hash="",
                    response_text=None if error is not None else json.dumps(_jsonable(answer), ensure_ascii=False,
                                                                             default=str),
                    input_tokens=0, output_tokens=0, latency_ms=round((time.perf_counter() - started) * 1000.0, 3),
                    attempts=1, status="ok" if error is None else "error", error=error,
                    cost_usd=cost.usd, cost_note=cost.note,
                ))

    async def complete(
        self,
        request: ChatRequest,
        *,
        purpose: str = "generation",
        trace_id: str | None = None,
        template: Template | None = None,
        parse: Callable[[str], Any] | None = None,
        use_cache: bool | None = None,
        refine: Callable[[Any, Completion], Any] | None = None,
    ) -> Completion:
        """Send one request; return the completion or raise a ``ModelError``.

        With ``parse``, the reply text is parsed before the call is recorded:
        the result lands in ``completion.parsed``, a failure (any exception)
        in ``completion.parse_error``; neither raises. A reply to parse longer
        than ``max_reply_chars`` is cut (:func:`cut_reply`), recorded cut and
        not parsed: its parse error says why. ``refine`` then turns a parsed
        value and the completion into the one kept and recorded (a score
        weighted by the reply's logprobs).

        A request for logprobs is never answered from the cache (which keeps the
        text only); its record notes whether they came back (``logprobs_returned``
        beside the ``logprobs`` / ``top_logprobs`` it asked for).
        """
        key = request.cache_key(self.name, self.endpoint)
        use_cache = (self.cache if use_cache is None else use_cache) and not request.top_logprobs
        started = time.perf_counter()
        completion: Completion | None = None
        if use_cache and self.sink is not None:
            hit = await self.sink.cached_reply(key)
            if hit is not None:
                completion = Completion(
                    text=hit["text"],
                    model=self.name,
                    input_tokens=hit.get("input_tokens", 0),
                    output_tokens=hit.get("output_tokens", 0),
                    attempts=0,
                    cached=True,
                )
        dry = active_dry_run()
        if dry is not None:  # counted (answered from the cache, or what it would cost), not sent
            dry.add(estimate_request(request, self.name, self.endpoint, prices_from=self.prices_from),
                    from_cache=completion is not None)
            raise DryRunCall(f"dry run: {self.name} was not called", model=self.name)
        error: ModelError | None = None
        attempts = 0
        refused = False
        if completion is None:
            try:
                completion, attempts = await self._call_with_retries(request)
            except ModelError as exc:
                error = exc
                attempts = exc.attempts
                refused = isinstance(exc, BudgetExceeded)
            except asyncio.CancelledError:  # a caller's timeout: the call still goes on record
                self._record(request, key, new_id(), started, purpose=purpose, trace_id=trace_id,
                             template=template, completion=None, status="error",
                             error="cancelled before an answer (the caller's time limit ran out)", attempts=1)
                raise
        latency = (time.perf_counter() - started) * 1000.0
        call_id = new_id()
        status: CallStatus = "ok"
        if completion is not None:
            completion.latency_ms = latency
            completion.call_id = call_id
            if parse is not None:
                limit = self.max_reply_chars
                if limit is not None and len(completion.text) > limit:
                    completion.parse_error = (
                        f"the reply has {len(completion.text):,} characters, over the limit of {limit:,} "
                        "(max_reply_chars), so it was cut and not read; answer briefly")
                    completion.text = cut_reply(completion.text, limit)
                    status = "parse_error"
                else:
                    try:
                        completion.parsed = parse(completion.text)
                    except Exception as exc:  # any parse failure is data, not a crash
                        completion.parse_error = str(exc) or type(exc).__name__
                        status = "parse_error"
                    else:
                        if refine is not None:
                            completion.parsed = refine(completion.parsed, completion)
        else:
            status = "error"
        returned: dict[str, JsonValue] = {"logprobs_returned": completion is not None and completion.logprobs is not None}
        self._record(request, key, call_id, started, purpose=purpose, trace_id=trace_id, template=template,
                     completion=completion, status=status, attempts=attempts,
                     error=completion.parse_error if completion else f"{type(error).__name__}: {error}",
                     params=returned if request.top_logprobs else None, refused=refused, failure=error)
        if error is not None:
            raise error
        assert completion is not None
        return completion

    def _record(
        self, request: ChatRequest, key: str, call_id: str, started: float, *, purpose: str,
        trace_id: str | None, template: Template | None, completion: Completion | None, status: CallStatus,
        error: str | None, attempts: int, params: dict[str, JsonValue] | None = None, refused: bool = False,
        failure: BaseException | None = None,
    ) -> None:
        """Put one call on record with its cost, charged to the active budget (``refused``: the
        budget was spent, so no request went out)."""
        usage_known = completion is None or completion.usage_reported  # the stream had none: unknown, not 0
        cost = call_cost(self.name, self.endpoint, completion.input_tokens if completion else 0,
                         completion.output_tokens if completion else 0, usage_known=usage_known,
                         failed=completion is None, from_cache=bool(completion and completion.cached),
                         prices_from=self.prices_from)
        if refused:
            cost = Cost(0.0, "not made: the cost budget was spent")
        budget = active_budget()
        if budget is not None:
            budget.add(cost)
        if self.sink is None:
            return
        params = {**request.params(), **(params or {})}
        if completion is not None and completion.structured_output:
            params["structured_output"] = completion.structured_output
        self.sink.record_call(
            CallRecord(
                id=call_id,
                trace_id=trace_id,
                purpose=purpose,
                model=self.name,
                endpoint=self.endpoint,
                messages=request.messages,
                params=params,
                request_hash=key,
                response_text=completion.text if completion else None,
                input_tokens=completion.input_tokens if completion else 0,
                output_tokens=completion.output_tokens if completion else 0,
                latency_ms=round((time.perf_counter() - started) * 1000.0, 3),
                attempts=completion.attempts if completion else attempts,
                status=status,
                error=error,
                cached=bool(completion and completion.cached),
                template_name=template.name if template else None,
                template_hash=template.hash if template else None,
                parsed=_recorded_value(completion),
                usage_known=usage_known,
                cost_usd=cost.usd,
                cost_note=cost.note,
            ).with_reply(_reply_meta(completion, failure))
        )

    async def _call_with_retries(self, request: ChatRequest) -> tuple[Completion, int]:
        """Attempts until one is answered or the call gives up. The endpoint's breaker is asked
        before each attempt, in the limiter slot (so calls that waited while the endpoint died
        fail at once), and told how each admitted attempt ended and whether the call gives up. A spent
        cost budget (:func:`~jurist.models.cost.charged_to`) is asked there too: no attempt starts."""
        tokens = request.estimated_tokens()
        breaker = self.breaker
        budget = active_budget()
        attempt = 0
        while True:
            attempt += 1
            probe: bool | None = None  # None: the breaker did not admit this attempt (or there is none)
            try:
                async with self.limiter.slot(tokens):
                    if budget is not None:  # spent while this call waited: it does not start (BudgetExceeded)
                        budget.check(self.name)
                    if breaker is not None:
                        probe = breaker.admit()
                    completion = await self._attempt(request)
            except BaseException as exc:
                delay = self._retry_delay(attempt, exc)
                if breaker is not None and probe is not None:
                    breaker.report(probe, _as_reported(self.name, exc), gave_up=delay is None)
                if delay is None:
                    if isinstance(exc, ModelError):
                        exc.attempts = attempt
                    raise
                await asyncio.sleep(delay)
                continue
            if breaker is not None and probe is not None:
                breaker.report(probe)
            completion.attempts = attempt
            return completion, attempt

    def _retry_delay(self, attempt: int, exc: BaseException) -> float | None:
        """Seconds to wait before retrying after attempt number ``attempt`` failed with ``exc``;
        None: the call gives up (an error that is not retried, no retries left, or a backoff
        that would outlast the caller's :func:`time_limit`)."""
        if not isinstance(exc, ModelError) or not exc.retryable or attempt > self.retry.max_retries:
            return None
        delay = self.retry.delay(attempt, exc)
        left = _time_left()
        return None if left is not None and delay >= left else delay

    async def _attempt(self, request: ChatRequest) -> Completion:
        """One call to the adapter, within the per-attempt timeout."""
        try:
            async with asyncio.timeout(self.timeout):  # no task of its own, unlike wait_for
                return await self.adapter.complete(request, timeout=self.timeout)
        except TimeoutError:
            raise ModelTimeout(
                f"{self.name} gave no answer within {self.timeout:g} s; "
                "raise the timeout (JURIST_TIMEOUT or --timeout) or check the endpoint",
                model=self.name,
            ) from None

    async def stream(
        self, request: ChatRequest, *, purpose: str = "generation", trace_id: str | None = None,
        template: Template | None = None, into: Completion | None = None,
    ) -> AsyncGenerator[StreamItem, None]:
        """Stream text deltas (and tool-call pieces, where the reply calls tools)
        through the limiter (no retries once text flows); the whole call, with
        the usage and tool calls the adapter reports, is recorded when the
        stream ends, fails or is closed early. The endpoint's breaker is asked
        first, and told whether the stream started. ``into``: the completion the
        adapter fills as the stream ends (finish reason, usage, what the reply carried)."""
        started = time.perf_counter()
        parts: list[str] = []
        done = into if into is not None else Completion(text="", model=self.name)
        error: BaseException | None = None
        breaker = self.breaker
        admitted = probe = False  # whether the breaker let the stream through (and still awaits its outcome)
        dry = active_dry_run()
        if dry is not None:  # counted, not sent
            dry.add(estimate_request(request, self.name, self.endpoint, prices_from=self.prices_from))
            raise DryRunCall(f"dry run: {self.name} was not called", model=self.name)
        try:
            budget = active_budget()
            async with self.limiter.slot(request.estimated_tokens()):
                if budget is not None:
                    budget.check(self.name)  # a spent budget: the stream does not start
                if breaker is not None:
                    probe = breaker.admit()
                    admitted = True
                async for delta in self.adapter.stream(request, timeout=self.timeout, into=done):
                    if admitted and breaker is not None:  # the endpoint answered
                        admitted = False
                        breaker.report(probe)
                    if isinstance(delta, str):
                        parts.append(delta)
                    yield delta
        except GeneratorExit:
            error = GeneratorExit("the stream was closed before its end")
            raise
        except BaseException as exc:
            error = exc
            raise
        finally:
            if admitted and breaker is not None:
                breaker.report(probe, None if error is None else _as_reported(self.name, error), gave_up=True)
            done.text = "".join(parts)
            self._record(
                request, request.cache_key(self.name, self.endpoint), new_id(), started,
                purpose=purpose, trace_id=trace_id, template=template, completion=done,
                status="ok" if error is None else "error", attempts=1,
                error=None if error is None else f"{type(error).__name__}: {error}",
                params={"stream": True}, refused=isinstance(error, BudgetExceeded), failure=error,
            )

    async def aclose(self) -> None:
        await self.adapter.aclose()
