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

A rubric with a ``check`` (:mod:`jurist.rubrics.checks`) is decided without a model: its
score is the scale's maximum or minimum with the reason, ``judge_model`` ``check``.

Reference-based judging: ``{expected}`` in a rubric's description, criteria or items (or a
template with an ``{expected}`` placeholder) brings in the session's expected answer(s),
quoted as untrusted text (``<answer id="expected">``, with the session's data). A session
without one is that rubric's ``evaluation_failed`` with reason "no expected answer". A
backend that only matches meaning answers an item whose text uses ``{expected}`` by whether
the answer expresses every sentence of an expected answer (any one of them); it refuses, with
the reason, an expected answer too short (under :data:`MIN_REFERENCE_WORDS` words: a
``contains`` check compares those) or too long (over :data:`MAX_REFERENCE_SENTENCES` sentences)
to compare by meaning.

A session with images goes to the ``visual`` model (``visual_evaluator``), the
images sent with the prompt; without one, the judge reads the sessions' text
placeholders and the outcome counts the images it did not see (:func:`unseen_note`).
"""

from __future__ import annotations

import asyncio
import re
from functools import partial
from typing import Any

from pydantic import JsonValue

from jurist.judges import FAILED, OK, Judge, PromptTemplate, Verdict, parse_items, parse_score
from jurist.judges.templates import PromptSource
from jurist.judges.calibration import FittedLocalThresholds
from jurist.judges.judge import MeaningQuestion
from jurist.judges.parsing import DecidedReplies, ItemReply, ScoreReply
from jurist.judges.prompting import Quoted, join, quote, quote_all
from jurist.judges.weighting import LOGPROBS, PLAIN, SCORE_MODES, TOP_LOGPROBS, WeightedReply, weigh
from jurist.errors import ConfigError, Uncertain, Unsupported
from jurist.models.base import Completion, DecidedChecks, StatementCheck
from jurist.models.images import Image
from jurist.models.model import Model, time_limit
from jurist.rubrics.checks import CHECK_MODEL, EXPECTED, NO_EXPECTED, Check, run_check
from jurist.rubrics.regex_worker import RegexRunner
from jurist.rubrics.models import Rubric, RubricItem
from jurist.rubrics.results import FILE_STATUS, ItemDecision, RubricScore, Tokens
from jurist.rubrics.sessions import ChatSession, FormattedSession

PURPOSE = "rubric_judge"
SCORED = FILE_STATUS[OK]  # result.json's and the score rows' name for an ok outcome
EVALUATION_FAILED = FILE_STATUS[FAILED]  # result.json's and the score rows' name for a failed outcome

REASONING_CHARS = 600  # a bound on the reasoning: a small model under constrained decoding may not stop
ITEM_REASONING_CHARS = 300
UNDECIDED_ITEM = "undecided: the judge's probability lies inside its band of uncertainty"


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


def item_score_range(rubric: Rubric, met: dict[str, bool], scale: tuple[float, float]) -> tuple[float, float]:
    """The lowest and highest score the rubric can have, given the items decided in ``met``: each
    undecided item counted against the score, then for it."""
    undecided = [i for i in rubric.items or [] if i.id not in met]
    low = {**met, **{i.id: i.points < 0 for i in undecided}}
    high = {**met, **{i.id: i.points > 0 for i in undecided}}
    return item_score(rubric, low, scale), item_score(rubric, high, scale)


def _item_reasoning(rubric: Rubric, met: dict[str, bool]) -> str:
    got = [i.id for i in rubric.items or [] if met.get(i.id)]
    missed = [i.id for i in rubric.items or [] if not met.get(i.id)]
    return f"criteria met: {', '.join(got) or 'none'}; not met: {', '.join(missed) or 'none'}"


MIN_REFERENCE_WORDS = 3  # an expected answer shorter than this is not compared by meaning
MAX_REFERENCE_SENTENCES = 8  # nor one longer than this
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n+")


def reference_sentences(expected: str) -> list[str]:
    """The sentences of an expected answer, each of which the answer must express; Unsupported
    when it is too short or too long to compare by meaning."""
    shown = expected if len(expected) <= 60 else expected[:60] + "…"
    if len(expected.split()) < MIN_REFERENCE_WORDS:
        raise Unsupported(f"the expected answer {shown!r} is too short to compare by meaning (under "
                          f"{MIN_REFERENCE_WORDS} words): compare it with a check such as "
                          f'{{"contains": "{EXPECTED}"}}, or configure an LLM judge')
    sentences = [s.strip() for s in _SENTENCE_END.split(expected.strip()) if s.strip()]
    if len(sentences) > MAX_REFERENCE_SENTENCES:
        raise Unsupported(f"the expected answer {shown!r} has {len(sentences)} sentences, too long to compare by "
                          f"meaning (at most {MAX_REFERENCE_SENTENCES}); configure an LLM judge")
    return sentences


def items_question(rubric: Rubric, session: ChatSession) -> MeaningQuestion[dict[str, ItemReply]]:
    """The items as a meaning question: does the assistant's text express each item? An item that
    uses ``{expected}`` asks instead whether it expresses every sentence of an expected answer
    (any one of them)."""
    items = rubric.items or []
    text = session.text_of("assistant")

    async def ask(judge: Any) -> list[ItemReply]:
        plain = [i for i in items if EXPECTED not in i.text]
        sentences = [[reference_sentences(e) for e in session.expected] if EXPECTED in i.text else [] for i in items]
        statements = [i.text for i in plain] + [s for per_item in sentences for ref in per_item for s in ref]

        def replies(found: list[StatementCheck | None]) -> list[ItemReply | None]:
            checks = iter(found)
            by_plain = {i.id: next(checks) for i in plain}
            out: list[ItemReply | None] = []
            for item, refs in zip(items, sentences):
                if item.id in by_plain:
                    c = by_plain[item.id]
                    out.append(None if c is None else ItemReply(
                        met=c.expressed, reasoning="", confidence=round(c.confidence, 4), evidence=c.evidence))
                    continue
                out.append(_reference_reply([[next(checks) for _ in ref] for ref in refs]))
            return out

        unsure: Uncertain | None = None
        try:
            found: list[StatementCheck | None] = list(await judge.expresses(text, statements)) if statements else []
        except Uncertain as exc:
            if not isinstance(exc.decided, DecidedChecks):
                raise
            unsure, by_statement = exc, {c.statement: c for c in exc.decided.checks}
            found = [by_statement.get(s) for s in statements]
        per_item = replies(found)
        if unsure is not None and any(r is None for r in per_item):  # the rubric says which items it decided
            raise unsure.with_decided(DecidedReplies(tuple(per_item))) from unsure
        return [r for r in per_item if r is not None]  # an undecided sentence may decide no item

    def answer(replies: list[ItemReply]) -> dict[str, ItemReply]:
        return {i.id: r for i, r in zip(items, replies)}

    return MeaningQuestion(ask, answer)


def _reference_reply(per_reference: list[list[StatementCheck | None]]) -> ItemReply | None:
    """An ``{expected}`` item's reply from the checks of each expected answer's sentences (None for
    a sentence the judge could not decide): met when every sentence of one expected answer is
    expressed, not met when every expected answer has a sentence found missing, else undecided
    (None). Its confidence is the least sure sentence of the best expected answer met, else the
    surest sentence found missing."""
    met = [[c for c in ref if c is not None] for ref in per_reference
           if all(c is not None and c.expressed for c in ref)]
    if met:
        best = max(met, key=lambda ref: min(c.confidence for c in ref))
        return ItemReply(met=True, reasoning="", confidence=round(min(c.confidence for c in best), 4),
                         evidence=" … ".join(c.evidence or "" for c in best) or None)
    if not all(any(c is not None and not c.expressed for c in ref) for ref in per_reference):
        return None
    confidence = max(c.confidence for ref in per_reference for c in ref if c is not None and not c.expressed)
    return ItemReply(met=False, reasoning="", confidence=round(confidence, 4), evidence=None)


def expected_block(expected: tuple[str, ...]) -> Quoted:
    """The session's expected answers, quoted as untrusted data: ``<answer id="expected">``, or
    ``expected-1`` ... for several."""
    if len(expected) == 1:
        return quote("answer", expected[0], "expected")
    return quote_all("answer", list(expected), [f"expected-{n}" for n in range(1, len(expected) + 1)])


def expected_mention(expected: tuple[str, ...]) -> str:
    """What ``{expected}`` in a rubric's text becomes: a pointer to the quoted expected answer(s)."""
    if len(expected) == 1:
        return 'the expected answer (quoted in <answer id="expected">)'
    return (f'one of the {len(expected)} expected answers (quoted in <answer id="expected-1"> to '
            f'<answer id="expected-{len(expected)}">; any one of them is acceptable)')


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
        self._judges = judges
        # rubric id -> its items judge on the offline judge built with thresholds fitted on labels, and those
        self._fitted: dict[str, tuple[Judge, FittedLocalThresholds]] = {}
        self._regex = RegexRunner()  # regex checks match in a worker process, stopped when too slow

    def judge_model(self, session: ChatSession) -> str:
        """The model that judges ``session``: the visual one for a session with images, when there is one."""
        return self.visual.name if self.visual is not None and session.images else self.name

    async def aclose(self) -> None:
        """Close the judge's models (the visual one too) and the regex checks' worker."""
        await asyncio.to_thread(self._regex.close)
        await self.model.aclose()
        for judge, _ in self._fitted.values():
            await judge.model.aclose()
        if self.visual is not None and self.visual is not self.model:
            await self.visual.aclose()

    async def _checked(self, rubric: Rubric, check: Check, scale: tuple[float, float], session: ChatSession,
                       timeout: float) -> RubricScore:
        return await _checked_score(rubric, check, scale, session, self._regex, timeout)

    def judge_for(self, rubric: Rubric) -> Judge:
        """The judge (model and template) that scores ``rubric``: the items judge for an
        item-based rubric, else the free-form one."""
        if rubric.item_based:
            fitted = self._fitted.get(rubric.id)
            return fitted[0] if fitted is not None else self._items
        return self._free

    def use_fitted(self, rubric_id: str, model: Model, fitted: FittedLocalThresholds) -> None:
        """Judge the items of ``rubric_id`` on ``model``: the offline judge built with the thresholds
        a calibration fitted for this judge and rubric (each such score says so)."""
        self._fitted[rubric_id] = (self._judges(model)[1], fitted)

    async def score(self, rubric: Rubric, scale: tuple[float, float], session: ChatSession,
                    formatted: FormattedSession, *, trace_id: str, timeout: float,
                    sample: int | None = None) -> RubricScore:
        """One rubric's outcome; ``sample`` numbers one of several samples of the same judgement
        (each its own call and cache entry, see :meth:`Judge.verdict`)."""
        check = rubric.compiled_check
        if check is not None:
            return await self._checked(rubric, check, scale, session, timeout)
        lo, hi = scale
        sent: tuple[Image, ...] = ()
        free, items = self._free, self.judge_for(rubric) if rubric.item_based else self._items
        fitted = self._fitted.get(rubric.id) if rubric.item_based else None
        if session.images and self._seeing is not None:  # a vision model is sent the images
            (free, items), sent = self._seeing, session.images
        in_template = "expected" in (items if rubric.item_based else free).template.placeholders
        if (in_template or rubric.uses_expected) and not session.expected:
            return RubricScore(rubric_id=rubric.id, rubric_name=rubric.name, score=None, max_score=hi,
                               reasoning=NO_EXPECTED, status=FAILED, weight=rubric.weight,
                               judge_model=self.judge_model(session))
        variables: dict[str, object] = dict(
            rubric_name=rubric.name,
            rubric_description=rubric.description,
            scoring_criteria=rubric.criteria_text(),
            rubric_items=rubric.items_text(),
            chat_session=formatted.text,
            score_min=f"{lo:g}",
            score_max=f"{hi:g}",
        )
        if rubric.uses_expected or in_template:
            mention = expected_mention(session.expected)
            for key in ("rubric_description", "scoring_criteria", "rubric_items"):
                variables[key] = str(variables[key]).replace(EXPECTED, mention)
            if in_template:
                variables["expected"] = expected_block(session.expected)
            else:  # the expected answers go with the data, before the session
                assert isinstance(formatted.text, Quoted)  # format_session quotes it
                variables["chat_session"] = join([expected_block(session.expected), formatted.text], "\n\n")
        with time_limit(timeout):  # the calls know the rubric's clock: one it cuts counts as a time-out
            if rubric.item_based:
                ids = [i.id for i in rubric.items or []]
                verdict: Verdict[dict[str, ItemReply]] | Verdict[ScoreReply] = await items.verdict(
                    variables, lambda text: parse_items(text, ids), trace_id=trace_id, timeout=timeout,
                    meaning=items_question(rubric, session), schema=items_schema(ids), sample=sample,
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
        if fitted is not None and items is fitted[0]:
            given["local_thresholds"] = fitted[1].describe()
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
            partial = _partial_replies(rubric, verdict.error)
            if partial is not None:  # undecided items: say what was decided, and where the score lies
                given["items"] = [_item_entry(i, r) for i, r in zip(rubric.items or [], partial)]
                given["score_range"] = item_score_range(rubric, {i.id: r.met for i, r in zip(rubric.items or [], partial)
                                                                 if r is not None}, scale)
        return RubricScore(
            rubric_id=rubric.id, rubric_name=rubric.name, score=None if score is None else round(score, 4),
            max_score=hi, reasoning=reasoning, status=OK if score is not None else FAILED, weight=rubric.weight,
            judge_model=verdict.judge_model, tokens=Tokens(input=verdict.input_tokens, output=verdict.output_tokens),
            latency_ms=round(verdict.latency_ms, 1), template_hash=verdict.template_hash,
            call_ids=list(verdict.call_ids), **given,
        )


async def _checked_score(rubric: Rubric, check: Check, scale: tuple[float, float], session: ChatSession,
                         regex: RegexRunner, timeout: float) -> RubricScore:
    """A check's outcome as a rubric score: no model call, ``judge_model`` ``check``."""
    turns = [(m.role, m.content) for m in session.messages]
    result, latency = await run_check(check, turns, session.expected, scale, regex=regex, timeout=timeout)
    return RubricScore(
        rubric_id=rubric.id, rubric_name=rubric.name, score=None if result.score is None else round(result.score, 4),
        max_score=scale[1], reasoning=result.reason, status=OK if result.score is not None else FAILED,
        weight=rubric.weight, judge_model=CHECK_MODEL, latency_ms=round(latency, 1),
    )


def _partial_replies(rubric: Rubric, error: BaseException | None) -> list[ItemReply | None] | None:
    """The replies per item of an undecided item-based rubric (None for an item left undecided),
    when the judge said which items it decided."""
    if not rubric.item_based or not isinstance(error, Uncertain) or not isinstance(error.decided, DecidedReplies):
        return None
    replies = error.decided.replies
    return list(replies) if len(replies) == len(rubric.items or []) else None


def _item_entry(item: RubricItem, reply: ItemReply | None) -> ItemDecision:
    """One item of result.json: a judge's reasoning, or a meaning match's confidence and evidence;
    ``met`` null for an item the judge could not decide."""
    if reply is None:
        return ItemDecision(id=item.id, text=item.text, points=item.points, met=None, reasoning=UNDECIDED_ITEM)
    if reply.confidence is None:
        return ItemDecision(id=item.id, text=item.text, points=item.points, met=reply.met, reasoning=reply.reasoning)
    return ItemDecision(id=item.id, text=item.text, points=item.points, met=reply.met, confidence=reply.confidence,
                        evidence=reply.evidence)
