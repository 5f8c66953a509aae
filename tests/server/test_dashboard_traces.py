"""Trace pages are titled by what was asked, and a checklist turn is one learner message with its own calls."""

from __future__ import annotations

import html
import json
import re

import pytest
from fastapi.testclient import TestClient

from jurist.config import Settings
from jurist.models import script
from jurist.server import create_app
from jurist.store import Store
from jurist.store import dashboard as q
from tests.checklist.conftest import CAFFEINE, judge_reply
from tests.server.test_dashboard_pages import PWN_SCRIPT, esc, text_of

QUESTION = "When was the Eiffel Tower built and how tall is it?"
GOOD = json.dumps({"quality_score": 0.9, "confidence_score": 0.9, "issues": [], "improvement_hint": None})


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("JURIST_HOME", str(tmp_path / ".jurist"))
    s = Store(f"sqlite:///{tmp_path}/traces.db")
    yield s
    s.close()


@pytest.fixture
def client(store):
    with TestClient(create_app(Settings(), store=store), base_url="http://localhost") as c:
        yield c


async def gate_run(store: Store, messages: list[dict[str, str]], generate: object = "scripted/gen") -> str:
    from jurist.gate import Gate, GateConfig

    script("gen", "Built in 1889; it is 330 m tall.")
    script("gatejudge", GOOD)
    gate = Gate(GateConfig(evaluate_feedback_enabled=True), settings=Settings(), judge="scripted/gatejudge",
                store=store)
    try:
        result = await gate.run(messages, generate)
    finally:
        await gate.aclose()
    await store.aflush()
    return next(e["id"] for e in store.evaluations(kind="gate", limit=None) if e["trace_id"] == result.trace_id)


async def test_a_gate_trace_is_titled_by_the_users_question(store, client):
    eid = await gate_run(store, [{"role": "system", "content": "Be brief."}, {"role": "user", "content": QUESTION}])
    page = client.get(f"/evaluation/evaluations/{eid}").text
    assert text_of(page, "trace-title") == QUESTION
    assert f"<title>{QUESTION} — jurist</title>" in page
    assert text_of(page, "subject") == store.evaluation(eid).subject_id  # the hash, below the title

    # a generator function makes no call; the record itself holds the question
    async def answer(messages):
        return "Built in 1889."

    eid = await gate_run(store, [{"role": "user", "content": f"Is {PWN_SCRIPT} safe?"}], answer)
    page = client.get(f"/evaluation/evaluations/{eid}").text
    assert PWN_SCRIPT not in page and text_of(page, "trace-title") == f"Is {PWN_SCRIPT} safe?"
    assert esc(f"Is {PWN_SCRIPT} safe?") in page


async def test_a_gate_record_stored_without_its_question_takes_it_from_the_generation_call(store, client):
    eid = await gate_run(store, [{"role": "user", "content": QUESTION}])
    payload = store.evaluation(eid).payload
    del payload["question"]  # as records were stored before they kept it
    store.write(lambda conn: conn.execute(
        q.evaluations.update().where(q.evaluations.c.id == eid).values(payload=payload)))
    page = client.get(f"/evaluation/evaluations/{eid}").text
    assert text_of(page, "trace-title") == QUESTION


async def checklist_session(store: Store) -> str:
    from jurist.checklist import ChecklistSession

    script("cljudge", judge_reply(("adenosine", 0.92)), judge_reply(), judge_reply(("half_life", 0.8)))
    script("cltutor", "Right, adenosine. What else?", "Think about how long it lasts.", "Yes, five hours.")
    s = await ChecklistSession.start(CAFFEINE, store=store, settings=Settings(), learner="ada",
                                     tutor="scripted/cltutor", judge="scripted/cljudge")
    for text in ("Caffeine blocks adenosine receptors.", "I forgot the rest.", "Its half-life is five hours."):
        await s.process_user_message(text)
    await s.finish()
    await store.aflush()
    return s.session_id


async def test_a_checklist_turn_is_one_learner_message_with_its_own_calls(store, client):
    from jurist.checklist.session import PURPOSE_TUTOR

    assert q.CHECKLIST_TUTOR == PURPOSE_TUTOR
    session_id = await checklist_session(store)
    turns = sorted(store.evaluations(kind="checklist", limit=None), key=lambda e: e["payload"]["message_seq"])
    assert [t["payload"]["message_seq"] for t in turns] == [1, 3, 5]  # seq counts the tutor's replies too
    messages = ["Caffeine blocks adenosine receptors.", "I forgot the rest.", "Its half-life is five hours."]
    replies = ["Right, adenosine. What else?", "Think about how long it lasts.", "Yes, five hours."]
    all_calls = store.read(q.call_page, trace_id=session_id, page_size=50).items
    assert len(all_calls) == 6
    for n, turn in enumerate(turns, 1):
        page = client.get(f"/evaluation/evaluations/{turn['id']}").text
        assert text_of(page, "turn-number") == f"Learner message {n} of 3"
        assert text_of(page, "trace-title") == messages[n - 1]
        assert text_of(page, "learner-message") == messages[n - 1]
        assert text_of(page, "subject") == session_id
        purposes = re.findall(r'<span class="purpose">([^<]+)</span>', page)
        assert purposes == ["checklist_batch", "checklist_tutor"]
        responses = [html.unescape(r) for r in re.findall(r'<pre class="response">([^<]*)</pre>', page)]
        assert responses[1] == replies[n - 1]  # this turn's tutor reply, not another turn's
        found = client.get(f"/api/evaluation/sessions/{turn['id']}").json()
        assert found["turn"] == {"message": messages[n - 1], "message_seq": 2 * n - 1, "number": n,
                                 "learner_messages": 3}
        assert [c["purpose"] for c in found["calls"]] == ["checklist_batch", "checklist_tutor"]
        assert found["calls"][0]["id"] in turn["payload"]["call_ids"]
        assert found["calls"][1]["response_text"] == replies[n - 1]
