"""The tutor socket on the real jurist.checklist session, with scripted models and a SQLite store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from jurist.config import Settings
from jurist.models import script
from jurist.server import create_app
from jurist.store import Store

SECRET = "JUDGE-SECRET-91c2 near-miss on adenosine"
OBSERVATION = "OBSERVED-5d1e said adenosine"
WS = "ws://localhost/tutor/ws?points=caffeine&learner=ada"


def verdict(*ids: str) -> str:
    return json.dumps({"recalledPoints": [{"id": i, "confidence": 0.37, "observation": OBSERVATION} for i in ids],
                       "feedback": SECRET})


@pytest.fixture
def store(tmp_path: Path):
    s = Store(f"sqlite:///{tmp_path / 'server.db'}")
    yield s
    s.close()


def make_client(checklist_dir: Path, store: Store) -> TestClient:
    app = create_app(Settings(tutor_progress=True), store, tutor_model="scripted/tutor", judge_model="scripted/judge",
                     checklist_dirs=[checklist_dir])
    return TestClient(app, base_url="http://localhost")


def test_real_session_turns_resume_and_hidden_feedback(checklist_dir, store):
    script("judge", verdict("adenosine"), verdict("half-life"))
    tutor = script("tutor", "Right about adenosine. What else?", "Good. One more point.")
    frames: list[str] = []
    with make_client(checklist_dir, store) as client:
        with client.websocket_connect(WS) as ws:
            frames += [ws.receive_text() for _ in range(3)]
            session = json.loads(frames[0])
            assert json.loads(frames[1])["opening"]  # the session's greeting
            assert json.loads(frames[2]) == {"type": "progress", "recalled": 0, "total": 3, "completed": False}
            ws.send_json({"type": "message", "content": "It blocks adenosine receptors."})
            frames += [ws.receive_text(), ws.receive_text()]
            assert json.loads(frames[-2]) == {"type": "assistant_message",
                                              "content": "Right about adenosine. What else?"}
            assert json.loads(frames[-1])["recalled"] == 1
    # a new app on the same store (a restart) resumes the stored session
    with make_client(checklist_dir, store) as client:
        with client.websocket_connect(WS + f"&session_id={session['session_id']}") as ws:
            frames += [ws.receive_text() for _ in range(3)]
            history = json.loads(frames[-2])["messages"]
            assert [m["role"] for m in history] == ["user", "assistant"]
            assert json.loads(frames[-1])["recalled"] == 1
            ws.send_json({"type": "message", "content": "About five hours half-life."})
            frames += [ws.receive_text(), ws.receive_text()]
            assert json.loads(frames[-1]) == {"type": "progress", "recalled": 2, "total": 3, "completed": False}
        page = client.get("/tutor", params={"points": "caffeine", "learner": "ada",
                                            "session_id": session["session_id"]}).text
    # the tutor model saw the judge's feedback; the learner never does
    assert any(SECRET in m.text for r in tutor.requests for m in r.messages)
    for blob in [*frames, page]:
        for secret in (SECRET, "JUDGE-SECRET", OBSERVATION, "0.37", "EVALUATOR OBSERVATION"):
            assert secret not in blob


def test_real_session_resume_refuses_another_learner(checklist_dir, store):
    script("judge", default=verdict())
    script("tutor", default="ok")
    with make_client(checklist_dir, store) as client:
        with client.websocket_connect(WS) as ws:
            sid = ws.receive_json()["session_id"]
        client.app.state.jurist.sessions._items.clear()
        with client.websocket_connect(f"ws://localhost/tutor/ws?points=caffeine&learner=eve&session_id={sid}") as ws:
            frame = ws.receive_json()
            assert frame["type"] == "error" and "no session" in frame["message"]


def test_no_tutor_configured_is_an_error_frame(checklist_dir, store):
    with TestClient(create_app(Settings(), store, checklist_dirs=[checklist_dir]), base_url="http://localhost") as client:
        with client.websocket_connect(WS) as ws:
            frame = ws.receive_json()
            assert frame["type"] == "error" and "tutor" in frame["message"]
