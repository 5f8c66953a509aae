"""Probability-weighted scores, the G-Eval method (Liu et al., 2023, "G-Eval: NLG
Evaluation using GPT-4 with Better Human Alignment").

A judge writes one number on a scale; an endpoint that returns ``top_logprobs``
(OpenAI, vLLM, llama.cpp) also says how likely each other number was at that
token. The weighted score is the expectation over the scale's integers among
those alternatives, renormalised over them::

    weighted = sum(v * p(v)) / sum(p(v))     for the integers v of the scale

Tokens that spell the same number (``"4"``, ``" 4"``) add up. Where that cannot
be computed (no logprobs came back, the score spans several tokens, no scale
number among the alternatives) the reply says why, and the plain score stands:
never a silent fallback.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from jurist.judges.parsing import ScoreReply, score_span
from jurist.models.base import TOP_LOGPROBS, TokenLogprob

PLAIN, LOGPROBS = "plain", "logprobs"
SCORE_MODES = (PLAIN, LOGPROBS)

_INTEGER = re.compile(r'\s*"?(-?\d+)"?\s*')


def weighted_score(tokens: list[TokenLogprob] | None, score: float,
                   scale: tuple[float, float]) -> tuple[float | None, str | None]:
    """The expectation over the scale's integers at the score's token, or ``None`` and
    why not (``logprobs unavailable: ...``). ``score`` is the plain score the reply was
    parsed to; the token the number is read from must spell it whole."""
    if tokens is None:
        return None, "logprobs unavailable: the endpoint returned none for this reply"
    text = "".join(t.token for t in tokens)
    span = score_span(text)
    if span is None:
        return None, "logprobs unavailable: the score was not found in the reply's tokens"
    number = text[span[0]:span[1]]
    if float(number) != score:
        return None, f"logprobs unavailable: the reply's tokens hold the score {number}, not {score:g}"
    offset, index = 0, 0
    while offset + len(tokens[index].token) <= span[0]:
        offset += len(tokens[index].token)
        index += 1
    token = tokens[index]
    whole = _INTEGER.fullmatch(token.token)
    if whole is None or whole.group(1) != number:
        return None, (f"logprobs unavailable: the score {number} is not one token of its own "
                      f"(the token is {token.token!r})")
    lo, hi = scale
    alternatives = dict(token.top)
    alternatives.setdefault(token.token, token.logprob)
    mass: dict[int, float] = {}
    for alt, logprob in alternatives.items():
        m = _INTEGER.fullmatch(alt)
        if m is not None and lo <= int(m.group(1)) <= hi:
            mass[int(m.group(1))] = mass.get(int(m.group(1)), 0.0) + math.exp(logprob)
    total = sum(mass.values())
    if total <= 0.0:
        return None, f"logprobs unavailable: no number of the scale {lo:g}-{hi:g} among the alternatives"
    return round(sum(v * p for v, p in mass.items()) / total, 4), None


@dataclass
class WeightedReply(ScoreReply):
    """A score reply under score mode ``logprobs``: the plain ``score``, and beside it the
    expectation over the scale's tokens, or why there is none (the plain score is then used)."""

    score_mode: str = LOGPROBS
    weighted_score: float | None = None
    logprobs_unavailable: str | None = None


def weigh(reply: ScoreReply, tokens: list[TokenLogprob] | None, scale: tuple[float, float]) -> WeightedReply:
    """``reply`` with its weighted score, or why there is none."""
    value, unavailable = weighted_score(tokens, reply.score, scale)
    return WeightedReply(reply.score, reply.reasoning, weighted_score=value, logprobs_unavailable=unavailable)


__all__ = ["LOGPROBS", "PLAIN", "SCORE_MODES", "TOP_LOGPROBS", "WeightedReply", "weigh", "weighted_score"]
