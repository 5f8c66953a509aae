"""The session engine with scripted judge and tutor models."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from fsrs import Card, Rating, Scheduler

from jurist.checklist import OBSERVATION_PREFIX, ChecklistSession, rating_for
from jurist.errors import ConfigError, UsageError
from jurist.models import script
from jurist.store import Store

from .conftest import judge_reply
from tests.quoting import prompt_text


async def new_session(checklist, store, settings, **kw):
    return await ChecklistSession.start(checklist, store=store, settings=settings, learner="ada",
                                        tutor="scripted/tutor", judge="scripted/judge", **kw)


async def test_three_points_in_one_message_are_checked_off_in_that_turn(checklist, store, settings):
    judge = script("judge", judge_reply(("adenosine", 0.95), ("half_life", 0.8), ("tolerance", 0.6),
                                        feedback="Recalled three points."))
    tutor = script("tutor", "Great. What happens when you stop?")
    s = await new_session(checklist, store, settings)
    events: list[dict] = []
    for name in ("user_message", "point_recalled", "assistant_message", "session_complete"):
        s.on(name, events.append)
    r = await s.process_user_message("It blocks adenosine, half-life ~5h, and tolerance via more receptors.")
    assert r.points_recalled_this_turn == ["adenosine", "half_life", "tolerance"]
    assert (r.recalled_count, r.total_points, r.completed) == (3, 5, False)
    assert r.response == "Great. What happens when you stop?"
    assert [e["event"] for e in events] == ["user_message"] + ["point_recalled"] * 3 + ["assistant_message"]
    assert len(judge.requests) == 1 and len(tutor.requests) == 1  # one judge call for all five points
    req = judge.requests[0]
    assert req.temperature == 0.3 and req.max_tokens == 1024
    assert all(f'id="{p.id}"' in prompt_text(req.messages) for p in checklist.points)
    states = {r.point_id: r for r in await store.checklist_points(s.session_id)}
    assert states["tolerance"].status == "recalled" and states["tolerance"].confidence == 0.6
    assert states["withdrawal"].status == "pending"
    # a recalled point is never evaluated again
    script("judge", judge_reply(feedback="nothing new"))
    script("tutor", "ok")
    await s.process_user_message("Again: adenosine receptors are blocked.")
    second = prompt_text(judge.requests[1].messages).split("## Unchecked Recall Points")[1].split("## Recent")[0]
    assert 'id="adenosine"' not in second and 'id="withdrawal"' in second


async def test_zero_recalled(checklist, store, settings):
    script("judge", judge_reply(feedback="No recall points were demonstrated in this message. Talked about tea."))
    script("tutor", "Tell me more.")
    s = await new_session(checklist, store, settings)
    r = await s.process_user_message("I like tea.")
    assert r.points_recalled_this_turn == [] and r.recalled_count == 0
    assert s.last_evaluation.feedback.startswith("No recall points")
    [ev] = await store.checklist_evaluations(s.session_id)
    assert ev.status == "ok" and ev.recalled == {} and len(ev.unchecked) == 5


async def test_imprecise_answer_is_not_counted(checklist, store, settings):
    fb = "User's description of tolerance was close but imprecise — said 'your body adjusts' without upregulation."
    script("judge", judge_reply(feedback=fb))
    tutor = script("tutor", "How exactly does the body adjust?")
    s = await new_session(checklist, store, settings)
    r = await s.process_user_message("Your body adjusts to it over time.")
    assert r.recalled_count == 0
    assert tutor.requests[0].messages[1].openai() == {"role": "system", "content": OBSERVATION_PREFIX + fb}


async def test_feedback_reaches_the_tutor_but_not_the_stored_messages(checklist, store, settings):
    seen = []

    def tutor_reply(request):
        seen.append(request.messages)
        return "Nice. And how long does it last?"

    script("judge", judge_reply(("adenosine", 0.9), feedback="SECRET-FEEDBACK adenosine recalled"))
    script("tutor", tutor_reply)
    s = await new_session(checklist, store, settings)
    await s.process_user_message("It blocks adenosine receptors.")
    assert any("SECRET-FEEDBACK" in m.text and m.role == "system" for m in seen[0])
    assert seen[0][-1].openai() == {"role": "user", "content": "It blocks adenosine receptors."}
    stored = await store.checklist_messages(s.session_id)
    assert [m.role for m in stored] == ["user", "assistant"]
    assert not any("SECRET-FEEDBACK" in m.content for m in stored)
    assert not any("SECRET-FEEDBACK" in m.content for m in s.visible_messages())


async def test_rabbithole_feedback_is_minimal(checklist, store, settings):
    judge = script("judge", judge_reply(("withdrawal", 0.8), feedback="Point withdrawal was recalled."))
    tutor = script("tutor", "mm")
    s = await new_session(checklist, store, settings, mode="rabbithole")
    await s.process_user_message("Quitting gives headaches for days.")
    prompt = prompt_text(judge.requests[0].messages)
    assert "minimal" in prompt and "Be specific and actionable" not in prompt
    assert tutor.requests[0].messages[1].text == OBSERVATION_PREFIX + "Point withdrawal was recalled."


async def test_malformed_judge_output_gives_an_empty_result(checklist, store, settings):
    script("judge", "not json at all", "still {broken")
    script("tutor", "Go on.")
    s = await new_session(checklist, store, settings)
    r = await s.process_user_message("Caffeine blocks adenosine.")
    assert r.points_recalled_this_turn == [] and r.response == "Go on."
    [ev] = await store.checklist_evaluations(s.session_id)
    assert ev.status == "evaluation_failed" and ev.feedback == "" and ev.reason
    store.flush()
    calls = store.calls(purpose="checklist_batch", limit=None)
    assert len(calls) == 2 and all(c["status"] == "parse_error" and c["error"] for c in calls)
    assert len(s.tutor_messages("")) == 3  # no observation when there is no feedback


async def test_invented_ids_are_dropped_and_counted(checklist, store, settings):
    script("judge", judge_reply(("adenosine", 0.9), ("made_up", 0.9), ("rp_999", 0.5), feedback="x"))
    script("tutor", "ok")
    s = await new_session(checklist, store, settings)
    r = await s.process_user_message("adenosine!")
    assert r.points_recalled_this_turn == ["adenosine"]
    assert s.last_evaluation.dropped_ids == ["made_up", "rp_999"]
    [ev] = await store.checklist_evaluations(s.session_id)
    assert ev.dropped_count == 2 and ev.dropped_ids == ["made_up", "rp_999"]


async def test_fsrs_due_dates_follow_the_library(checklist, store, settings):
    t0 = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)
    script("judge", judge_reply(("adenosine", 0.95), ("half_life", 0.75), ("tolerance", 0.5)))
    script("tutor", "ok")
    s = await new_session(checklist, store, settings, clock=lambda: t0)
    await s.process_user_message("three things")
    await s.finish()  # the two points never recalled are reviewed as Again
    lib = Scheduler(enable_fuzzing=False)
    expected = {}
    for pid, rating in [("adenosine", Rating.Easy), ("half_life", Rating.Good), ("tolerance", Rating.Hard),
                        ("withdrawal", Rating.Again), ("absorption", Rating.Again)]:
        card, _ = lib.review_card(Card(due=t0), rating, review_datetime=t0)
        expected[pid] = card.due
    cards = {c.point_id: c for c in await s.scheduler.all_points("ada")}
    assert {pid: c.due for pid, c in cards.items()} == expected
    assert cards["adenosine"].last_rating == "Easy" and cards["withdrawal"].last_rating == "Again"
    due_now = await s.scheduler.due_points("ada", t0 + timedelta(minutes=5))
    assert {d.point_id for d in due_now} == {pid for pid, d in expected.items() if d <= t0 + timedelta(minutes=5)}
    # a second session moves the same cards on from their stored state
    t1 = expected["adenosine"]
    script("judge", judge_reply(("adenosine", 0.8)))
    script("tutor", "ok")
    s2 = await new_session(checklist, store, settings, clock=lambda: t1)
    await s2.process_user_message("adenosine again")
    first, _ = lib.review_card(Card(due=t0), Rating.Easy, review_datetime=t0)
    again, _ = lib.review_card(first, Rating.Good, review_datetime=t1)
    assert (await s2.scheduler.card("ada", checklist.title, "adenosine")).due == again.due
    assert again.due > first.due


def test_rating_mapping():
    assert [rating_for(c) for c in (1.0, 0.9, 0.89, 0.7, 0.69, 0.0)] == [
        Rating.Easy, Rating.Easy, Rating.Good, Rating.Good, Rating.Hard, Rating.Hard]
    assert rating_for(0.99, recalled=False) == Rating.Again


async def test_completion_and_closed_session(checklist, store, settings):
    ids = [p.id for p in checklist.points]
    script("judge", judge_reply(*[(i, 0.9) for i in ids[:4]]), judge_reply((ids[4], 0.9)))
    script("tutor", "four down", "all done!")
    s = await new_session(checklist, store, settings)
    done = []
    s.on("session_complete", done.append)
    assert not (await s.process_user_message("a lot")).completed
    r = await s.process_user_message("the last one")
    assert r.completed and r.recalled_count == 5 and done and done[0]["all_recalled"]
    assert (await store.checklist_session(s.session_id)).status == "completed"
    with pytest.raises(UsageError):
        await s.process_user_message("more?")


async def test_resume_in_a_new_process_continues_where_it_stopped(checklist, tmp_path, settings):
    url = f"sqlite:///{tmp_path}/resume.db"
    first = Store(url)
    script("judge", judge_reply(("adenosine", 0.9)))
    script("tutor", "And then?")
    s = await new_session(checklist, first, settings)
    await s.process_user_message("adenosine is blocked")
    sid = s.session_id
    first.close()
    second = Store(url)  # a new process: a new Store on the same database
    try:
        judge = script("judge", judge_reply(("half_life", 0.8)))
        script("tutor", "Good.")
        r = await ChecklistSession.resume(sid, store=second, settings=settings)
        assert r.recalled_count == 1 and [m.role for m in r.visible_messages()] == ["user", "assistant"]
        assert r.tutor.name == "scripted/tutor" and r.evaluator.judge_model == "scripted/judge"
        out = await r.process_user_message("about five hours")
        assert out.recalled_count == 2 and out.points_recalled_this_turn == ["half_life"]
        prompt = prompt_text(judge.requests[-1].messages)
        assert "adenosine is blocked" in prompt  # the excerpt holds the earlier turn
        assert [m.seq for m in await second.checklist_messages(sid)] == [1, 2, 3, 4]
    finally:
        second.close()


async def test_no_tutor_configured_says_how(checklist, store, settings):
    with pytest.raises(ConfigError, match="--tutor"):
        await ChecklistSession.start(checklist, store=store, settings=settings, judge="scripted/judge")
    with pytest.raises(ConfigError, match="cannot write replies"):
        await ChecklistSession.start(checklist, store=store, settings=settings, tutor="local/minilm")


async def test_a_failed_tutor_reply_is_asked_again_without_resaving_the_message(checklist, store, tmp_path):
    from jurist.config import Settings
    from jurist.errors import ModelUnavailable

    settings = Settings.load(max_retries=0)
    script("judge", judge_reply(("adenosine", 0.9), feedback="HIDDEN-F"))
    tutor = script("tutor", ModelUnavailable("tutor down"), "Good. And the half-life?")
    s = await new_session(checklist, store, settings)
    with pytest.raises(ModelUnavailable):
        await s.process_user_message("It blocks adenosine receptors.")
    assert s.awaiting_reply and s.recalled_count == 1
    r = await s.reply_again()
    assert r.response == "Good. And the half-life?" and not s.awaiting_reply
    assert [m.role for m in s.visible_messages()] == ["user", "assistant"]
    assert "HIDDEN-F" in tutor.requests[-1].messages[0].text + str(tutor.requests[-1].messages)
    with pytest.raises(UsageError):
        await s.reply_again()
    await s.aclose()
