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
    assert reask[1].openai() == {"role": "assistant", "content": "SCORE: 9"}
    assert "outside the scale 1-5" in reask[2].text and "SCORE: <n>" in reask[2].text


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


async def test_a_huge_reply_is_cut_counted_as_a_parse_failure_and_never_sent_back_whole(provider, tmp_path):
    from jurist.judges.judge import REASK_QUOTE_CHARS
    from jurist.testing import Reply

    huge = "SCORE: 4 " + "x" * 1_000_000
    provider.script(Reply(text=huge), Reply(text=huge))
    s = Settings.load(providers={"fake": {"type": "openai", "base_url": provider.base_url, "api_key": "k"}},
                      max_retries=0, max_reply_chars=20_000)
    store = Store(f"sqlite:///{tmp_path}/j.db")
    model = resolve_model("fake/judge", s, sink=store)
    judge = Judge(model, builtin("rubric_judge"), purpose="rubric_judge", format_hint="SCORE: <n>")
    v = await judge.verdict(VARS, parse, trace_id="t1")
    await model.aclose()
    store.flush()
    calls = store.calls(limit=None, trace_id="t1")
    store.close()
    assert v.status == FAILED and v.reasked
    assert "1,000,009 characters, over the limit of 20,000 (max_reply_chars)" in v.reason
    reask = provider.requests[1]["json"]["messages"]
    assert reask[1]["role"] == "assistant" and reask[1]["content"].startswith("SCORE: 4 xxx")
    assert len(reask[1]["content"]) < REASK_QUOTE_CHARS + 100  # a bounded prefix, not the reply
    assert "over the limit of 20,000 (max_reply_chars)" in reask[2]["content"]
    assert sum(len(m["content"]) for m in reask) < len(reask[0]["content"]) + REASK_QUOTE_CHARS + 1_000
    assert [c["status"] for c in calls] == ["parse_error", "parse_error"]
    for c in calls:  # stored cut, with the marker
        assert len(c["response_text"]) < 20_100 and c["response_text"].endswith("more characters cut]")
        assert "max_reply_chars" in c["error"]


async def test_a_reply_within_the_limit_is_parsed_as_before(provider):
    from jurist.testing import Reply

    provider.script(Reply(text="SCORE: 3\nREASONING: " + "y" * 5_000))
    s = Settings.load(providers={"fake": {"type": "openai", "base_url": provider.base_url, "api_key": "k"}},
                      max_retries=0, max_reply_chars=6_000)
    model = resolve_model("fake/judge", s)
    v = await Judge(model, builtin("rubric_judge"), purpose="rubric_judge", format_hint="SCORE: <n>").verdict(
        VARS, parse)
    await model.aclose()
    assert v.ok and v.value.score == 3 and not v.reasked
