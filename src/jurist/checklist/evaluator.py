"""The batch evaluator: one judge call per user message, whatever the number of points.

:meth:`ChecklistEvaluator.evaluate_batch` asks the ``fast`` model (falling back
to ``settings.judge``, then to the offline local judge) which of the still
unchecked points the learner's recent messages demonstrate, with a confidence
per point and a feedback string for the tutor. Temperature 0.3, at most 1024
output tokens, no streaming, the last 10 messages as the excerpt.

Failures never crash a session: a reply that does not parse (after the one
re-ask every :class:`~jurist.judges.judge.Judge` makes) or a failed model call
gives an empty :class:`BatchEvaluation` with ``status="failed"`` (stored as
``evaluation_failed``) and the reason; the calls are on record with their parse error. Ids the judge
invents are dropped and listed in ``dropped_ids``.

With the local judge (``local/minilm``) there is no LLM: each point is checked
by meaning-matching against the learner's latest message
(:meth:`~jurist.models.base.MeaningJudge.expresses`) and a minimal feedback is
written from the results. When the judge cannot decide some points (their
probability lies in its band of uncertainty, :class:`~jurist.errors.Uncertain`)
but decides the others, the turn keeps the decided verdicts and names the
undecided points (``undecided_ids``, with the judge's ``uncertain: ...`` as the
reason): they stay unchecked, neither recalled nor missed on a guess. When it
decides none, the turn fails as above.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from functools import partial
from typing import Sequence, TypeGuard, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from jurist.checklist.points import ChecklistMessage, ChecklistPoint
from jurist.checklist.records import BatchEvaluation, Mode
from jurist.config import Settings
from jurist.errors import Uncertain
from jurist.judges.judge import Judge, MeaningQuestion
from jurist.judges.outcome import FAILED, SKIPPED
from jurist.judges.prompting import join, quote, quote_all
from jurist.judges.parsing import UNIT_INTERVAL, extract_json
from jurist.judges.templates import builtin
from jurist.models.base import DecidedChecks, MeaningJudge, StatementCheck
from jurist.models.model import Model
from jurist.models.registry import judge_ref
from jurist.runtime import Runtime, runtime_for
from jurist.store import Store

log = logging.getLogger("jurist.checklist")

def is_mode(value: str) -> TypeGuard[Mode]:
    """Whether ``value`` names a tutoring mode."""
    return value in get_args(Mode)


PURPOSE = "checklist_batch"
EXCERPT_MESSAGES = 10
TEMPERATURE = 0.3
MAX_TOKENS = 1024

RECALL_INSTRUCTION = """Provide a "feedback" string summarizing what happened in this exchange. Include:
- Which points were recalled and how accurately
- Any imprecisions or near-misses (e.g., "described the mechanism but used the wrong term")
- What remains unchecked
This feedback will guide the tutor's next response. Be specific and actionable."""
RABBITHOLE_INSTRUCTION = (
    'Provide a minimal "feedback" string. Just list which points were recalled, nothing more. '
    'Example: "Point rp_xxx was recalled." If no points were recalled, feedback is empty.'
)
FORMAT_HINT = (
    '{"recalledPoints": [{"id": "<point id>", "confidence": <number from 0 to 1>, '
    '"observation": "<what the user said>"}], "feedback": "<feedback for the tutor>"}'
)
OBSERVATION_CHARS = 300  # bounds on the strings: a small model under constrained decoding may not stop
FEEDBACK_CHARS = 800


def batch_schema(point_ids: list[str]) -> dict[str, object]:
    """The JSON schema of the judge's reply for these unchecked points (only their
    ids, each at most once in number, strings of bounded length)."""
    return {
        "type": "object",
        "properties": {
            "recalledPoints": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string", "enum": point_ids},
                        "confidence": UNIT_INTERVAL,
                        "observation": {"type": "string", "maxLength": OBSERVATION_CHARS},
                    },
                    "required": ["id", "confidence", "observation"],
                    "additionalProperties": False,
                },
                "maxItems": len(point_ids),
            },
            "feedback": {"type": "string", "maxLength": FEEDBACK_CHARS},
        },
        "required": ["recalledPoints", "feedback"],
        "additionalProperties": False,
    }


class RawRecalledPoint(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str
    confidence: float = Field(default=0.5, ge=0.0, le=1.0)
    observation: str = ""


class RawBatchResponse(BaseModel):
    """The judge's JSON: ``recalledPoints[{id, confidence, observation}]`` and ``feedback``."""

    model_config = ConfigDict(extra="ignore")

    recalledPoints: list[RawRecalledPoint]  # noqa: N815 - the wire name
    feedback: str = ""


def parse_batch_response(text: str) -> RawBatchResponse:
    """Parse a reply (fenced, bare or with prose around it); raise on anything malformed."""
    obj = extract_json(text)
    try:
        return RawBatchResponse.model_validate(obj)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ValueError(f"{where}: {first['msg']}") from None


def checklist_judge_ref(settings: Settings, explicit: str | None = None) -> str:
    """The batch judge: explicit, else alias ``fast``, else ``settings.judge``, else ``local/minilm``."""
    return judge_ref(settings, explicit or ("fast" if "fast" in settings.aliases else None))


def _points_question(points: list[ChecklistPoint], latest: str, mode: Mode) -> MeaningQuestion[RawBatchResponse]:
    """The batch as a meaning question: does the learner's latest message express each point?
    Its answer reads the checks by statement, so it reads the decided part of an undecided
    question (:func:`_decided_part`) too: a point with no check is not recalled."""

    def answer(checks: list[StatementCheck]) -> RawBatchResponse:
        by_text = {c.statement: c for c in checks}
        recalled = [RawRecalledPoint(id=p.id, confidence=round(c.confidence, 4), observation=c.evidence or "")
                    for p in points if (c := by_text.get(p.text)) is not None and c.expressed]
        ids = [r.id for r in recalled]
        remaining = [p.id for p in points if p.id not in ids]
        return RawBatchResponse(recalledPoints=recalled,
                                feedback=minimal_feedback(ids, remaining, mode, _undecided_ids(points, checks)))

    return MeaningQuestion(lambda judge: judge.expresses(latest, [p.text for p in points]), answer)


def _decided_part(error: BaseException | None, points: list[ChecklistPoint],
                  question: MeaningQuestion[RawBatchResponse]) -> tuple[RawBatchResponse, list[str]] | None:
    """What an undecided judge did decide: the answer from its decided checks and the ids of the
    points it could not decide; None when it decided none of them (or the failure was another)."""
    if not isinstance(error, Uncertain) or not isinstance(error.decided, DecidedChecks):
        return None
    checks = list(error.decided.checks)
    undecided = _undecided_ids(points, checks)
    if len(undecided) == len(points):
        return None
    return question.answer(checks), undecided


def _undecided_ids(points: list[ChecklistPoint], checks: Sequence[StatementCheck]) -> list[str]:
    """The ids of the points the judge returned no check for (it could not decide them)."""
    checked = {c.statement for c in checks}
    return [p.id for p in points if p.text not in checked]


def excerpt(messages: Sequence[ChecklistMessage], n: int = EXCERPT_MESSAGES) -> str:
    """The last ``n`` visible messages, each quoted as data."""
    return join(quote("text", m.content, f"{i}-{m.role}") for i, m in enumerate(list(messages)[-n:], start=1))


def _message(m: ChecklistMessage | Mapping[str, object]) -> ChecklistMessage:
    """A message given as a ``{"role", "content"}`` dict read as a ChecklistMessage."""
    if isinstance(m, ChecklistMessage):
        return m
    return ChecklistMessage(role=str(m.get("role", "")), content=str(m.get("content", "")))


def minimal_feedback(recalled: list[str], remaining: list[str], mode: Mode, undecided: Sequence[str] = ()) -> str:
    """The feedback written without an LLM (local judge); in ``recall`` mode it names the points
    the judge could not decide, so that the tutor can ask about them again."""
    if mode == "rabbithole":
        return " ".join(f"Point {pid} was recalled." for pid in recalled)
    parts = [f"Point {pid} was recalled." for pid in recalled]
    if not recalled:
        parts.append("No recall points were demonstrated in this message.")
    if remaining:
        parts.append(f"Points {', '.join(remaining)} remain unchecked.")
    if undecided:
        parts.append(f"Point(s) {', '.join(undecided)} could not be judged from this message.")
    return " ".join(parts)


class ChecklistEvaluator:
    """Judges all unchecked points against the recent conversation, one call per message.

    A backend that only matches meaning (the offline ``local/minilm``) answers
    whether the learner's latest message expresses each point instead of the
    prompt, through the same judge (:class:`~jurist.judges.judge.MeaningQuestion`).
    """

    def __init__(
        self,
        judge: str | Model | MeaningJudge | None = None,
        *,
        runtime: Runtime | None = None,
        settings: Settings | None = None,
        sink: Store | None = None,
    ) -> None:
        """``runtime`` (or ``settings`` and the ``sink`` store calls are recorded in) resolves
        ``judge``: explicit, else alias ``fast``, else the configured judge, else ``local/minilm``."""
        rt = runtime_for(runtime, settings, sink, open_store=False)
        self.settings = rt.settings
        self.template = builtin("checklist_batch")
        default = "fast" if "fast" in self.settings.aliases else None
        self._owned = judge is None or isinstance(judge, str)
        self._model = rt.judge(judge, default=default)
        self._judge = Judge(
            self._model, self.template, purpose=PURPOSE, format_hint=FORMAT_HINT,
            schema_name="batch_evaluation", temperature=TEMPERATURE, max_tokens=MAX_TOKENS, prompts=rt.prompts,
        )

    @property
    def judge_model(self) -> str:
        return self._model.name

    async def evaluate_batch(
        self,
        unchecked_points: Sequence[ChecklistPoint],
        messages: Sequence[ChecklistMessage | Mapping[str, object]],
        mode: Mode = "recall",
        *,
        trace_id: str | None = None,
    ) -> BatchEvaluation:
        """Which of ``unchecked_points`` the conversation (messages, or ``{"role", "content"}`` dicts)
        shows the learner recalled."""
        conversation = [_message(m) for m in messages]
        if mode not in ("recall", "rabbithole"):
            raise ValueError(f"mode must be 'recall' or 'rabbithole', not {mode!r}")
        points = list(unchecked_points)
        if not points:
            return BatchEvaluation(status=SKIPPED, reason="no unchecked points", judge_model=self.judge_model)
        latest = next((m.content for m in reversed(conversation) if m.role == "user"), "")
        if not latest.strip():
            return BatchEvaluation(status=SKIPPED, reason="no user message", judge_model=self.judge_model)
        variables = {
            "feedback_instruction": RECALL_INSTRUCTION if mode == "recall" else RABBITHOLE_INSTRUCTION,
            "points": quote_all("statement", [p.text for p in points], [p.id for p in points]),
            "conversation": excerpt(conversation),
        }
        question = _points_question(points, latest, mode)
        verdict = await self._judge.verdict(variables, parse_batch_response, trace_id=trace_id, meaning=question,
                                            schema=batch_schema([p.id for p in points]))
        evaluation = partial(BatchEvaluation, judge_model=verdict.judge_model, call_ids=verdict.call_ids,
                             input_tokens=verdict.input_tokens, output_tokens=verdict.output_tokens)
        value = verdict.value
        undecided: list[str] = []
        if not verdict.ok or value is None:
            part = _decided_part(verdict.error, points, question)
            if part is None:
                log.warning("checklist batch evaluation failed (%s); no point counted this turn", verdict.reason)
                return evaluation(status=FAILED, reason=verdict.reason)
            value, undecided = part
            log.warning("checklist: the judge could not decide point(s) %s (%s); they stay unchecked this turn",
                        ", ".join(undecided), verdict.reason)
            evaluation = partial(evaluation, undecided_ids=undecided, reason=verdict.reason)
        wanted = {p.id for p in points}
        recalled: list[str] = []
        confidence: dict[str, float] = {}
        observations: dict[str, str] = {}
        dropped: list[str] = []
        for entry in value.recalledPoints:
            pid = entry.id.strip()
            if pid not in wanted:
                if pid not in dropped:
                    dropped.append(pid)
                continue
            if pid not in confidence:
                recalled.append(pid)
            confidence[pid] = max(entry.confidence, confidence.get(pid, 0.0))
            observations[pid] = entry.observation
        if dropped:
            log.warning("checklist judge named unknown point ids %s; dropped", dropped)
        return evaluation(feedback=value.feedback.strip(), recalled_point_ids=recalled,
                          confidence_per_point=confidence, observations=observations, dropped_ids=dropped)

    async def aclose(self) -> None:
        if self._owned:
            await self._model.aclose()
