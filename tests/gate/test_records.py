"""The gate's stored row: max attempts hit, and the question that titles the record."""

from __future__ import annotations

from typing import Any

import pytest

from jurist.config import Settings
from jurist.gate import Gate, GateConfig
from jurist.gate.types import QUESTION_CHARS
from jurist.models import script
from jurist.store import Store
from tests.gate.helpers import QUESTION, bad, good


async def stored_row(store: Store, messages: list[dict[str, Any]], **cfg: Any) -> dict[str, Any]:
    g = Gate(GateConfig(evaluate_feedback_enabled=True, **cfg), settings=Settings(), judge="scripted/judge",
             store=store)
    try:
        result = await g.run(messages, "scripted/gen")
    finally:
        await g.aclose()
    await store.aflush()
    [row] = [r for r in store.evaluations(kind="gate", limit=None) if r["trace_id"] == result.trace_id]
    assert row["payload"]["accept_reason"] == result.accept_reason
    return row


@pytest.fixture
def store(tmp_path):
    s = Store(f"sqlite:///{tmp_path}/gate.db")
    yield s
    s.close()


@pytest.mark.parametrize("verdicts, cap, hit, attempts", [
    ((bad(0.3), bad(0.1)), None, True, 2),  # the regeneration allowed was used, the last still failed
    ((bad(0.3), bad(0.2), bad(0.1)), 2, True, 3),
    ((bad(0.3), good()), None, False, 2),  # the last attempt passed
    ((good(),), None, False, 1),
    ((bad(0.3),), 0, False, 1),  # no loop: a single attempt has no limit to reach
])
async def test_max_attempts_hit_is_stored(store, verdicts, cap, hit, attempts):
    script("gen", *[f"answer {i}" for i in range(len(verdicts))])
    script("judge", *verdicts)
    row = await stored_row(store, QUESTION, **({} if cap is None else {"max_regenerations": cap}))
    assert row["iterations"] == attempts and row["max_attempts_hit"] is hit


async def test_the_record_keeps_the_users_question(store):
    script("gen", "an answer")
    script("judge", good())
    row = await stored_row(store, QUESTION)
    assert row["payload"]["question"] == "When was the Eiffel Tower built and how tall is it?"
    long = "why? " * 1000
    script("gen", "an answer")
    script("judge", good())
    parts = [{"type": "text", "text": long}]  # content parts: their text
    row = await stored_row(store, [{"role": "user", "content": "first"}, {"role": "assistant", "content": "a"},
                                   {"role": "user", "content": parts}])
    assert row["payload"]["question"] == long[:QUESTION_CHARS]
