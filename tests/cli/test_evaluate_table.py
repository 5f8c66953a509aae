"""jurist evaluate's table is printed from the RubricResult's attributes."""

import io

from rich.console import Console

from jurist.cli.evaluate import result_table
from jurist.rubrics.results import RubricResult


def _shown(result: RubricResult) -> str:
    console = Console(record=True, width=160, file=io.StringIO())
    console.print(result_table(result))
    return console.export_text()


def test_table_shows_scores_statuses_and_total() -> None:
    result = RubricResult.model_validate({
        "session_id": "s1", "evaluated_at": "2026-01-01T00:00:00Z", "status": "partial",
        "rubric_scores": [
            {"rubric_id": "a", "rubric_name": "Alpha", "score": 4.0, "max_score": 5.0, "reasoning": "fine",
             "status": "scored"},
            {"rubric_id": "b", "rubric_name": "Beta", "score": 3.0, "max_score": 5.0, "reasoning": "w",
             "status": "scored", "weighted_score": 3.4},
            {"rubric_id": "c", "rubric_name": "Gamma", "score": 2.0, "max_score": 5.0, "reasoning": "l",
             "status": "scored", "logprobs_unavailable": "none given"},
            {"rubric_id": "d", "rubric_name": "Delta", "score": None, "max_score": 5.0, "reasoning": None,
             "status": "evaluation_failed"}],
        "summary": {"total_score": 9.0, "max_score": 15.0, "percentage": 60.0, "rubrics_evaluated": 3,
                    "rubrics_failed": 1}})
    text = _shown(result)
    assert "session s1" in text
    assert "4/5" in text and "3.4/5 (plain 3)" in text and "2/5 (logprobs unavailable)" in text
    assert "scored" in text and "evaluation_failed" in text and "—" in text
    assert "total 9/15 (60%); 3 scored, 1 failed" in text
