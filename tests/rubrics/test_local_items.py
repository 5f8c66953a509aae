"""Item-based rubrics scored by the real offline judge (local/minilm)."""

import pytest

from jurist.rubrics import evaluate
from jurist.rubrics.judging import item_score
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


async def test_an_item_the_judge_cannot_decide_leaves_the_others_reported_and_a_score_range():
    """One item inside the band: the rubric is not scored (no guess), but its result says which
    items were decided, which was not (met null), and where the score lies."""
    from jurist.config import Settings
    from jurist.judges import builtin
    from jurist.models.local import LocalJudge, LocalThresholds
    from jurist.rubrics import RubricJudge, SessionEvaluator
    from jurist.runtime import Runtime

    chat = session("Plants capture energy from sunlight and use it to build sugar from water and carbon dioxide.",
                   "As a by-product, photosynthesis gives off oxygen into the air.")
    photo = RUBRICS.rubrics[0]
    items = photo.items or []
    deciding = LocalJudge(LocalThresholds(band={"expresses": 0}))
    threshold = deciding.thresholds.expresses
    checks = await deciding.expresses(chat.text_of("assistant"), [i.text for i in items])
    distance = sorted((abs((c.confidence if c.expressed else 1 - c.confidence) - threshold), i.id)
                      for i, c in zip(items, checks))
    (near, near_id), (second, _) = distance[0], distance[1]
    assert second - near > 2e-4, distance  # one item clearly the closest to the threshold
    band = (near + second) / 2

    runtime = Runtime(Settings.load(), open_store=False)
    model = runtime.wrap(LocalJudge(LocalThresholds(band={"expresses": band})))
    evaluator = SessionEvaluator(RubricSet(rubrics=[photo]),
                                 RubricJudge(model, builtin("rubric_judge"), builtin("rubric_items_judge")))
    [result] = (await evaluator.evaluate(chat)).to_json()["rubric_scores"]
    assert result["status"] == "evaluation_failed" and result["score"] is None
    assert result["reasoning"].startswith("uncertain: the local judge cannot decide whether the text expresses")
    reported = {i["id"]: i for i in result["items"]}
    assert reported[near_id]["met"] is None and reported[near_id]["reasoning"].startswith("undecided:")
    for item, check in zip(items, checks):
        if item.id != near_id:
            assert reported[item.id]["met"] is check.expressed and reported[item.id]["confidence"] == check.confidence
    decided = {i.id: c.expressed for i, c in zip(items, checks) if i.id != near_id}
    undecided = next(i for i in items if i.id == near_id)
    low, high = result["score_range"]
    scored = [item_score(photo, {**decided, near_id: met}, (1.0, 5.0)) for met in (False, True)]
    assert [low, high] == sorted(scored) and (low < high) == (undecided.points != 0)
    await runtime.aclose()
