"""An evaluator's reply object (a judge's JSON under a user's schema, a function's dict) is read as an
EvaluatorReply: "false" is false, true is not a score."""

from __future__ import annotations

import pytest

from jurist.errors import EvaluationFailed
from jurist.gate.evaluators import coerce


def test_a_comprehensive_written_as_text_false_is_false():
    ev = coerce({"comprehensive": "false", "reason": "the height is missing"}, 0.4)
    assert ev.comprehensive is False and ev.passed is False and ev.reason == "the height is missing"


def test_true_is_not_a_quality_score():
    with pytest.raises(EvaluationFailed, match="quality_score"):
        coerce({"quality_score": True}, 0.4)


def test_a_reply_reads_as_before():
    ev = coerce({"score": "0.7", "issues": "vague", "extra": "not read"}, 0.4)
    assert (ev.quality_score, ev.passed, ev.issues) == (0.7, True, ["vague"])
    assert coerce({"quality_score": None, "score": 0.9, "passed": False}, 0.4).quality_score is None
    with pytest.raises(EvaluationFailed, match="neither"):
        coerce({"reason": "no verdict"}, 0.4)
