"""An answer cut off at the token limit (``finish_reason: length``) is judged as what it is: the
evaluator is told, the comprehensiveness check never passes it as complete, a regeneration asks
for a complete answer that fits, and the client still gets the upstream's ``finish_reason``."""

from __future__ import annotations

import httpx
import openai
import pytest

from jurist.config import Settings
from jurist.gate import Gate, GateConfig
from jurist.gate.evaluators import TRUNCATED_NOTE
from jurist.gate.policy import CUT_OFF_RETRY
from jurist.models import script
from jurist.server import create_app
from jurist.testing import Reply
from tests.server.live import running
from tests.server.test_proxy import ASK, PASS, sse_events

COMPREHENSIVE = '{"comprehensive": true, "reason": "it answers the question"}'
CUT = Reply(text="Paris is", finish_reason="length")


def proxy(provider, isolated, evaluator: str):
    return create_app(Settings(home=str(isolated / ".jurist")), upstream=provider.base_url,
                      gate_config={"evaluate_feedback_enabled": True, "judge": "scripted/judge",
                                   "evaluator": evaluator})


def upstream_asks(provider) -> list[list[dict]]:
    return [r["json"]["messages"] for r in provider.requests if r["path"].endswith("/chat/completions")]


def test_a_cut_off_answer_is_not_comprehensive_and_the_client_still_gets_length(provider, isolated):
    judge = script("judge", default=COMPREHENSIVE)  # a judge that would pass anything
    provider.default = CUT
    with running(proxy(provider, isolated, "comprehensiveness")) as url, \
            openai.OpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0) as client:
        r = client.chat.completions.create(model="m", messages=ASK, max_tokens=5)
    assert r.choices[0].finish_reason == "length" and r.choices[0].message.content == "Paris is"
    record = r.model_extra["jurist"]
    assert record["truncated"] is True and record["accept_reason"] == "max_regenerations"
    assert record["evaluations"] and all(e["comprehensive"] is False and e["passed"] is False
                                         and e["reason"] == TRUNCATED_NOTE for e in record["evaluations"])
    assert judge.requests == []  # decided without asking the judge: a cut-off answer is not complete
    asks = upstream_asks(provider)
    assert len(asks) == len(record["attempts"]) >= 2
    assert asks[1][-1] == {"role": "user", "content": CUT_OFF_RETRY}  # not "be more thorough"


def test_a_streamed_cut_off_answer_is_not_comprehensive_and_ends_with_length(provider, isolated):
    script("judge", default=COMPREHENSIVE)
    provider.default = CUT
    with running(proxy(provider, isolated, "comprehensiveness")) as url, \
            httpx.stream("POST", f"{url}/v1/chat/completions", timeout=30,
                         json={"model": "m", "messages": ASK, "max_tokens": 5, "stream": True}) as r:
        events = sse_events(r)
    chunks = [d for e, d in events if e is None and isinstance(d, dict) and d.get("choices")]
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    record = next(d["jurist"] for e, d in events if isinstance(d, dict) and "jurist" in d)
    assert record["truncated"] is True
    assert all(e["comprehensive"] is False for e in record["evaluations"])


def test_a_complete_answer_after_a_cut_off_one_is_accepted(provider, isolated):
    judge = script("judge", default=COMPREHENSIVE)
    provider.script(CUT, Reply(text="Paris is the capital of France."))
    with running(proxy(provider, isolated, "comprehensiveness")) as url, \
            openai.OpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0) as client:
        r = client.chat.completions.create(model="m", messages=ASK, max_tokens=50)
    record = r.model_extra["jurist"]
    assert r.choices[0].finish_reason == "stop" and record["accepted_attempt"] == 2
    assert record["accept_reason"] == "passed" and "truncated" not in record
    assert len(judge.requests) == 1  # only the complete answer went to the judge


def test_the_quality_judge_is_told_the_answer_was_cut_off(provider, isolated):
    judge = script("judge", default=PASS)
    provider.script(CUT)
    with running(proxy(provider, isolated, "quality")) as url:
        r = httpx.post(f"{url}/v1/chat/completions", timeout=30,
                       json={"model": "m", "messages": ASK, "max_tokens": 5})
    assert r.json()["choices"][0]["finish_reason"] == "length"
    prompt = "\n".join(m.text for m in judge.requests[0].messages)
    assert f"</response>\nNote: {TRUNCATED_NOTE}; it is incomplete." in prompt

    provider.script(Reply(text="Paris."))
    with running(proxy(provider, isolated, "quality")) as url:
        httpx.post(f"{url}/v1/chat/completions", timeout=30, json={"model": "m", "messages": ASK})
    assert TRUNCATED_NOTE not in "\n".join(m.text for m in judge.requests[-1].messages)


@pytest.mark.parametrize("strategy", ["blocking", "parallel"])
async def test_a_users_evaluator_calling_a_cut_off_answer_complete_is_overruled(provider, isolated, strategy):
    seen: list[str] = []

    async def says_complete(messages, answer):
        seen.append(answer)
        return True

    settings = Settings(home=str(isolated / ".jurist"), providers={"srv": {"base_url": provider.base_url, "api_key": "k"}})
    provider.default = CUT
    config = GateConfig(evaluate_feedback_enabled=True, strategy=strategy, parallel_min_chars=1,
                        max_regenerations=1)
    async with Gate(config, settings=settings, evaluator=says_complete) as gate:
        record = await gate.run(ASK, "srv/m")
    assert seen and record.truncated and record.accept_reason == "max_regenerations"
    for ev in record.evaluations:
        assert ev.passed is False and ev.comprehensive is False and ev.reason.startswith(TRUNCATED_NOTE)
