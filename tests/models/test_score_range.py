"""The one rule for a score with undecided parts (jurist.models.base.ScoreRange), which the gate's
coverage and the research stages both decide by: a verdict stands only when the whole range lies
on one side of the threshold."""

from __future__ import annotations

import pytest

from jurist.models.base import ScoreRange


@pytest.mark.parametrize(("low", "high", "threshold", "verdict"), [
    (0.7, 1.0, 0.7, True),    # the low end reaches the threshold: passes either way
    (0.2, 0.6, 0.7, False),   # the high end stays below it: fails either way
    (0.5, 0.7, 0.7, None),    # the undecided parts could lift it to the threshold
    (0.5, 0.9, 0.7, None),
    (0.4, 0.4, 0.4, True),    # nothing undecided: an ordinary comparison
    (0.39, 0.39, 0.4, False),
])
def test_a_verdict_stands_only_when_the_range_lies_on_one_side(low: float, high: float, threshold: float,
                                                               verdict: bool | None) -> None:
    assert ScoreRange(low, high).verdict(threshold) is verdict


def test_the_end_that_bounds_the_verdict_and_how_it_reads() -> None:
    span = ScoreRange(2 / 3, 1.0)
    assert span.deciding_end(True) == 2 / 3 and span.deciding_end(False) == 1.0
    assert span.describe("quality", 0.4) == "quality lies between 0.6667 and 1 and passes the threshold 0.4 either way"
    assert ScoreRange(0.0, 1 / 3).describe("the overall", 0.5) == (
        "the overall lies between 0 and 0.3333 and fails the threshold 0.5 either way")
