"""A judge: a prompt template, an output schema and a model, plus one re-ask.

``Judge.run`` renders the template, asks for schema output (or prompted JSON),
parses the reply and, if parsing fails, asks once more showing the model its
parse error and the expected format (quoting at most ``REASK_QUOTE_CHARS`` of
its reply: a reply over the model's ``max_reply_chars`` is cut, fails to parse
and is never sent back whole); a second failure raises
:class:`JudgeParseError`. ``Judge.verdict`` turns every failure (parse, timeout,
rate limit, unavailable model) into a :class:`Verdict` with status ``failed``
and the reason, which capabilities handle by policy.

A backend that writes no text (the offline ``local/minilm`` judge, or a user's
meaning judge) is asked the judge's :class:`MeaningQuestion` instead of its
prompt: the same verdict comes back, and a judge with no such question gives a
failed verdict with error type ``Unsupported``. Capabilities never ask which
kind of backend they hold.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Generic, Mapping, TypeVar

from jurist.errors import JudgeParseError, ModelError, Unsupported
from jurist.judges.outcome import FAILED, OK, Outcome, guarded
from jurist.judges.templates import PromptSource, PromptTemplate, variables_key
from jurist.models.base import ChatRequest, Completion, MeaningJudge
from jurist.models.images import Image
from jurist.models.model import Model, Template, cut_reply
from jurist.models.messages import AssistantMessage, Message, UserMessage

T = TypeVar("T")

REASK_QUOTE_CHARS = 4_000  # the most of a failed reply the re-ask shows the model
PARSE_FAILED = "the judge's reply could not be parsed"  # how a parse failure's reason begins


@dataclass
class Verdict(Outcome[T], Generic[T]):
    """A parsed judgement, or the reason there is none: an :class:`Outcome`
    with the judge's model, template and usage."""

    judge_model: str = ""
    template_hash: str | None = None
    call_ids: list[str] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    latency_ms: float = 0.0
    cached: bool = False
    reasked: bool = False


@dataclass
class MeaningQuestion(Generic[T]):
    """What a judge asks a backend that only matches meaning, instead of its prompt:
    ``ask`` puts the question to a :class:`MeaningJudge`, ``answer`` turns the reply
    into the judge's verdict value (what its prompt's parser would have returned)."""

    ask: Callable[[MeaningJudge], Awaitable[Any]]
    answer: Callable[[Any], T]


class Judge:
    """Template + output schema + model."""

    def __init__(
        self,
        model: Model,
        template: PromptTemplate,
        *,
        purpose: str,
        format_hint: str,
        schema: Mapping[str, object] | None = None,
        schema_name: str = "verdict",
        temperature: float = 0.0,
        seed: int | None = 0,
        max_tokens: int = 1024,
        top_logprobs: int | None = None,
        reask: bool = True,
        prompts: PromptSource | None = None,
    ) -> None:
        self.model = model
        self.template = template
        self.prompts = prompts  # the prompt lab's routes: which text of the template each call uses
        self.purpose = purpose
        self.format_hint = format_hint
        self.schema = schema
        self.schema_name = schema_name
        self.temperature = temperature
        self.seed = seed
        self.max_tokens = max_tokens
        self.top_logprobs = top_logprobs  # ask for the reply's logprobs (a weighted score reads them)
        self.reask = reask  # one re-ask showing the parse error (retry_on_parse_failure)

    def _request(self, messages: list[Message], schema: Mapping[str, object] | None,
                 sample: int | None = None, images: tuple[Image, ...] = ()) -> ChatRequest:
        """The request; sample ``i`` > 0 of it (``jurist probe --samples``) carries its index (a call,
        and a cache entry, of its own) and, with a seed, the seed plus ``i`` (so a seeded endpoint
        samples anew); sample 0 is the ordinary request."""
        sample = sample or None
        return ChatRequest(
            messages=tuple(messages),
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            seed=self.seed + sample if self.seed is not None and sample else self.seed,
            response_schema=_json_schema(schema if schema is not None else self.schema),
            schema_name=self.schema_name,
            top_logprobs=self.top_logprobs,
            sample=sample,
            images=images,
        )

    async def template_for(self, variables: Mapping[str, object], route_key: str | None = None,
                           trace_id: str | None = None) -> PromptTemplate:
        """The template this call uses: the judge's own, or the text the prompt lab routes it to.
        The routing key is ``route_key`` (the subject), else the trace, else the variables."""
        if self.prompts is None:
            return self.template
        return await self.prompts.resolve(self.template,
                                          lambda: route_key or trace_id or variables_key(dict(variables)))

    async def run(
        self,
        variables: Mapping[str, object],
        parse: Callable[[str], T],
        *,
        trace_id: str | None = None,
        format_hint: str | None = None,
        refine: Callable[[T, Completion], T] | None = None,
        schema: Mapping[str, object] | None = None,
        sample: int | None = None,
        images: tuple[Image, ...] = (),
        route_key: str | None = None,
        template: PromptTemplate | None = None,
    ) -> tuple[T, list[Completion]]:
        """Ask, re-ask once on a parse failure (unless ``reask`` is off); raise JudgeParseError or ModelError.
        ``refine`` turns a parsed value and its completion into the one kept (see :meth:`verdict`);
        ``schema`` replaces the judge's own for this question (one that names its ids, say);
        ``sample`` numbers one of several samples of the same question (see :meth:`_request`);
        ``images`` go with the user message that holds the data (the re-ask too: it repeats it);
        ``route_key`` routes the call in a prompt A/B test (see :meth:`template_for`), unless
        ``template`` says which text to use."""
        used = template or await self.template_for(variables, route_key, trace_id)
        tmpl = Template(used.name, used.hash)
        messages = used.messages(**variables)
        first = await self.model.complete(
            self._request(messages, schema, sample, images), purpose=self.purpose, trace_id=trace_id, template=tmpl,
            parse=parse, refine=refine,
        )
        if first.parse_error is None:
            return first.parsed, [first]
        if not self.reask:
            err = JudgeParseError(f"{PARSE_FAILED} (no re-ask: retry_on_parse_failure is "
                                  f"off): {first.parse_error}", raw=first.text)
            err.completions = [first]
            raise err
        reask = messages + [
            AssistantMessage(content=cut_reply(first.text, REASK_QUOTE_CHARS)),
            UserMessage(content=f"Your reply could not be read: {first.parse_error}.\n"
                                f"Answer again, following exactly this format:\n{format_hint or self.format_hint}"),
        ]
        second = await self.model.complete(
            self._request(reask, schema, sample, images), purpose=self.purpose, trace_id=trace_id, template=tmpl,
            parse=parse, refine=refine,
        )
        if second.parse_error is None:
            return second.parsed, [first, second]
        err = JudgeParseError(
            f"{PARSE_FAILED} after one re-ask: {second.parse_error}", raw=second.text
        )
        err.completions = [first, second]
        raise err

    async def verdict(
        self,
        variables: Mapping[str, object],
        parse: Callable[[str], T],
        *,
        trace_id: str | None = None,
        timeout: float | None = None,
        format_hint: str | None = None,
        meaning: MeaningQuestion[T] | None = None,
        unsupported: str | None = None,
        refine: Callable[[T, Completion], T] | None = None,
        schema: Mapping[str, object] | None = None,
        sample: int | None = None,
        images: tuple[Image, ...] = (),
        route_key: str | None = None,
    ) -> Verdict[T]:
        """Like :meth:`run`, but every failure becomes a ``failed`` verdict with the reason.

        A backend that writes no text is asked ``meaning`` instead; without one, the
        verdict fails as ``Unsupported`` with the reason ``unsupported`` (or a general one).
        ``refine`` turns a parsed value and the completion it came from into the
        verdict's value (a score weighted by the reply's logprobs), before the call is recorded.
        ``sample`` numbers one of several samples of the same question (a meaning backend, which is
        deterministic, is asked once per sample all the same). ``images`` go to the model with
        the prompt (a vision model's; a meaning backend is never given any).
        """
        if not self.model.chats:
            return await self._by_meaning(meaning, unsupported, trace_id=trace_id, timeout=timeout)
        used = await self.template_for(variables, route_key, trace_id)
        outcome = await guarded(
            lambda: self.run(variables, parse, trace_id=trace_id, format_hint=format_hint, refine=refine,
                             schema=schema, sample=sample, images=images, template=used),
            timeout=timeout, catch=(JudgeParseError, ModelError), reason=_reason,
        )
        name, template_hash = self.model.name, used.hash
        if outcome.ok:
            assert outcome.value is not None
            value, completions = outcome.value
            return _with_usage(Verdict(OK, value, None, judge_model=name, template_hash=template_hash,
                                       reasked=len(completions) > 1), completions)
        failure: Verdict[T] = Verdict(FAILED, None, outcome.reason, outcome.error_type,
                                      judge_model=name, template_hash=template_hash)
        if isinstance(outcome.error, JudgeParseError):
            failure.reasked = len(outcome.error.completions) > 1
            return _with_usage(failure, outcome.error.completions)
        return failure


    async def _by_meaning(self, meaning: MeaningQuestion[T] | None, unsupported: str | None, *,
                          trace_id: str | None, timeout: float | None) -> Verdict[T]:
        name = self.model.name
        if meaning is None or not self.model.answers_meaning:
            reason = unsupported or (f"{name} only matches meaning and cannot answer the {self.template.name} "
                                     "prompt; configure an LLM judge")
            return Verdict(FAILED, None, reason, Unsupported.__name__, judge_model=name)
        calls = self.model.meaning(self.purpose, trace_id)
        started = time.perf_counter()
        outcome = await guarded(lambda: meaning.ask(calls), timeout=timeout)
        latency = round((time.perf_counter() - started) * 1000.0, 3)
        if not outcome.ok:
            return Verdict(FAILED, None, outcome.reason, outcome.error_type, outcome.error, judge_model=name,
                           call_ids=calls.call_ids, latency_ms=latency)
        return Verdict(OK, meaning.answer(outcome.value), judge_model=name, call_ids=calls.call_ids,
                       latency_ms=latency)


def _json_schema(schema: Mapping[str, object] | None) -> dict[str, object] | None:
    """The schema as the request carries it (a dict of its own; the judge never reads into it)."""
    return None if schema is None else dict(schema)


def _reason(exc: BaseException) -> str:
    """A failed verdict's reason: a parse failure says what was wrong; a model error names its type."""
    return str(exc) if isinstance(exc, JudgeParseError) else f"{type(exc).__name__}: {exc}"


def _with_usage(v: Verdict[T], completions: list[Completion]) -> Verdict[T]:
    v.call_ids = [c.call_id for c in completions if c.call_id]
    v.input_tokens = sum(c.input_tokens for c in completions)
    v.output_tokens = sum(c.output_tokens for c in completions)
    v.latency_ms = round(sum(c.latency_ms for c in completions), 3)
    v.cached = bool(completions) and all(c.cached for c in completions)
    return v
