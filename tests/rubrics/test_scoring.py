"""Scoring a session: weighted totals over scored rubrics, item rubrics, failures."""

import asyncio
import json

from jurist.config import Settings
from jurist.errors import ModelTimeout
from jurist.models import script
from jurist.models.base import StatementCheck
from jurist.judges import builtin
from jurist.rubrics import RubricJudge, SessionEvaluator, build_judge, evaluate, load_rubrics
from jurist.runtime import Runtime
from jurist.rubrics.models import Rubric, RubricSet
from jurist.rubrics.sessions import ChatSession, Message

from tests.conftest import EXAMPLES
from tests.quoting import prompt_text

SESSION = ChatSession("s", [Message("user", "why?"), Message("assistant", "Because caffeine blocks adenosine.")])


def rset(*rubrics, scale=(1, 5)):
    return RubricSet(rubrics=[Rubric(**r) for r in rubrics], scale=scale)


def by_rubric(request_text: str, replies: dict[str, str]) -> str:
    for name, reply in replies.items():
        if f"## Rubric: {name}" in request_text:
            return reply
    raise AssertionError("unknown rubric in prompt")


async def test_weighted_total_is_over_scored_rubrics_only():
    rs = rset(
        dict(id="a", name="A", scoring_criteria="c", weight=2),
        dict(id="b", name="B", scoring_criteria="c", weight=1),
        dict(id="c", name="C", scoring_criteria="c", weight=5),
    )
    replies = {"A": "SCORE: 5\nREASONING: great", "B": "SCORE: 2\nREASONING: meh", "C": "nonsense"}
    script("j", default=lambda req: by_rubric(prompt_text(req.messages), replies))
    result = await evaluate(rs, SESSION, judge="scripted/j", settings=Settings.load(max_retries=0))
    s = result["summary"]
    assert s["total_score"] == 4.0  # (5*2 + 2*1) / 3; C failed and is left out
    assert s["percentage"] == 80.0 and s["rubrics_evaluated"] == 2 and s["rubrics_failed"] == 1
    c = result["rubric_scores"][2]
    assert c["status"] == "evaluation_failed" and c["score"] is None
    assert "after one re-ask" in c["reasoning"]
    assert result["status"] == "partial"
    json.dumps(result, allow_nan=False)  # never a NaN


async def test_all_failed_gives_null_total_not_zero():
    rs = rset(dict(id="a", name="A", scoring_criteria="c"))
    script("j", default="garbage")
    result = await evaluate(rs, SESSION, judge="scripted/j", settings=Settings.load(max_retries=0))
    assert result["status"] == "failed"
    assert result["summary"]["total_score"] is None and result["summary"]["percentage"] is None


async def test_result_has_the_notes_shape():
    script("j", default='{"score": 4, "reasoning": "ok"}')
    result = await evaluate(EXAMPLES / "rubrics_freeform.json", EXAMPLES / "sessions" / "s1.jsonl",
                            judge="scripted/j")
    assert {"version", "session_id", "evaluated_at", "rubrics_version", "rubric_scores", "summary"} <= set(result)
    assert result["evaluated_at"].endswith("Z")
    rs0 = result["rubric_scores"][0]
    assert {"rubric_id", "rubric_name", "score", "max_score", "reasoning", "status", "judge_model", "tokens",
            "latency_ms"} <= set(rs0)
    assert set(result["summary"]) >= {"total_score", "max_score", "percentage", "rubrics_evaluated"}


async def test_item_rubric_with_llm_judge_scores_points_earned_over_possible():
    rs = rset(dict(id="r", name="R", items=[
        {"id": "a", "text": "mentions adenosine", "points": 3},
        {"id": "b", "text": "mentions half-life", "points": 1},
        {"id": "bad", "text": "claims it has calories", "points": -2},
    ]))
    adapter = script("j", default=json.dumps({"items": [
        {"id": "a", "met": True, "reasoning": "yes"}, {"id": "b", "met": False, "reasoning": "no"},
        {"id": "bad", "met": True, "reasoning": "it did"}]}))
    result = await evaluate(rs, SESSION, judge="scripted/j")
    r = result["rubric_scores"][0]
    # earned 3 - 2 = 1 of 4 possible -> 0.25 of the way from 1 to 5
    assert r["score"] == 2.0 and [i["met"] for i in r["items"]] == [True, False, True]
    prompt = prompt_text(adapter.requests[0].messages)
    assert "[bad] (-2 points) claims it has calories" in prompt
    assert adapter.requests[0].response_schema["required"] == ["items"]


async def test_negative_items_never_push_below_the_scale():
    rs = rset(dict(id="r", name="R", items=[{"id": "a", "text": "x", "points": 1}, {"id": "b", "text": "y", "points": -5}]))
    script("j", default='{"items": [{"id": "a", "met": false}, {"id": "b", "met": true}]}')
    result = await evaluate(rs, SESSION, judge="scripted/j")
    assert result["rubric_scores"][0]["score"] == 1.0


class FakeMeaning:
    """Stands in for the embedding model: says yes to statements containing a word."""

    name = "local/minilm"

    def __init__(self, word):
        self.word = word

    async def expresses(self, text, statements):
        return [StatementCheck(s, self.word in s, 0.9, self.name, evidence=text[:20]) for s in statements]


async def test_local_judge_refuses_free_form_rubrics_and_scores_items(tmp_path):
    rs = rset(dict(id="free", name="Free", scoring_criteria="1-5"),
              dict(id="items", name="Items", items=[{"id": "a", "text": "adenosine", "points": 1},
                                                    {"id": "b", "text": "other", "points": 1}]))
    model = Runtime(Settings.load(), open_store=False).wrap(FakeMeaning("adenosine"))
    ev = SessionEvaluator(rs, RubricJudge(model, builtin("rubric_judge"), builtin("rubric_items_judge")))
    result = (await ev.evaluate(SESSION)).to_json()  # result.json as data
    free, items = result["rubric_scores"]
    assert free["status"] == "evaluation_failed"
    assert free["reasoning"] == "the local judge cannot score free-form rubric free; configure an LLM judge"
    assert items["score"] == 3.0 and items["judge_model"] == "local/minilm"
    assert result["summary"]["total_score"] == 3.0


async def test_per_rubric_timeout():
    rs = rset(dict(id="a", name="A", scoring_criteria="c"))
    adapter = script("j", default="SCORE: 3")
    adapter.delay = 2
    s = Settings.load(rubric_timeout=0.2, timeout=30)
    result = await evaluate(rs, SESSION, judge="scripted/j", settings=s)
    assert result["rubric_scores"][0]["reasoning"] == "timed out after 0.2 s"


async def test_model_errors_become_evaluation_failed():
    rs = rset(dict(id="a", name="A", scoring_criteria="c"))
    script("j", ModelTimeout("no answer"))
    result = await evaluate(rs, SESSION, judge="scripted/j", settings=Settings.load(max_retries=0))
    assert result["rubric_scores"][0]["reasoning"] == "ModelTimeout: no answer"


async def test_rubrics_of_a_session_are_judged_in_parallel():
    rs = rset(*[dict(id=f"r{i}", name=f"R{i}", scoring_criteria="c") for i in range(5)])
    adapter = script("j", default="SCORE: 3")
    adapter.delay = 0.2
    loop = asyncio.get_running_loop()
    start = loop.time()
    await evaluate(rs, SESSION, judge="scripted/j")
    assert loop.time() - start < 0.6


async def test_truncation_is_reported(tmp_path):
    long = ChatSession("long", [Message("user", "x" * 5000)])
    script("j", default="SCORE: 3")
    result = await evaluate(rset(dict(id="a", name="A", scoring_criteria="c")), long, judge="scripted/j",
                            settings=Settings.load(session_char_budget=1000))
    assert result["truncated"]["omitted_chars"] > 3000


def test_sync_convenience_outside_and_inside_a_running_loop():
    import jurist

    script("j", default="SCORE: 4")
    rs = rset(dict(id="a", name="A", scoring_criteria="c"))
    assert jurist.evaluate_sync(rs, SESSION, judge="scripted/j")["summary"]["total_score"] == 4.0

    async def inside():
        return jurist.evaluate_sync(rs, SESSION, judge="scripted/j")

    assert asyncio.run(inside())["summary"]["total_score"] == 4.0


def test_unknown_template_placeholder_fails_before_any_call(tmp_path):
    import pytest

    from jurist.errors import InputError

    adapter = script("j", default="SCORE: 4")
    t = tmp_path / "t.txt"
    t.write_text("{rubric_name} {conversation}")
    with pytest.raises(InputError, match="conversation"):
        build_judge(Settings.load(), None, judge="scripted/j", template=t)
    assert adapter.requests == []
    assert load_rubrics(EXAMPLES / "rubrics.json")


async def test_a_call_cut_by_the_rubric_timeout_is_still_on_record(tmp_path):
    from jurist.store import Store

    adapter = script("j", default="SCORE: 3")
    adapter.delay = 2
    s = Settings.load(rubric_timeout=0.2, timeout=30)
    store = Store(s.database)
    await evaluate(rset(dict(id="a", name="A", scoring_criteria="c")), SESSION, judge="scripted/j", settings=s,
                   store=store)
    store.flush()
    [call] = store.calls(limit=None)
    store.close()
    assert call["status"] == "error" and "time limit" in call["error"]
