"""A structured answer (JSON asked with response_format, or tool calls) is usable only whole: the
revision and parallel strategies hold it until it is accepted, so a client never gets a first
answer, a notice and a second answer spliced together; the notice is the thinking event's."""

from __future__ import annotations

import asyncio
import json
from typing import Any, AsyncIterator

import pytest

from jurist.gate import REVISION_MESSAGE, DeltaEvent, RevisionEvent, ThinkingEvent
from jurist.models import script

from tests.gate.helpers import bad, collect, gate, good, kinds

ASK = [{"role": "user", "content": "The capital of France, as JSON {\"capital\": ...}?"}]
FIRST, SECOND = '{"capital": "Lyon"}', '{"capital": "Paris", "country": "France"}'


def json_in_pieces() -> Any:
    """A generator that writes FIRST, then SECOND, each in small pieces (as a stream does)."""
    answers = iter([FIRST, SECOND])

    async def generate(messages: list[dict[str, Any]]) -> AsyncIterator[str]:
        text = next(answers)
        for i in range(0, len(text), 4):
            await asyncio.sleep(0)
            yield text[i:i + 4]
    return generate


def judged_by_its_answer(request: Any) -> str:
    """The judge's verdict on what it is shown: passed once the answer names Paris. The parallel
    strategy also judges snapshots of the answer as it is written, as many as time allows, so a
    verdict in queue order would depend on how the event loop interleaved them."""
    return good() if any("Paris" in m.text for m in request.messages) else bad()


@pytest.mark.parametrize("strategy", ["revision", "parallel"])
def test_a_structured_answer_is_held_until_accepted_and_stays_one_json_value(strategy):
    script("judge", default=judged_by_its_answer)
    g = gate(strategy=strategy, parallel_min_chars=1)
    events = asyncio.run(collect(g, ASK, json_in_pieces(), structured=True))
    shown = "".join(ev.text for ev in events if isinstance(ev, DeltaEvent))
    assert json.loads(shown) == json.loads(SECOND)  # what a client concatenates is one valid JSON value
    assert not [ev for ev in events if isinstance(ev, RevisionEvent)]
    assert REVISION_MESSAGE not in shown
    thinking = [ev for ev in events if isinstance(ev, ThinkingEvent)]
    assert [t.message for t in thinking] == [REVISION_MESSAGE]  # the notice travels as an event
    assert kinds(events)[-4:] == ["thinking", "delta", "evaluation", "done"]
    assert events[-1].result is not None and events[-1].result.answer == SECOND


def test_a_structured_answer_that_passes_is_released_whole_after_its_evaluation():
    script("judge", good())
    events = asyncio.run(collect(gate(strategy="revision"), ASK, json_in_pieces(), structured=True))
    assert kinds(events) == ["delta", "evaluation", "done"]
    assert "".join(ev.text for ev in events if isinstance(ev, DeltaEvent)) == FIRST


def test_with_feedback_off_a_structured_answer_still_streams_at_once():
    """Nothing can replace it (feedback off never regenerates): it streams as it is written."""
    script("judge", bad())
    events = asyncio.run(collect(gate(strategy="revision", evaluate_feedback_enabled=False), ASK,
                                 json_in_pieces(), structured=True))
    assert kinds(events)[:2] == ["delta", "done"]
    assert "".join(ev.text for ev in events if isinstance(ev, DeltaEvent)) == FIRST


def test_a_text_answer_with_the_revision_strategy_is_still_shown_and_revised():
    """Without ``structured`` the revision strategy keeps its behaviour: the first answer streams
    at once and a revision replaces it."""
    script("judge", bad(), good())
    events = asyncio.run(collect(gate(strategy="revision"), ASK, json_in_pieces()))
    assert kinds(events) == ["delta", "evaluation", "thinking", "revision", "evaluation", "done"]


def test_gate_run_takes_structured_too():
    script("judge", bad(), good())
    record = asyncio.run(gate(strategy="revision").run(ASK, json_in_pieces(), structured=True))
    assert record.answer == SECOND and record.accepted_attempt == 2
