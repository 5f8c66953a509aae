"""The trace page's rubric section shows each rubric's status by result.json's names."""

from jurist.rubrics.results import ResultSummary, RubricResult, RubricScore
from jurist.server.dashboard_views import rubric_section


def test_a_failed_rubric_shows_as_evaluation_failed() -> None:
    scores = [RubricScore(rubric_id="a", rubric_name="A", score=4.0, max_score=5.0, status="ok"),
              RubricScore(rubric_id="b", rubric_name="B", score=None, max_score=5.0, status="failed", reasoning="bad")]
    result = RubricResult(session_id="s", evaluated_at="2026-01-01T00:00:00Z", status="partial", rubric_scores=scores,
                          summary=ResultSummary(total_score=4.0, max_score=5.0, percentage=80.0, rubrics_evaluated=1,
                                                rubrics_failed=1))
    assert [r.status for r in rubric_section(result).rubrics] == ["scored", "evaluation_failed"]
