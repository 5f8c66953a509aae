"""Probability-weighted scores: the expectation over the scale's tokens at the score token."""

import math

import pytest

from jurist.judges.parsing import parse_score, score_span
from jurist.judges.weighting import LOGPROBS, WeightedReply, weigh, weighted_score
from jurist.models.base import TokenLogprob

SCALE = (1.0, 5.0)


def tokens(*parts: str, at: int, top: dict[str, float]) -> list[TokenLogprob]:
    """A reply spelled by ``parts``; the token at ``at`` has the alternatives ``top``."""
    return [TokenLogprob(p, top.get(p, 0.0) if i == at else 0.0, tuple(top.items()) if i == at else ())
            for i, p in enumerate(parts)]


def test_json_score_expectation_by_hand() -> None:
    # p(4) = 0.6, p(3) = 0.3, p(5) = 0.1: 4*0.6 + 3*0.3 + 5*0.1 = 2.4 + 0.9 + 0.5 = 3.8
    reply = tokens('{"', "score", '":', " ", "4", ', "reasoning": "fine"}', at=4,
                   top={"4": math.log(0.6), "3": math.log(0.3), "5": math.log(0.1)})
    assert weighted_score(reply, 4.0, SCALE) == (3.8, None)


def test_renormalised_over_the_scale_tokens_only() -> None:
    # "0" and "7" are off the 1-5 scale and '"' is no number: only p(2) = 0.2 and p(3) = 0.2 count,
    # renormalised to 0.5 each: 2*0.5 + 3*0.5 = 2.5
    reply = tokens("SCORE: ", "2", "\nREASONING: meh", at=1,
                   top={"2": math.log(0.2), "0": math.log(0.3), "3": math.log(0.2), "7": math.log(0.1),
                        '"': math.log(0.2)})
    assert weighted_score(reply, 2.0, SCALE) == (2.5, None)


def test_tokens_spelling_the_same_number_add_up() -> None:
    # p(" 5") + p("5") = 0.25 + 0.25 = 0.5 for 5, p(" 1") = 0.5 for 1: 5*0.5 + 1*0.5 = 3.0
    reply = tokens('{"score":', " 5", "}", at=1, top={" 5": math.log(0.25), "5": math.log(0.25),
                                                      " 1": math.log(0.5)})
    assert weighted_score(reply, 5.0, SCALE) == (3.0, None)


def test_the_chosen_token_counts_even_when_outside_the_top_list() -> None:
    # constrained decoding may pick a token the raw distribution ranks below the top k:
    # p(2) = 0.1 (the chosen token's own logprob) and p(4) = 0.3: (2*0.1 + 4*0.3) / 0.4 = 3.5
    reply = [TokenLogprob("SCORE: ", 0.0), TokenLogprob("2", math.log(0.1), (("4", math.log(0.3)),))]
    assert weighted_score(reply, 2.0, SCALE) == (3.5, None)


def test_a_ten_point_scale() -> None:
    # p(9) = 0.5, p(10) = 0.5 on 1-10: 9.5
    reply = tokens('{"score": ', "9", "}", at=1, top={"9": math.log(0.5), "10": math.log(0.5)})
    assert weighted_score(reply, 9.0, (1.0, 10.0)) == (9.5, None)


@pytest.mark.parametrize("reply, score, why", [
    (None, 4.0, "returned none"),
    ([TokenLogprob("fine", 0.0)], 4.0, "not found"),
    (tokens("SCORE: ", "3", at=1, top={"3": 0.0}), 4.0, "hold the score 3, not 4"),
    (tokens("SCORE: ", "1", "0", at=1, top={"1": 0.0}), 10.0, "not one token of its own"),
    (tokens("SCORE: ", "3", ".", "5", at=1, top={"3": 0.0}), 3.5, "not one token of its own"),
    ([TokenLogprob("SCORE: ", 0.0), TokenLogprob("4", 0.0, (("x", 0.0),))], 4.0, None),
])
def test_unavailable_says_why(reply, score, why) -> None:
    value, unavailable = weighted_score(reply, score, SCALE)
    if why is None:  # the chosen token alone: a certain 4
        assert (value, unavailable) == (4.0, None)
    else:
        assert value is None and unavailable.startswith("logprobs unavailable: ") and why in unavailable


def test_only_numbers_on_the_scale_count() -> None:
    reply = [TokenLogprob("SCORE: ", 0.0), TokenLogprob("9", 0.0, (("8", -1.0),))]
    value, _ = weighted_score(reply, 9.0, (0.0, 100.0))  # p(9) = 1, p(8) = e^-1, renormalised
    assert value == round((9 * 1.0 + 8 * math.exp(-1.0)) / (1.0 + math.exp(-1.0)), 4)
    value, unavailable = weighted_score(reply, 9.0, (10.0, 20.0))
    assert value is None and "no number of the scale 10-20" in unavailable


def test_score_span_finds_the_number_parse_score_reads() -> None:
    text = 'I think {"score": 4, "reasoning": "SCORE: 2 is wrong"}'
    start, end = score_span(text)
    assert text[start:end] == "4" and parse_score(text, SCALE).score == 4.0
    line = "REASONING: ok\nSCORE: 3"
    start, end = score_span(line)
    assert line[start:end] == "3" and parse_score(line, SCALE).score == 3.0


def test_weigh_keeps_the_plain_score_beside_the_weighted_one() -> None:
    reply = parse_score('{"score": 4, "reasoning": "r"}', SCALE)
    weighted = weigh(reply, tokens('{"score": ', "4", ', "reasoning": "r"}', at=1,
                                   top={"4": math.log(0.5), "5": math.log(0.5)}), SCALE)
    assert (weighted.score, weighted.weighted_score, weighted.score_mode, weighted.logprobs_unavailable) == (
        4.0, 4.5, LOGPROBS, None)
    bare = weigh(reply, None, SCALE)
    assert (bare.score, bare.weighted_score) == (4.0, None) and "returned none" in bare.logprobs_unavailable
    assert isinstance(bare, WeightedReply) and type(reply) is not WeightedReply  # a plain reply stays plain
