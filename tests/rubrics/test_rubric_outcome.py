"""A rubric's outcome is the RubricScore result.json writes: one model, the outcome
vocabulary in memory, result.json's documented names in the file."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from jurist.config import Settings
from jurist.models import script
from jurist.rubrics import RubricScore, evaluate
from jurist.rubrics.models import Rubric, RubricSet
from jurist.rubrics.sessions import parse_session

RUBRICS = RubricSet(rubrics=[Rubric(id="a", name="A", scoring_criteria="c"), Rubric(id="b", name="B", scoring_criteria="c")])


def entry(status: str) -> dict[str, object]:
    return {"rubric_id": "a", "rubric_name": "A", "score": None, "max_score": 5.0, "reasoning": "x", "status": status}


def test_status_is_the_outcome_vocabulary_read_and_written_by_the_files_names() -> None:
    failed = RubricScore.model_validate(entry("evaluation_failed"))
    assert failed.status == "failed" and failed.to_json()["status"] == "evaluation_failed"
    assert RubricScore.model_validate({**entry("scored"), "score": 4.0}).status == "ok"
    assert RubricScore.model_validate(entry("failed")).to_json()["status"] == "evaluation_failed"
    with pytest.raises(ValidationError):
        RubricScore.model_validate(entry("error"))  # not a status


async def test_the_judges_outcome_is_the_result_files_entry(tmp_path) -> None:
    script("j", default=lambda req: "SCORE: 9" if "## Rubric: B" in json.dumps(
        [getattr(m, "content", None) or (m.get("content") if isinstance(m, dict) else "") for m in req.messages],
        default=str) else "SCORE: 4\nREASONING: good")
    session = parse_session([json.dumps({"role": "user", "content": "hi"}),
                             json.dumps({"role": "assistant", "content": "hello"})], "s.jsonl", "s")
    result = await evaluate(RUBRICS, session, judge="scripted/j", settings=Settings.load(max_retries=0))
    a, b = result["rubric_scores"]
    assert (a["status"], a["score"], b["status"], b["score"]) == ("scored", 4.0, "evaluation_failed", None)
    assert "template_hash" not in a and "call_ids" not in a  # kept in memory for the score row only
