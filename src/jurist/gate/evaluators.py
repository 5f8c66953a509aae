"""The gate's evaluators: quality, comprehensiveness, and a user's own.

An evaluator turns (messages, answer) into an :class:`Evaluation` with
``passed`` set, or raises; the gate treats any exception or timeout as
``evaluation_skipped`` (fail-safe: the answer is accepted).

- :class:`QualityEvaluator`: note 001's prompt (``gate_quality`` template) ->
  ``quality_score``, ``confidence_score``, ``issues``, ``improvement_hint``;
  passes at ``quality_score >= threshold``.
- :class:`ComprehensivenessEvaluator`: note 004's check (``gate_comprehensive``)
  on the user and assistant turns only (tool results and media stripped) ->
  ``comprehensive`` and ``reason``.
- Both ask a backend that only matches meaning (the offline ``local/minilm``,
  or a user's :class:`~jurist.models.base.MeaningJudge`) which parts of the
  question the answer covers instead (:func:`coverage_evaluation`).
- :class:`TemplateEvaluator`: a user's judge template and output schema.
- :class:`FunctionEvaluator`: a user's ``async def fn(messages, answer)`` (the
  messages as OpenAI-style dicts) returning an Evaluation, a dict, a score
  (float) or a verdict (bool).

Evaluators read the conversation as typed messages (:data:`~jurist.models.messages.Message`).

An answer cut off at the token limit (its generation's ``finish_reason`` is ``length``) is
judged as what it is: the gate calls ``evaluate(..., truncated=True)`` on an evaluator whose
``evaluate`` takes that keyword (every one here does); a judge's prompt then says so after the
answer (:data:`TRUNCATED_NOTE`), and :class:`ComprehensivenessEvaluator` answers "not
comprehensive" with that reason without asking its judge (a cut-off answer is not complete).
"""

from __future__ import annotations

import inspect
from typing import Annotated, Any, Awaitable, Callable, Mapping, Protocol, Sequence, TypeVar, runtime_checkable

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, JsonValue, ValidationError

from jurist.errors import EvaluationFailed, Uncertain
from jurist.gate.records import Evaluation, Flag
from jurist.gate.types import CALL_QUALITY_EVALUATION, CALL_SELF_EVALUATION
from jurist.judges.judge import Judge, MeaningQuestion
from jurist.judges.prompting import Quoted, join, quote
from jurist.judges.parsing import UNIT_INTERVAL, extract_json
from jurist.judges.templates import PromptSource, PromptTemplate, builtin, variables_key
from jurist.models.base import CoverageResult, MeaningJudge, ScoreRange
from jurist.models.messages import Message, TextPart, openai_messages
from jurist.models.model import Model

#: A user's evaluator: the conversation as OpenAI-style dicts, and the answer.
EvaluateFn = Callable[[list[dict[str, Any]], str], Awaitable[Any]]
QUALITY_PLACEHOLDERS = frozenset({"question", "context", "conversation", "answer"})
#: What an evaluator is told of an answer cut off at the token limit (and the reason it is not comprehensive).
TRUNCATED_NOTE = "the answer was cut off at the token limit (finish_reason: length)"


@runtime_checkable
class GateEvaluator(Protocol):
    """What the gate needs from an evaluator."""

    name: str  # quality | comprehensiveness | custom
    call_type: str  # the purpose tag of its LLM calls
    model_name: str | None

    async def evaluate(self, messages: Sequence[Message], answer: str, *, trace_id: str) -> Evaluation:
        ...


# --- message helpers ----------------------------------------------------------------


def text_of(message: Message) -> str:
    """The text of a message: its content, or its text parts one a line; media parts
    (images, audio, files) are dropped."""
    content = getattr(message, "content", None)
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(p.text for p in content if isinstance(p, TextPart) and p.text)


def conversation_turns(messages: Sequence[Message]) -> list[dict[str, str]]:
    """User and assistant turns only, as text (note 004): tool results, tool calls and media stripped."""
    out = []
    for m in messages:
        if m.role in ("user", "assistant"):
            text = text_of(m)
            if text.strip():
                out.append({"role": m.role, "content": text})
    return out


def last_question(messages: Sequence[Message]) -> str:
    """The text of the last user turn."""
    for m in reversed(messages):
        if m.role == "user":
            return text_of(m)
    return ""


def tool_results(messages: Sequence[Message]) -> list[str]:
    """The tool results in the conversation (what was available to the answer)."""
    return [text_of(m) for m in messages if m.role == "tool"]


def prompt_variables(messages: Sequence[Message], answer: str, *, truncated: bool = False) -> dict[str, str]:
    """Every placeholder a gate template may use, with untrusted text quoted; ``truncated``: the
    answer's block is followed by the line "Note: the answer was cut off ..." (:data:`TRUNCATED_NOTE`)."""
    turns = conversation_turns(messages)
    convo = join(quote(t["role"], t["content"]) for t in turns) or quote("user", "")
    results = tool_results(messages)
    context = join(quote("result", r) for r in results) if results else quote("results", "(none)")
    return {
        "question": quote("question", last_question(messages)),
        "context": context,
        "conversation": quote("conversation", convo),
        "answer": _with_note(quote("response", answer), truncated),
    }


def _with_note(block: Quoted, truncated: bool) -> Quoted:
    """The quoted answer, followed by jurist's own line (outside the tags) when it was cut off."""
    return Quoted(f"{block}\nNote: {TRUNCATED_NOTE}; it is incomplete.") if truncated else block


# --- parsing -----------------------------------------------------------------------------


class QualityReply(BaseModel):
    """Note 001's evaluator output."""

    quality_score: float = Field(ge=0.0, le=1.0)
    confidence_score: float = Field(default=1.0, ge=0.0, le=1.0)
    issues: list[str] = Field(default_factory=list)
    improvement_hint: str | None = None


class ComprehensiveReply(BaseModel):
    """Note 004's evaluator output."""

    comprehensive: bool
    reason: str = ""


# Strings and lists of bounded length: a small model under constrained decoding may not stop.
QUALITY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "quality_score": UNIT_INTERVAL,
        "confidence_score": UNIT_INTERVAL,
        "issues": {"type": "array", "items": {"type": "string", "maxLength": 200}, "maxItems": 5},
        "improvement_hint": {"anyOf": [{"type": "string", "maxLength": 400}, {"type": "null"}]},
    },
    "required": ["quality_score", "confidence_score", "issues", "improvement_hint"],
    "additionalProperties": False,
}
COMPREHENSIVE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"comprehensive": {"type": "boolean"}, "reason": {"type": "string", "maxLength": 400}},
    "required": ["comprehensive", "reason"],
    "additionalProperties": False,
}
QUALITY_HINT = '{"quality_score": 0.0-1.0, "confidence_score": 0.0-1.0, "issues": ["..."], "improvement_hint": "..." or null}'
#: Note 004 makes its self-evaluation call at this temperature.
SELF_EVALUATION_TEMPERATURE = 0.1
COMPREHENSIVE_HINT = '{"comprehensive": true or false, "reason": "brief explanation"}'


Reply = TypeVar("Reply", bound=BaseModel)


def _validated(model: type[Reply], raw: str) -> Reply:
    try:
        return model.model_validate(extract_json(raw))
    except ValidationError as exc:
        raise ValueError("; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())) from None


def parse_quality(raw: str) -> QualityReply:
    """The quality judge's reply, validated (raises on anything else)."""
    return _validated(QualityReply, raw)


def parse_comprehensive(raw: str) -> ComprehensiveReply:
    """The comprehensiveness judge's reply, validated (raises on anything else)."""
    return _validated(ComprehensiveReply, raw)


def _not_a_bool(value: object) -> object:
    if isinstance(value, bool):
        raise ValueError("a score is a number, not true or false")
    return value


#: A score in a reply: a number (or a number written as text), never true or false.
ReplyScore = Annotated[float, BeforeValidator(_not_a_bool)]


class EvaluatorReply(BaseModel):
    """What an evaluator's reply object may hold (a judge's JSON under a user's schema, or the dict a
    user's function returns): ``quality_score`` (or ``score``), ``comprehensive`` or ``passed``, and
    what explains them. Other keys are the reply's own business and are not read."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    passed: Flag | None = None
    quality_score: ReplyScore | None = None
    score: ReplyScore | None = None
    confidence_score: ReplyScore | None = None
    issues: list[JsonValue] | str | None = None
    improvement_hint: str | None = None
    comprehensive: bool | None = None
    reason: str | None = None

    def evaluation(self) -> Evaluation:
        """The reply as an Evaluation (``passed`` as given: None until the threshold decides)."""
        issues = self.issues or []
        return Evaluation(
            attempt=0, passed=self.passed,
            quality_score=self.quality_score if "quality_score" in self.model_fields_set else self.score,
            confidence_score=self.confidence_score,
            issues=[str(i) for i in (issues if isinstance(issues, list) else [issues])],
            improvement_hint=self.improvement_hint, comprehensive=self.comprehensive, reason=self.reason)


def coerce(result: Any, threshold: float) -> Evaluation:
    """A user evaluator's return value as an Evaluation with ``passed`` set."""
    if isinstance(result, BaseModel) and not isinstance(result, Evaluation):
        result = result.model_dump()
    if isinstance(result, Evaluation):
        ev = result
    elif isinstance(result, bool):
        ev = Evaluation(attempt=0, passed=result, comprehensive=result)
    elif isinstance(result, (int, float)):
        ev = Evaluation(attempt=0, passed=None, quality_score=float(result))
    elif isinstance(result, dict):
        try:
            ev = EvaluatorReply.model_validate(result).evaluation()
        except ValidationError as exc:
            raise EvaluationFailed(f"the evaluator's result does not fit an Evaluation: {exc.errors()[0]['msg']} "
                                   f"({'.'.join(map(str, exc.errors()[0]['loc']))})") from None
    else:
        raise EvaluationFailed(f"the evaluator returned {type(result).__name__}; return an Evaluation, dict, float or bool")
    if ev.passed is None:
        if ev.quality_score is not None:
            ev = ev.model_copy(update={"passed": ev.quality_score >= threshold})
        elif ev.comprehensive is not None:
            ev = ev.model_copy(update={"passed": ev.comprehensive})
        else:
            raise EvaluationFailed("the evaluator's result has neither quality_score, comprehensive nor passed")
    return ev


# --- evaluators -------------------------------------------------------------------------


def coverage_evaluation(cov: CoverageResult, name: str, threshold: float,
                        undecided: Sequence[str] = ()) -> Evaluation | None:
    """Quality or comprehensiveness from which parts of the question an answer covers
    (the meaning question a backend that writes no text answers).

    ``undecided`` are the parts the judge could not decide (``cov`` holds the others): the verdict
    stands when they cannot change it (a part found uncovered fails comprehensiveness; a quality
    score passes or fails whichever way they go), saying which parts were undecided and, for
    quality, the range the score lies in (``reason``; ``quality_score`` is its end that decides: at
    least that much for a pass, at most for a fail); None when they could change it."""
    parts = len(cov.covered) + len(cov.uncovered) + len(undecided)
    issues = [f"does not address: {p}" for p in cov.uncovered]
    unsure = [f"could not decide whether it addresses: {p}" for p in undecided]
    if name == "comprehensiveness":
        ok = not cov.uncovered
        if ok and undecided:
            return None
        reason = "covers every part of the question" if ok else "; ".join(issues + unsure)
        return Evaluation(attempt=0, passed=ok, comprehensive=ok, reason=reason, issues=issues + unsure)
    quality = ScoreRange(len(cov.covered) / parts if parts else 0.0,
                         (len(cov.covered) + len(undecided)) / parts if parts else 0.0)
    passed = quality.verdict(threshold)
    if passed is None:
        return None
    span = quality.describe("quality", threshold) if undecided else None
    conf = sum(cov.confidence.values()) / len(cov.confidence) if cov.confidence else 0.0
    missing = cov.uncovered + list(undecided)
    hint = f"Also address: {'; '.join(missing)}" if missing else None
    return Evaluation(attempt=0, passed=passed, quality_score=round(quality.deciding_end(passed), 4),
                      confidence_score=round(conf, 4), issues=issues + unsure, improvement_hint=hint, reason=span)


class _JudgeEvaluator:
    """A judge (template + schema + one re-ask) behind the gate's interface."""

    name = "custom"
    call_type = CALL_QUALITY_EVALUATION
    by_coverage = False  # a backend that only matches meaning answers by the question's coverage

    def __init__(self, judge: Judge, parse: Callable[[str], Any], threshold: float) -> None:
        self.judge = judge
        self.parse = parse
        self.threshold = threshold
        self.model_name: str | None = judge.model.name

    def _coverage(self, messages: Sequence[Message], answer: str) -> MeaningQuestion[Any] | None:
        if not self.by_coverage:
            return None
        question = last_question(messages)

        async def ask(judge: MeaningJudge) -> Evaluation:
            try:
                cov = await judge.coverage(question, answer)
            except Uncertain as exc:  # the parts it decided may settle the verdict
                partial = (coverage_evaluation(exc.decided, self.name, self.threshold, exc.undecided)
                           if isinstance(exc.decided, CoverageResult) else None)
                if partial is None:
                    raise
                return partial
            ev = coverage_evaluation(cov, self.name, self.threshold)
            assert ev is not None  # every part decided
            return ev

        return MeaningQuestion(ask, lambda ev: ev)

    async def evaluate(self, messages: Sequence[Message], answer: str, *, trace_id: str,
                       truncated: bool = False) -> Evaluation:
        # Routed in a prompt A/B test by the conversation: every attempt of a run, and a rerun, on one arm.
        verdict = await self.judge.verdict(prompt_variables(messages, answer, truncated=truncated), self.parse,
                                           trace_id=trace_id,
                                           meaning=self._coverage(messages, answer),
                                           route_key=variables_key({"conversation": openai_messages(messages)}))
        if not verdict.ok:
            raise EvaluationFailed(verdict.reason or "the judge gave no verdict")
        value = verdict.value
        ev = value if isinstance(value, Evaluation) else coerce(value, self.threshold)
        return ev.model_copy(update={"template_hash": verdict.template_hash})  # which prompt version scored it


class QualityEvaluator(_JudgeEvaluator):
    """Note 001's quality evaluator on an LLM judge."""

    name = "quality"
    call_type = CALL_QUALITY_EVALUATION
    by_coverage = True

    def __init__(self, model: Model, threshold: float = 0.4, *, prompts: PromptSource | None = None) -> None:
        judge = Judge(model, builtin("gate_quality"), purpose=self.call_type, format_hint=QUALITY_HINT,
                      schema=QUALITY_SCHEMA, schema_name="quality_evaluation", prompts=prompts)
        super().__init__(judge, parse_quality, threshold)


class ComprehensivenessEvaluator(_JudgeEvaluator):
    """Note 004's self-evaluation: is the answer comprehensive?"""

    name = "comprehensiveness"
    call_type = CALL_SELF_EVALUATION
    by_coverage = True

    def __init__(self, model: Model, threshold: float = 0.4, *, prompts: PromptSource | None = None) -> None:
        judge = Judge(model, builtin("gate_comprehensive"), purpose=self.call_type, format_hint=COMPREHENSIVE_HINT,
                      schema=COMPREHENSIVE_SCHEMA, schema_name="self_evaluation",
                      temperature=SELF_EVALUATION_TEMPERATURE, prompts=prompts)
        super().__init__(judge, parse_comprehensive, threshold)

    async def evaluate(self, messages: Sequence[Message], answer: str, *, trace_id: str,
                       truncated: bool = False) -> Evaluation:
        """Note 004's check; an answer cut off at the token limit is not comprehensive (no judge call)."""
        if truncated:
            return truncated_evaluation()
        return await super().evaluate(messages, answer, trace_id=trace_id)


def truncated_evaluation() -> Evaluation:
    """The comprehensiveness verdict on an answer cut off at the token limit: not comprehensive."""
    return Evaluation(attempt=0, passed=False, comprehensive=False, reason=TRUNCATED_NOTE, issues=[TRUNCATED_NOTE])


class TemplateEvaluator(_JudgeEvaluator):
    """A user's judge: a template (placeholders ``{question}``, ``{context}``,
    ``{conversation}``, ``{answer}``) and an output schema (a JSON schema or a
    pydantic model) whose reply holds ``quality_score`` or ``comprehensive``."""

    name = "custom"

    def __init__(self, model: Model, template: PromptTemplate, schema: dict[str, Any] | type[BaseModel],
                 threshold: float = 0.4, *, call_type: str = CALL_QUALITY_EVALUATION) -> None:
        template.check(QUALITY_PLACEHOLDERS, {"answer"})
        self.call_type = call_type
        parse: Callable[[str], Any]
        if isinstance(schema, type) and issubclass(schema, BaseModel):
            json_schema, parse = schema.model_json_schema(), (lambda raw: _validated(schema, raw))
        else:
            json_schema, parse = dict(schema), extract_json
        hint = "JSON following this schema: " + str(json_schema)
        judge = Judge(model, template, purpose=call_type, format_hint=hint, schema=json_schema, schema_name="gate")
        super().__init__(judge, parse, threshold)


class FunctionEvaluator:
    """A user's ``async def evaluate(messages, answer)``; see :func:`coerce` for what it may return."""

    name = "custom"
    call_type = CALL_QUALITY_EVALUATION

    def __init__(self, fn: EvaluateFn, threshold: float = 0.4) -> None:
        self.fn = fn
        self.threshold = threshold
        self.model_name: str | None = f"fn:{getattr(fn, '__qualname__', type(fn).__name__)}"

    async def evaluate(self, messages: Sequence[Message], answer: str, *, trace_id: str,
                       truncated: bool = False) -> Evaluation:
        """The user's verdict (the function is not told of a cut-off answer: the gate never lets a
        comprehensive verdict on one pass, see :func:`jurist.gate.evaluation.evaluate_attempt`)."""
        result = self.fn(openai_messages(messages), answer)
        if inspect.isawaitable(result):
            result = await result
        ev = coerce(result, self.threshold)
        if ev.quality_score is None and ev.comprehensive is not None:
            self.call_type = CALL_SELF_EVALUATION
        return ev
