from jurist.config import Settings
from jurist.errors import ModelUnavailable
from jurist.judges import FAILED, OK, Judge, builtin, parse_score
from jurist.models import resolve_model, script
from jurist.store import Store


def make_judge(name, store=None, **settings):
    s = Settings.load(max_retries=0, **settings)
    model = resolve_model(f"scripted/{name}", s, sink=store)
    return Judge(model, builtin("rubric_judge"), purpose="rubric_judge", format_hint="SCORE: <n>")


VARS = dict(rubric_name="R", rubric_description="D", scoring_criteria="C", rubric_items="", chat_session="S",
            score_min="1", score_max="5")


def parse(text):
    return parse_score(text, (1, 5))


async def test_reask_shows_the_parse_error_then_succeeds():
    adapter = script("j", "SCORE: 9", "SCORE: 4\nREASONING: better")
    v = await make_judge("j").verdict(VARS, parse)
    assert v.status == OK and v.value.score == 4 and v.reasked
    reask = adapter.requests[1].messages
    assert reask[1] == {"role": "assistant", "content": "SCORE: 9"}
    assert "outside the scale 1-5" in reask[2]["content"] and "SCORE: <n>" in reask[2]["content"]


async def test_two_bad_replies_give_evaluation_failed_with_reason():
    script("j", "no idea", "")
    v = await make_judge("j").verdict(VARS, parse)
    assert v.status == FAILED and v.value is None
    assert "could not be parsed after one re-ask" in v.reason and "empty" in v.reason


async def test_model_error_gives_evaluation_failed():
    script("j", ModelUnavailable("server down"))
    v = await make_judge("j").verdict(VARS, parse)
    assert v.status == FAILED and "ModelUnavailable: server down" in v.reason


async def test_judge_calls_are_recorded_with_parse_outcome(tmp_path):
    script("j", "SCORE: 0", '{"score": 3, "reasoning": "fine"}')
    store = Store(f"sqlite:///{tmp_path}/j.db")
    v = await make_judge("j", store).verdict(VARS, parse, trace_id="t1")
    store.flush()
    calls = store.calls(limit=None, trace_id="t1")
    store.close()
    assert v.ok and len(calls) == 2
    by_status = {c["status"]: c for c in calls}
    assert by_status["parse_error"]["error"].startswith("score 0 is outside")
    ok = by_status["ok"]
    assert ok["parsed"] == {"score": 3.0, "reasoning": "fine"} or ok["parsed"]["score"] == 3.0
    assert ok["params"]["temperature"] == 0.0 and ok["params"]["seed"] == 0
    assert ok["template_name"] == "rubric_judge" and len(ok["template_hash"]) == 16
