"""The proxy reads the gate's typed events (a union on ``type``), not dicts: each one's fields
go to the SSE stream in the documented shape."""

from __future__ import annotations

from typing import Any, AsyncGenerator

import httpx
import pytest

from jurist.config import Settings
from jurist.gate import DeltaEvent, DoneEvent, ErrorEvent, GateEvent, GateRecord, RevisionEvent, ThinkingEvent
from jurist.gate.types import REVISION_MESSAGE
from jurist.server import create_app
from jurist.testing import Reply
from tests.server.live import running
from tests.server.test_proxy import ASK, sse_events

RECORD = GateRecord(answer="Paris, France.", accepted_attempt=2, accept_reason="passed", trace_id="typed",
                    strategy="revision", evaluator="quality")
FAILED = GateRecord(answer="Par", accept_reason="error", trace_id="typed", error="ModelUnavailable: gone",
                    continue_context=ASK)


class ScriptedGate:
    """A gate that yields the events it is given."""

    def __init__(self, events: list[GateEvent]) -> None:
        self.events = events

    async def run(self, messages: Any, generate: Any, **kw: Any) -> GateRecord:
        raise AssertionError("streamed requests only")

    async def stream(self, messages: Any, generate: Any, **kw: Any) -> AsyncGenerator[GateEvent, None]:
        for ev in self.events:
            yield ev

    def wrap(self, model: Any) -> Any:
        return model

    async def settle(self, trace_id: str, timeout: float | None = None) -> GateRecord | None:
        return None

    async def aclose(self) -> None:
        pass


def stream(provider: Any, isolated: Any, events: list[GateEvent]) -> list[tuple[str | None, Any]]:
    provider.script(Reply(text="Par"))
    app = create_app(Settings(home=str(isolated / ".jurist")), upstream=provider.base_url, gate_config={})
    app.state.proxy.gate_factory = lambda config, runtime: ScriptedGate(events)
    with running(app) as base, httpx.stream("POST", f"{base}/v1/chat/completions", timeout=30,
                                            json={"model": "gpt-test", "messages": ASK, "stream": True}) as r:
        assert r.status_code == 200
        return sse_events(r)


def texts(events: list[tuple[str | None, Any]]) -> str:
    return "".join(d["choices"][0]["delta"].get("content") or "" for name, d in events
                   if name is None and isinstance(d, dict) and d.get("choices"))


def test_deltas_revisions_and_done_are_read_from_their_fields(provider, isolated):
    events = stream(provider, isolated, [
        DeltaEvent(text="Par", attempt=1),
        ThinkingEvent(message=REVISION_MESSAGE, retry_count=1, ts=1.0, feedback="say the country"),
        RevisionEvent(text="Paris, France.", attempt=2, replaces=1),
        DoneEvent(result=RECORD)])
    assert texts(events) == f"Par\n\n{REVISION_MESSAGE}\n\nParis, France."
    named = {name: d["jurist_event"]["data"] for name, d in events if name}
    assert named["jurist.thinking"] == {"message": REVISION_MESSAGE, "strategy": "regenerate", "retry_count": 1,
                                        "ts": 1.0, "feedback": "say the country"}
    assert named["jurist.revision"] == {"text": "Paris, France.", "attempt": 2, "replaces": 1}
    assert named["jurist.done"] == RECORD.to_json()
    assert events[-2][1]["jurist"] == RECORD.to_json() and events[-1][1] == "[DONE]"


def test_an_error_event_carries_its_record_and_how_to_continue(provider, isolated):
    events = stream(provider, isolated, [ErrorEvent(code="GENERATION_FAILED", result=FAILED,
                                                    last_user_message=ASK[-1])])
    name, data = events[-2]
    assert name == "jurist.error" and data["error"]["code"] == "GENERATION_FAILED"
    sent = data["jurist_event"]["data"]
    assert sent["error"] == "ModelUnavailable: gone" and sent["partial_answer"] == "Par"
    assert sent["continue_context"] == ASK and sent["continueContext"]["messages"] == ASK
    assert sent["status"] == 502


@pytest.mark.parametrize("bad", [{"type": "delta", "delta": "Par"}, {"type": "delta", "content": "Par"}])
def test_a_delta_has_text_and_nothing_else_stands_in_for_it(bad):
    from pydantic import TypeAdapter, ValidationError

    with pytest.raises(ValidationError):
        TypeAdapter(GateEvent).validate_python({**bad, "attempt": 1})
