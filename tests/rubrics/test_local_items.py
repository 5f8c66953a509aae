"""Item-based rubrics scored by the real offline judge (local/minilm)."""

import pytest

from jurist.rubrics import evaluate
from jurist.rubrics.models import Rubric, RubricSet
from jurist.rubrics.sessions import ChatSession, Message

pytestmark = pytest.mark.slow

RUBRICS = RubricSet(rubrics=[
    Rubric(id="photo", name="Photosynthesis", items=[
        {"id": "sunlight", "text": "Plants use energy from sunlight to make sugar.", "points": 2},
        {"id": "oxygen", "text": "Photosynthesis releases oxygen.", "points": 1},
        {"id": "soil", "text": "Plants get their food by eating soil.", "points": -2},
    ]),
    Rubric(id="free", name="Free-form", scoring_criteria="1 = poor, 5 = great"),
])


def session(*assistant_turns):
    msgs = [Message("user", "How do plants make food?")]
    msgs += [Message("assistant", t) for t in assistant_turns]
    return ChatSession("s", msgs)


async def test_positive_and_negative_items_with_the_local_judge():
    good = await evaluate(RUBRICS, session(
        "Plants capture energy from sunlight and use it to build sugar from water and carbon dioxide.",
        "As a by-product, photosynthesis gives off oxygen into the air."), judge="local/minilm")
    photo, free = good["rubric_scores"]
    assert [i["met"] for i in photo["items"]] == [True, True, False]
    assert photo["score"] == 5.0 and photo["judge_model"] == "local/minilm"
    assert all(0.5 <= i["confidence"] <= 1.0 for i in photo["items"])
    assert free["status"] == "evaluation_failed"
    assert free["reasoning"] == "the local judge cannot score free-form rubric free; configure an LLM judge"
    assert good["summary"]["total_score"] == 5.0  # over the scored rubric only

    bad = await evaluate(RUBRICS, session(
        "Plants feed by eating the soil around their roots.",
        "They use sunlight to make sugar, too."), judge="local/minilm")
    photo = bad["rubric_scores"][0]
    assert [i["met"] for i in photo["items"]] == [True, False, True]
    assert photo["score"] == 1.0  # (2 - 2) / 3 possible -> the bottom of the scale
