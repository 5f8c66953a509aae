"""The proxy reads a request's messages strictly: a typo is a 422 naming the field and the closest known one."""

import httpx
import pytest

from jurist.config import Settings
from jurist.models import script
from jurist.server import create_app
from jurist.testing import Reply
from tests.server.live import running

PASS = '{"quality_score": 0.9, "confidence_score": 0.9, "issues": [], "improvement_hint": null}'
TOOL_ROUND = [
    {"role": "user", "content": "When does SK123 leave?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "flight", "arguments": "{\"no\": \"SK123\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "09:00"},
]


@pytest.fixture
def url(provider, isolated):
    script("judge", default=PASS)
    app = create_app(Settings(home=str(isolated / ".jurist")), upstream=provider.base_url,
                     gate_config={"evaluate_feedback_enabled": True, "judge": "scripted/judge"})
    with running(app) as base:
        yield base


@pytest.mark.parametrize("message, param, problem", [
    ({"role": "user", "contnet": "hi"}, "messages[0]", "unknown field 'contnet' (did you mean 'content'?)"),
    ({"role": "usr", "content": "hi"}, "messages[0]", "unknown role 'usr' (did you mean 'user'?)"),
    ({"role": "assistant"}, "messages[0]", "an assistant turn needs content or tool_calls"),
])
def test_a_bad_message_is_a_422_with_the_field_and_the_closest_name(url, provider, message, param, problem):
    r = httpx.post(f"{url}/v1/chat/completions", json={"model": "m", "messages": [message]})
    assert r.status_code == 422
    error = r.json()["error"]
    assert problem in error["message"] and error["param"] == param
    assert provider.requests == []  # nothing went upstream


def test_tool_calls_and_results_go_upstream_as_the_client_sent_them(url, provider):
    provider.script(Reply(text="It leaves at 09:00."))
    r = httpx.post(f"{url}/v1/chat/completions", json={"model": "m", "messages": TOOL_ROUND}, timeout=30)
    assert r.status_code == 200, r.text
    assert provider.requests[0]["json"]["messages"] == TOOL_ROUND
