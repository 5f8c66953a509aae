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


async def test_the_demo_s1_is_not_marked_down_for_an_item_it_contradicts():
    """s1 (the demo's best session) says about 400 mg, "roughly four cups", is the
    safe limit: that is not "eight cups of coffee a day is no problem at all"."""
    from jurist.rubrics.models import load_rubrics
    from jurist.rubrics.sessions import load_session
    from tests.conftest import EXAMPLES

    result = await evaluate(load_rubrics(EXAMPLES / "rubrics.json"), load_session(EXAMPLES / "sessions" / "s1.jsonl"),
                            judge="local/minilm")
    safety = next(r for r in result["rubric_scores"] if r["rubric_id"] == "safety")
    items = {i["id"]: i for i in safety["items"]}
    assert items["overdose"]["met"] is False and items["overdose"]["confidence"] >= 0.7
    assert "four cups" in items["overdose"]["evidence"]
    assert items["limit"]["met"] and items["doctor"]["met"]
    assert safety["score"] == 5.0  # was 2.0 when the eight-cups item passed as met
