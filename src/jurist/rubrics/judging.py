"""Scoring one rubric against one session.

:class:`RubricJudge` returns a :class:`~jurist.rubrics.results.RubricScore` (the
same model result.json writes): a score on the rubric's scale, or status ``failed``
(``evaluation_failed`` in the file) with the reason. Item-based rubrics are graded
item by item; their score is points earned over points possible (the positive
points), clipped to [0, 1] and mapped onto the scale. A backend that only
matches meaning (the offline ``local/minilm`` judge) answers the items by
whether the assistant's turns express each item, and refuses free-form rubrics.

With score mode ``logprobs`` a free-form rubric's judge call asks for the
reply's top logprobs and the outcome adds the weighted score (the expectation
over the scale's tokens, :mod:`jurist.judges.weighting`) beside the plain one;
where there is none, ``logprobs_unavailable`` says why and the plain score is
the one used.

A session with images goes to the ``visual`` model (``visual_evaluator``), the
images sent with the prompt; without one, the judge reads the sessions' text
placeholders and the outcome counts the images it did not see (:func:`unseen_note`).
"""

from __future__ import annotations

import re
from functools import partial
from typing import Any

from pydantic import JsonValue

from jurist.judges import FAILED, OK, Judge, PromptTemplate, Verdict, parse_items, parse_score
from jurist.judges.templates import PromptSource
from jurist.judges.judge import MeaningQuestion
from jurist.judges.parsing import ItemReply, ScoreReply
from jurist.judges.weighting import LOGPROBS, PLAIN, SCORE_MODES, TOP_LOGPROBS, WeightedReply, weigh
from jurist.errors import ConfigError
from jurist.models.base import Completion, StatementCheck
from jurist.models.images import Image
from jurist.models.model import Model, time_limit
from jurist.rubrics.models import Rubric, RubricItem
from jurist.rubrics.results import FILE_STATUS, ItemDecision, RubricScore, Tokens
from jurist.rubrics.sessions import ChatSession, FormattedSession

PURPOSE = "rubric_judge"
SCORED = FILE_STATUS[OK]  # result.json's and the score rows' name for an ok outcome
EVALUATION_FAILED = FILE_STATUS[FAILED]  # result.json's and the score rows' name for a failed outcome

REASONING_CHARS = 600  # a bound on the reasoning: a small model under constrained decoding may not stop
ITEM_REASONING_CHARS = 300


def score_schema(scale: tuple[float, float]) -> dict[str, JsonValue]:
    """The JSON schema of a free-form rubric's reply: a score on ``scale`` and its reasoning."""
    lo, hi = scale
    return {
        "type": "object",
        "properties": {"score": {"type": "number", "minimum": lo, "maximum": hi},
                       "reasoning": {"type": "string", "maxLength": REASONING_CHARS}},
        "required": ["score", "reasoning"],
        "additionalProperties": False,
    }


def items_schema(ids: list[str]) -> dict[str, JsonValue]:
    """The JSON schema of an item rubric's reply: one entry per item, in order, each
    naming its id (a constrained decoder then answers every item, none invented)."""
    return {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "prefixItems": [{
                    "type": "object",
                    "properties": {"id": {"const": item_id}, "met": {"type": "boolean"},
                                   "reasoning": {"type": "string", "maxLength": ITEM_REASONING_CHARS}},
                    "required": ["id", "met", "reasoning"],
                    "additionalProperties": False,
                } for item_id in ids],
                "minItems": len(ids),
                "maxItems": len(ids),
            }
        },
        "required": ["items"],
        "additionalProperties": False,
    }


# Why an item-based rubric under score mode logprobs has no weighted score.
SCORE_LINES = re.compile(r"^SCORE:", re.MULTILINE)
ITEMS_UNWEIGHTED = ("logprobs unavailable: an item-based rubric's score is counted from its items, "
                    "not read from one score token")


def item_score(rubric: Rubric, met: dict[str, bool], scale: tuple[float, float]) -> float:
    """Points earned over points possible, clipped to [0, 1], on ``scale``."""
    items = rubric.items or []
    possible = sum(i.points for i in items if i.points > 0)
    earned = sum(i.points for i in items if met.get(i.id))
    frac = min(1.0, max(0.0, earned / possible))
    lo, hi = scale
    return round(lo + frac * (hi - lo), 4)


def _item_reasoning(rubric: Rubric, met: dict[str, bool]) -> str:
    got = [i.id for i in rubric.items or [] if met.get(i.id)]
    missed = [i.id for i in rubric.items or [] if not met.get(i.id)]
    return f"criteria met: {', '.join(got) or 'none'}; not met: {', '.join(missed) or 'none'}"


def _items_question(rubric: Rubric, session: ChatSession) -> MeaningQuestion[dict[str, ItemReply]]:
    """The items as a meaning question: does the assistant's text express each item?"""
    items = rubric.items or []

    def answer(checks: list[StatementCheck]) -> dict[str, ItemReply]:
        return {i.id: ItemReply(met=c.expressed, reasoning="", confidence=round(c.confidence, 4),
                                evidence=c.evidence)
                for i, c in zip(items, checks)}

    text = session.text_of("assistant")
    return MeaningQuestion(lambda judge: judge.expresses(text, [i.text for i in items]), answer)


def unseen_note(count: int) -> str:
    """What a result says of the images a judge without vision did not see."""
    return (f"{count} image(s) not seen by the judge: no visual_evaluator is configured, so it read "
            "text placeholders instead")


class RubricJudge:
    """One judge call per rubric; sessions with images go to ``visual`` (a vision model), when given."""

    def __init__(self, model: Model, free_template: PromptTemplate, items_template: PromptTemplate, *,
                 temperature: float = 0.0, seed: int | None = 0, max_tokens: int = 1024,
                 score_mode: str = PLAIN, reask: bool = True, visual: Model | None = None,
                 prompts: PromptSource | None = None) -> None:
        if score_mode not in SCORE_MODES:
            raise ConfigError(f"score_mode={score_mode!r}: use one of {', '.join(SCORE_MODES)}")
        if visual is not None and not visual.chats:
            raise ConfigError(f"visual_evaluator {visual.name} reads no images (it only matches meaning); "
                              "configure a vision LLM, e.g. ollama/qwen3-vl:8b or openai/gpt-4o-mini")
        self.model = model
        self.name = model.name
        self.visual = visual
        self.score_mode = score_mode
        # A template that asks for SCORE:/REASONING: lines (note 003's) is answered in its own
        # format: no JSON schema is imposed on the reply.
        self._lines = SCORE_LINES.search(free_template.text) is not None

        def judges(on: Model) -> tuple[Judge, Judge]:
            judge = partial(Judge, on, purpose=PURPOSE, temperature=temperature, seed=seed, max_tokens=max_tokens,
                            reask=reask, prompts=prompts)
            free = judge(free_template, schema_name="rubric_score", format_hint="",
                         top_logprobs=TOP_LOGPROBS if score_mode == LOGPROBS else None)
            items = judge(items_template, schema_name="rubric_items",
                          format_hint='{"items": [{"id": "<criterion id>", "met": true, '
                                      '"reasoning": "<one sentence>"}]}')
            return free, items

        self._free, self._items = judges(model)
        self._seeing = judges(visual) if visual is not None else None

    def judge_model(self, session: ChatSession) -> str:
        """The model that judges ``session``: the visual one for a session with images, when there is one."""
        return self.visual.name if self.visual is not None and session.images else self.name

    async def aclose(self) -> None:
        """Close the judge's models (the visual one too)."""
        await self.model.aclose()
        if self.visual is not None and self.visual is not self.model:
            await self.visual.aclose()

    def judge_for(self, rubric: Rubric) -> Judge:
        """The judge (model and template) that scores ``rubric``: the items judge for an
        item-based rubric, else the free-form one."""
        return self._items if rubric.item_based else self._free

    async def score(self, rubric: Rubric, scale: tuple[float, float], session: ChatSession,
                    formatted: FormattedSession, *, trace_id: str, timeout: float,
                    sample: int | None = None) -> RubricScore:
        """One rubric's outcome; ``sample`` numbers one of several samples of the same judgement
        (each its own call and cache entry, see :meth:`Judge.verdict`)."""
        lo, hi = scale
        sent: tuple[Image, ...] = ()
        free, items = self._free, self._items
        if session.images and self._seeing is not None:  # a vision model is sent the images
            (free, items), sent = self._seeing, session.images
        variables = dict(
            rubric_name=rubric.name,
            rubric_description=rubric.description,
            scoring_criteria=rubric.criteria_text(),
            rubric_items=rubric.items_text(),
            chat_session=formatted.text,
            score_min=f"{lo:g}",
            score_max=f"{hi:g}",
        )
        with time_limit(timeout):  # the calls know the rubric's clock: one it cuts counts as a time-out
            if rubric.item_based:
                ids = [i.id for i in rubric.items or []]
                verdict: Verdict[dict[str, ItemReply]] | Verdict[ScoreReply] = await items.verdict(
                    variables, lambda text: parse_items(text, ids), trace_id=trace_id, timeout=timeout,
                    meaning=_items_question(rubric, session), schema=items_schema(ids), sample=sample,
                    images=sent, route_key=session.session_id,
                )
            else:
                hint = (
                    f'{{"score": <number from {lo:g} to {hi:g}>, "reasoning": "<2-3 sentences>"}}\n'
                    f"or the two lines\nSCORE: <number from {lo:g} to {hi:g}>\nREASONING: <2-3 sentences>"
                )
                def weighted(reply: ScoreReply, completion: Completion) -> ScoreReply:
                    return weigh(reply, completion.logprobs, scale)  # recorded with the call

                verdict = await free.verdict(
                    variables, lambda text: parse_score(text, scale), trace_id=trace_id, timeout=timeout,
                    format_hint=hint, schema=None if self._lines else score_schema(scale),
                    unsupported=f"the local judge cannot score free-form rubric {rubric.id}; configure an LLM judge",
                    refine=weighted if self.score_mode == LOGPROBS else None, sample=sample,
                    images=sent, route_key=session.session_id,
                )
        given: dict[str, Any] = {}  # the optional fields result.json writes only when they apply
        if verdict.cached:
            given["cached"] = True
        if self.score_mode != PLAIN:
            given["score_mode"] = self.score_mode
        reply = verdict.value
        if verdict.status == OK and reply is not None:
            if isinstance(reply, ScoreReply):
                score, reasoning = reply.score, reply.reasoning
                if self.score_mode != PLAIN:
                    expected = reply.weighted_score if isinstance(reply, WeightedReply) else None
                    given["weighted_score"] = None if expected is None else round(expected, 4)
                    if isinstance(reply, WeightedReply) and reply.logprobs_unavailable is not None:
                        given["logprobs_unavailable"] = reply.logprobs_unavailable
            else:  # an item-based rubric: a reply per item
                met = {k: v.met for k, v in reply.items()}
                score, reasoning = item_score(rubric, met, scale), _item_reasoning(rubric, met)
                given["items"] = [_item_entry(i, reply[i.id]) for i in rubric.items or []]
                if self.score_mode == LOGPROBS:
                    given.update(weighted_score=None, logprobs_unavailable=ITEMS_UNWEIGHTED)
        else:
            score, reasoning = None, verdict.reason or ""
        return RubricScore(
            rubric_id=rubric.id, rubric_name=rubric.name, score=None if score is None else round(score, 4),
            max_score=hi, reasoning=reasoning, status=OK if score is not None else FAILED, weight=rubric.weight,
            judge_model=verdict.judge_model, tokens=Tokens(input=verdict.input_tokens, output=verdict.output_tokens),
            latency_ms=round(verdict.latency_ms, 1), template_hash=verdict.template_hash,
            call_ids=list(verdict.call_ids), **given,
        )


def _item_entry(item: RubricItem, reply: ItemReply) -> ItemDecision:
    """One item of result.json: a judge's reasoning, or a meaning match's confidence and evidence."""
    if reply.confidence is None:
        return ItemDecision(id=item.id, text=item.text, points=item.points, met=reply.met, reasoning=reply.reasoning)
    return ItemDecision(id=item.id, text=item.text, points=item.points, met=reply.met, confidence=reply.confidence,
                        evidence=reply.evidence)
