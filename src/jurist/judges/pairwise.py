"""Pairwise judging: which of two answers to one prompt is better, asked in both orders.

LLM judges favour an answer for the place it is shown in (position bias: Zheng
et al. 2023, "Judging LLM-as-a-Judge with MT-Bench and Chatbot Arena", §3.3;
Wang et al. 2023, "Large Language Models are not Fair Evaluators"). So every
pair is judged twice, the second time with the answers swapped, as MT-Bench's
conservative "swap" does: a verdict that holds in both orders is the pair's
result; verdicts that differ (the first system preferred in one order and the
second, or a tie, in the other) make the pair a tie, and count as a position
flip.

The judge reads the prompt and the two answers as quoted data
(:mod:`jurist.judges.prompting`) in the ``pairwise_judge`` template and
answers ``{"reasoning": ..., "winner": "A" | "B" | "tie"}``. A backend that
writes no text (the offline ``local/minilm``) is asked instead how relevant
each answer is to the prompt, and prefers the more relevant one by at least
:data:`RELEVANCE_MARGIN` (else a tie); it sees no order, so it never flips.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from pydantic import JsonValue

from jurist.ids import new_id
from jurist.judges.judge import Judge, MeaningQuestion, Verdict
from jurist.judges.parsing import PREFER_A, PREFER_B, PREFER_NEITHER, PreferenceReply, parse_preference
from jurist.judges.prompting import quote
from jurist.judges.templates import (PAIRWISE_PLACEHOLDERS, PAIRWISE_TEMPLATE, PromptSource, PromptTemplate,
                                     builtin)
from jurist.models.base import RelevanceScore
from jurist.models.model import Model

PURPOSE = "pairwise_judge"
WIN, TIE, LOSS = "win", "tie", "loss"  # a pair's result, for its first system
FIRST, SECOND = "first", "second"  # which system one order's verdict preferred (or PREFER_NEITHER)
DEFAULT_CRITERIA = ("The better answer responds to the prompt more helpfully, accurately and completely, "
                    "and says nothing false or unsafe.")
RELEVANCE_MARGIN = 0.02  # the offline judge: a smaller difference in relevance is a tie
REASONING_CHARS = 600

SCHEMA: dict[str, JsonValue] = {
    "type": "object",
    "properties": {"reasoning": {"type": "string", "maxLength": REASONING_CHARS},
                   "winner": {"type": "string", "enum": [PREFER_A, PREFER_B, PREFER_NEITHER]}},
    "required": ["reasoning", "winner"],
    "additionalProperties": False,
}
FORMAT_HINT = '{"reasoning": "<2-3 sentences>", "winner": "A" or "B" or "tie"}'


@dataclass
class Contestant:
    """One system's answer to the prompt."""

    system: str
    answer: str


def _picked(verdict: Verdict[PreferenceReply], first_shown_as_a: bool) -> str | None:
    """Which system one order's verdict preferred: FIRST, SECOND or PREFER_NEITHER (None: no verdict)."""
    if not verdict.ok or verdict.value is None:
        return None
    winner = verdict.value.winner
    if winner == PREFER_NEITHER:
        return PREFER_NEITHER
    return FIRST if (winner == PREFER_A) == first_shown_as_a else SECOND


@dataclass
class PairJudgement:
    """One pair of answers judged in both orders."""

    item: str
    first: str  # the systems' names
    second: str
    forward: Verdict[PreferenceReply]  # the first system's answer shown as A
    backward: Verdict[PreferenceReply]  # the second system's answer shown as A
    trace_id: str

    @property
    def ok(self) -> bool:
        return self.forward.ok and self.backward.ok

    @property
    def picks(self) -> tuple[str | None, str | None]:
        """The system each order preferred (FIRST, SECOND, PREFER_NEITHER; None: no verdict)."""
        return _picked(self.forward, True), _picked(self.backward, False)

    @property
    def flipped(self) -> bool:
        """Both orders answered and their verdicts differ: the order changed the verdict."""
        fwd, bwd = self.picks
        return self.ok and fwd != bwd

    @property
    def positions(self) -> list[str]:
        """The position each order's verdict chose (A, B or tie), forward then backward."""
        return [v.value.winner for v in (self.forward, self.backward) if v.ok and v.value is not None]

    @property
    def outcome(self) -> str | None:
        """The first system's result: win, tie (a tie both ways, or a flip) or loss; None without both verdicts."""
        if not self.ok:
            return None
        fwd, bwd = self.picks
        if fwd != bwd or fwd == PREFER_NEITHER:
            return TIE
        return WIN if fwd == FIRST else LOSS

    @property
    def score(self) -> float | None:
        """The first system's points: 1 for a win, ½ for a tie, 0 for a loss."""
        return {WIN: 1.0, TIE: 0.5, LOSS: 0.0}.get(self.outcome or "")

    @property
    def reason(self) -> str | None:
        """Why there is no result: the failed orders' reasons."""
        failed = [f"{name}: {v.reason}" for name, v in (("A-B order", self.forward), ("B-A order", self.backward))
                  if not v.ok]
        return "; ".join(failed) or None

    def to_json(self) -> dict[str, JsonValue]:
        def order(v: Verdict[PreferenceReply], pick: str | None) -> dict[str, JsonValue]:
            return {"status": v.status, "winner": v.value.winner if v.value else None, "preferred": pick,
                    "reasoning": v.value.reasoning if v.value else None, "reason": v.reason,
                    "call_ids": [*v.call_ids], "cached": v.cached}

        fwd, bwd = self.picks
        return {"item": self.item, "first": self.first, "second": self.second, "outcome": self.outcome,
                "flipped": self.flipped, "trace_id": self.trace_id,
                "orders": {"first_as_a": order(self.forward, fwd), "second_as_a": order(self.backward, bwd)}}


def _relevance_question(prompt: str, a: str, b: str) -> MeaningQuestion[PreferenceReply]:
    """The offline judge's pairwise question: which answer is more relevant to the prompt."""

    def answer(scores: list[RelevanceScore]) -> PreferenceReply:
        ra, rb = scores[0].score, scores[1].score
        winner = PREFER_NEITHER if abs(ra - rb) < RELEVANCE_MARGIN else PREFER_A if ra > rb else PREFER_B
        return PreferenceReply(winner, f"relevance to the prompt: A {ra:.3f}, B {rb:.3f}")

    return MeaningQuestion(lambda judge: judge.relevance(prompt, [a, b]), answer)


class PairwiseJudge:
    """A judge of answer pairs: the ``pairwise_judge`` template (or a user's with the same
    placeholders), its JSON schema, and one re-ask on an unreadable reply."""

    def __init__(self, model: Model, template: PromptTemplate | None = None, *, criteria: str | None = None,
                 temperature: float = 0.0, seed: int | None = 0, max_tokens: int = 1024, reask: bool = True,
                 timeout: float | None = None, prompts: PromptSource | None = None) -> None:
        tmpl = (template or builtin(PAIRWISE_TEMPLATE)).check(PAIRWISE_PLACEHOLDERS,
                                                               required={"question", "answer_a", "answer_b"})
        self.criteria = criteria or DEFAULT_CRITERIA
        self.timeout = timeout
        self.judge = Judge(model, tmpl, purpose=PURPOSE, format_hint=FORMAT_HINT, schema=SCHEMA,
                           schema_name="pairwise_verdict", temperature=temperature, seed=seed,
                           max_tokens=max_tokens, reask=reask, prompts=prompts)

    @property
    def model(self) -> Model:
        return self.judge.model

    @property
    def name(self) -> str:
        return self.judge.model.name

    @property
    def template(self) -> PromptTemplate:
        return self.judge.template

    async def order(self, prompt: str, a: str, b: str, *, trace_id: str | None = None,
                    sample: int | None = None) -> Verdict[PreferenceReply]:
        """One order: ``a`` shown as answer A, ``b`` as answer B."""
        variables = {"criteria": self.criteria, "question": quote("question", prompt),
                     "answer_a": quote("answer", a, PREFER_A), "answer_b": quote("answer", b, PREFER_B)}
        return await self.judge.verdict(variables, parse_preference, trace_id=trace_id, timeout=self.timeout,
                                        meaning=_relevance_question(prompt, a, b), sample=sample)

    async def compare(self, item: str, prompt: str, first: Contestant, second: Contestant, *,
                      trace_id: str | None = None, sample: int | None = None) -> PairJudgement:
        """Both orders at once (the endpoint's limiter bounds them); one trace for the pair."""
        trace = trace_id or new_id()
        forward, backward = await asyncio.gather(
            self.order(prompt, first.answer, second.answer, trace_id=trace, sample=sample),
            self.order(prompt, second.answer, first.answer, trace_id=trace, sample=sample))
        return PairJudgement(item, first.system, second.system, forward, backward, trace)
