"""Rubric scoring against a real OpenAI/Anthropic-protocol server on 127.0.0.1."""

import json
import time

from jurist.config import Settings
from jurist.rubrics import evaluate, evaluate_batch
from jurist.rubrics.models import Rubric, RubricSet
from jurist.store import Store
from jurist.testing import Reply

from tests.rubrics.test_batch import make_sessions
from tests.rubrics.test_scoring import SESSION
from tests.quoting import prompt_text

ONE = RubricSet(rubrics=[Rubric(id="a", name="A", scoring_criteria="c")])


def settings_for(server, **kw):
    return Settings.load(
        providers={"fake": {"type": "openai", "base_url": server.base_url, "api_key": "k"}},
        backoff_base=0.05, backoff_max=0.2, **kw,
    )


async def test_retry_after_is_honoured(provider):
    provider.script(Reply(status=429, headers={"Retry-After": "1"}), Reply(text="SCORE: 4\nREASONING: ok"))
    result = await evaluate(ONE, SESSION, judge="fake/judge-1", settings=settings_for(provider))
    assert result["rubric_scores"][0]["score"] == 4.0
    first, second = provider.requests
    assert second["started"] - first["finished"] >= 0.95


async def test_500_then_success_and_json_schema_requested(provider):
    provider.script(Reply(status=500), Reply(status=503), Reply(text='{"score": 2, "reasoning": "x"}'))
    result = await evaluate(ONE, SESSION, judge="fake/judge-1", settings=settings_for(provider))
    assert result["rubric_scores"][0]["score"] == 2.0 and len(provider.requests) == 3
    body = provider.requests[-1]["json"]
    assert body["temperature"] == 0.1 and body["seed"] == 0
    assert body["response_format"]["type"] == "json_schema"


async def test_hung_response_times_out_into_evaluation_failed(provider):
    provider.script(Reply(hang=True))
    s = settings_for(provider, timeout=0.5, max_retries=0)
    start = time.monotonic()
    result = await evaluate(ONE, SESSION, judge="fake/judge-1", settings=s)
    assert time.monotonic() - start < 5
    r = result["rubric_scores"][0]
    assert r["status"] == "evaluation_failed" and r["reasoning"].startswith("ModelTimeout")


async def test_malformed_and_truncated_replies(provider):
    provider.script(Reply(text='{"score": 4, "reason'), Reply(text='{"score": 12, "reasoning": "x"}'))
    result = await evaluate(ONE, SESSION, judge="fake/judge-1", settings=settings_for(provider))
    r = result["rubric_scores"][0]
    assert r["status"] == "evaluation_failed" and "outside the scale" in r["reasoning"]
    provider.script(Reply(body=b'{"choices": [trunc'))
    result = await evaluate(ONE, SESSION, judge="fake/judge-1", settings=settings_for(provider, max_retries=0))
    assert result["rubric_scores"][0]["reasoning"].startswith("ModelUnavailable")


async def test_empty_content_is_reasked(provider):
    provider.script(Reply(text=""), Reply(text="SCORE: 5\nREASONING: fine"))
    result = await evaluate(ONE, SESSION, judge="fake/judge-1", settings=settings_for(provider))
    assert result["rubric_scores"][0]["score"] == 5.0
    assert "the reply was empty" in provider.requests[1]["json"]["messages"][-1]["content"]


async def test_limiter_bounds_requests_in_flight_across_a_batch(provider, tmp_path):
    provider.default = Reply(text="SCORE: 3", delay=0.05)
    rubrics = RubricSet(rubrics=[Rubric(id=f"r{i}", name=f"R{i}", scoring_criteria="c") for i in range(4)])
    sessions = make_sessions(tmp_path / "s", 12)
    report = await evaluate_batch(rubrics, sessions, tmp_path / "out", parallel=6, max_concurrency=5,
                                  judge="fake/judge-1", settings=settings_for(provider))
    assert report.exit_code == 0 and len(provider.requests) == 48
    assert provider.peak_in_flight == 5


async def test_anthropic_protocol(provider, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    provider.script(Reply(text='{"score": 3, "reasoning": "fine"}'))
    s = Settings.load(providers={"anthropic": {"base_url": provider.anthropic_base_url}})
    result = await evaluate(ONE, SESSION, judge="anthropic/claude-haiku-4-5", settings=s)
    assert result["rubric_scores"][0]["score"] == 3.0
    assert provider.requests[0]["path"] == "/v1/messages"


async def test_every_call_of_a_batch_is_on_record(provider, tmp_path):
    provider.script(Reply(status=500))
    sessions = make_sessions(tmp_path / "s", 3)
    s = settings_for(provider)
    await evaluate_batch(ONE, sessions, tmp_path / "out", judge="fake/judge-1", settings=s)
    store = Store(s.database)
    calls = store.calls(limit=None, purpose="rubric_judge")
    store.close()
    assert len(calls) == 3 and sum(c["attempts"] for c in calls) == 4 == len(provider.requests)
    assert {c["trace_id"] for c in calls} == {
        json.loads(p.read_text())["trace_id"] for p in (tmp_path / "out").glob("*_result.json")}


async def test_a_dead_endpoint_fails_a_batch_fast_and_the_report_says_so(provider, tmp_path):
    provider.script(*[Reply(hang=True)] * 400)  # the endpoint never answers
    sessions = make_sessions(tmp_path / "s", 200)
    s = settings_for(provider, timeout=0.3, max_retries=2, rubric_timeout=30, breaker_threshold=5,
                     breaker_cooldown=60)
    started = time.monotonic()
    report = await evaluate_batch(ONE, sessions, tmp_path / "out", parallel=5, judge="fake/judge-1", settings=s)
    took = time.monotonic() - started
    # Timeouts alone: 200 sessions / 5 at once x 3 attempts x 0.3 s = 36 s at least.
    assert took < 10, took
    assert len(provider.requests) <= 10  # the first wave timed out; the rest never reached the endpoint
    assert report.evaluations_failed == 200 and report.exit_code == 1
    assert report.endpoint_down >= 195
    assert report.endpoint_note is not None and "the judge endpoint was down" in report.endpoint_note
    reasons = {json.loads(p.read_text())["rubric_scores"][0]["reasoning"].split(":")[0]
               for p in (tmp_path / "out").glob("sess*_result.json")}
    assert "EndpointDown" in reasons


def test_the_session_evaluators_defaults_are_note_003s():
    s = Settings()
    assert (s.temperature, s.rubric_timeout, s.max_concurrency, s.retry_on_parse_failure) == (0.1, 60.0, 10, True)


async def test_retry_on_parse_failure_off_makes_one_call(provider, monkeypatch):
    monkeypatch.setenv("JURIST_RETRY_ON_PARSE_FAILURE", "false")
    provider.script(Reply(text="no score here"), Reply(text='{"score": 3, "reasoning": "x"}'))
    result = await evaluate(ONE, SESSION, judge="fake/judge-1", settings=settings_for(provider))
    [score] = result["rubric_scores"]
    assert score["status"] == "evaluation_failed" and "retry_on_parse_failure is off" in score["reasoning"]
    assert len(provider.requests) == 1


async def test_the_notes_score_template_ships_by_name_and_is_answered_in_its_own_format(provider):
    provider.script(Reply(text="SCORE: 4\nREASONING: The user was clear."))
    result = await evaluate(ONE, SESSION, judge="fake/judge-1", template="judge_template",
                            settings=settings_for(provider))
    [score] = result["rubric_scores"]
    assert score["score"] == 4.0 and score["reasoning"] == "The user was clear."
    body = provider.requests[0]["json"]
    assert "response_format" not in body  # no JSON schema imposed on a SCORE:/REASONING: template
    prompt = prompt_text(body["messages"])
    assert "SCORE: [1-5]\nREASONING: [2-3 sentences explaining your score]" in prompt
    assert "<chat_session>" in prompt  # the transcript still quoted as data
