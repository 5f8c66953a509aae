"""The gate against a real OpenAI-compatible HTTP server (jurist.testing.ProviderServer)."""

from __future__ import annotations

from jurist.config import Settings
from jurist.gate import Gate, GateConfig
from jurist.testing import Reply
from tests.gate.helpers import QUESTION, bad, good


def _settings(provider) -> Settings:
    return Settings.load(providers={"fake": {"type": "openai", "base_url": provider.base_url, "api_key": "k"}},
                         max_retries=0)


async def test_streams_from_the_upstream_and_regenerates(provider):
    provider.script(Reply(text="Built in 1889."), Reply(text=bad()),
                    Reply(text="Built in 1889 and 330 m tall."), Reply(text=good()))
    gate = Gate(GateConfig(evaluate_feedback_enabled=True, strategy="revision"), settings=_settings(provider),
                judge="fake/judge")
    events = [ev async for ev in gate.stream(QUESTION, "fake/writer")]
    await gate.aclose()
    result = events[-1].result
    assert result.answer == "Built in 1889 and 330 m tall." and result.accepted_attempt == 2
    assert [(c.type, c.model, c.status) for c in result.llm_calls] == [
        ("generation", "fake/writer", "ok"), ("quality_evaluation", "fake/judge", "ok"),
        ("regeneration", "fake/writer", "ok"), ("quality_evaluation", "fake/judge", "ok")]
    assert "revision" in [e.type for e in events]


async def test_upstream_failure_is_an_error_with_continue_context(provider):
    provider.script(Reply(status=503))
    gate = Gate(GateConfig(evaluate_feedback_enabled=True), settings=_settings(provider), judge="fake/judge")
    events = [ev async for ev in gate.stream(QUESTION, "fake/writer")]
    await gate.aclose()
    assert [e.type for e in events] == ["error"]
    assert events[0].data["code"] == "GENERATION_FAILED" and events[0].data["continue_context"] == QUESTION
