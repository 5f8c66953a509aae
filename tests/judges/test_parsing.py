import pytest

from jurist.errors import JudgeParseError
from jurist.judges import extract_json, parse_items, parse_score

SCALE = (1.0, 5.0)


@pytest.mark.parametrize(
    "text, score, reasoning",
    [
        ('{"score": 4, "reasoning": "clear"}', 4.0, "clear"),
        ('```json\n{"score": 3.5, "reasoning": "ok"}\n```', 3.5, "ok"),
        ('Here is my verdict:\n{"score": 2, "reasoning": "weak"}\nThanks!', 2.0, "weak"),
        ('{"SCORE": "5", "Reasoning": "great"}', 5.0, "great"),
        ("SCORE: 4\nREASONING: The user was clear.\nSecond line.", 4.0, "The user was clear.\nSecond line."),
        ("**SCORE:** 3\n**REASONING:** fine", 3.0, "fine"),
        ("score = 1\nreasoning: poor", 1.0, "poor"),
        ('{"note": {"nested": true}, "score": 4, "reasoning": "x"}', 4.0, "x"),
    ],
)
def test_accepted_formats(text, score, reasoning):
    reply = parse_score(text, SCALE)
    assert reply.score == score
    assert reply.reasoning == reasoning


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "empty"),
        ("   \n", "empty"),
        ('{"score": 7, "reasoning": "too high"}', "outside the scale"),
        ("SCORE: 0\nREASONING: too low", "outside the scale"),
        ('{"score": "great", "reasoning": "x"}', "must be a number"),
        ('{"score": true, "reasoning": "x"}', "must be a number"),
        ('{"score": 4, "reasoning": "trunc', "neither"),
        ("I think it deserves a four.", "neither"),
    ],
)
def test_rejections(text, message):
    with pytest.raises(JudgeParseError, match=message):
        parse_score(text, SCALE)


def test_extract_json_skips_broken_objects():
    assert extract_json('{broken {"a": 1}') == {"a": 1}
    with pytest.raises(JudgeParseError):
        extract_json("[1, 2, 3]")


def test_items_parse_and_ignore_invented_ids():
    text = '{"items": [{"id": "a", "met": true, "reasoning": "yes"}, {"id": "b", "met": "no"}, {"id": "zz", "met": true}]}'
    out = parse_items(text, ["a", "b"])
    assert out["a"].met is True and out["a"].reasoning == "yes"
    assert out["b"].met is False
    assert "zz" not in out


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"items": [{"id": "a", "met": true}]}', "no decision for item"),
        ('{"items": {"a": true}}', "needs an \"items\" list"),
        ('{"items": [{"id": "a", "met": "maybe"}, {"id": "b", "met": true}]}', "must be true or false"),
        ("no json here", "no complete JSON"),
    ],
)
def test_items_rejections(text, message):
    with pytest.raises(JudgeParseError, match=message):
        parse_items(text, ["a", "b"])
