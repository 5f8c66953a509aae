"""WS /tutor/ws: messages in, replies and progress out, hidden feedback never out."""

from __future__ import annotations

import json

import pytest
from starlette.websockets import WebSocketDisconnect

from jurist.errors import AuthFailed
from jurist.models import script
from tests.server.fakes import SECRET_FEEDBACK, judge_says

WS = "ws://localhost/tutor/ws?points=caffeine&learner=ada"


def opening(ws) -> tuple[dict, dict, dict]:
    session, history, progress = ws.receive_json(), ws.receive_json(), ws.receive_json()
    assert session["type"] == "session" and history["type"] == "history" and progress["type"] == "progress"
    return session, history, progress


def turn(ws, content: str) -> tuple[dict, dict]:
    ws.send_json({"type": "message", "content": content})
    return ws.receive_json(), ws.receive_json()


def test_messages_in_replies_and_progress_out(client):
    script("judge", judge_says(["adenosine"]), judge_says(["half-life", "tolerance"]))
    script("tutor", "Good: adenosine. What about how long it lasts?", "All done, well recalled!")
    with client.websocket_connect(WS) as ws:
        session, history, progress = opening(ws)
        assert session["points"] == "caffeine" and session["title"] == "Caffeine <b>basics</b>"
        assert history == {"type": "history", "opening": "Tell me what you remember.", "messages": []}
        assert progress == {"type": "progress", "recalled": 0, "total": 3, "completed": False}
        reply, progress = turn(ws, "It blocks adenosine.")
        assert reply == {"type": "assistant_message", "content": "Good: adenosine. What about how long it lasts?"}
        assert progress == {"type": "progress", "recalled": 1, "total": 3, "completed": False}
        reply, progress = turn(ws, "Half-life five hours, and tolerance.")
        assert reply["content"] == "All done, well recalled!"
        assert progress == {"type": "progress", "recalled": 3, "total": 3, "completed": True}


def test_hidden_feedback_never_reaches_the_client(client, factory):
    script("judge", default=judge_says(["adenosine"]))
    script("tutor", default="Keep going.")
    frames: list[str] = []
    with client.websocket_connect(WS) as ws:
        for _ in range(3):
            frames.append(ws.receive_text())
        for text in ("adenosine", "more", "<b>html</b>"):
            ws.send_json({"type": "message", "content": text})
            frames += [ws.receive_text(), ws.receive_text()]
        sid = json.loads(frames[0])["session_id"]
    with client.websocket_connect(WS + f"&session_id={sid}") as ws:
        frames += [ws.receive_text() for _ in range(3)]
    page = client.get("/tutor", params={"points": "caffeine", "learner": "ada", "session_id": sid}).text
    # the judge did produce the feedback, and the tutor model was shown it ...
    session = factory.started[sid]
    assert session.hidden_feedback and SECRET_FEEDBACK in session.hidden_feedback
    # ... but no frame and no page carries it, nor any of its parts
    for blob in [*frames, page]:
        for secret in (SECRET_FEEDBACK, "HIDDEN-FEEDBACK", "0.42", "confidence", "feedback", "score"):
            assert secret not in blob, (secret, blob)
    allowed = {"session", "history", "assistant_message", "progress"}
    assert {json.loads(f)["type"] for f in frames} <= allowed


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("not json", "not JSON"),
        ('{"type": "message"}', "content"),
        ('{"type": "message", "content": ""}', "content"),
        ('{"type": "shout", "content": "hi"}', "type"),
        ('{"type": "message", "content": "hi", "feedback": "x"}', "feedback"),
        ('["message"]', "bad frame"),
        (json.dumps({"type": "message", "content": "x" * 8001}), "8000"),
    ],
)
def test_bad_payload_gets_an_error_frame_and_the_socket_stays_open(client, raw, expected):
    script("judge", default=judge_says([]))
    script("tutor", default="Tell me more.")
    with client.websocket_connect(WS) as ws:
        opening(ws)
        ws.send_text(raw)
        frame = ws.receive_json()
        assert frame["type"] == "error" and expected in frame["message"]
        reply, progress = turn(ws, "still here")
        assert reply["content"] == "Tell me more." and progress["recalled"] == 0


def test_binary_frame_gets_an_error_frame(client):
    script("judge", default=judge_says([]))
    script("tutor", default="Tell me more.")
    with client.websocket_connect(WS) as ws:
        opening(ws)
        ws.send_bytes(b'{"type": "message", "content": "hi"}')
        frame = ws.receive_json()
        assert frame["type"] == "error" and "binary" in frame["message"]
        assert turn(ws, "still here")[0]["content"] == "Tell me more."


def test_resume_by_session_id_continues_the_conversation(client):
    script("judge", judge_says(["adenosine"]), judge_says(["tolerance"]))
    script("tutor", "First reply.", "Second reply.")
    with client.websocket_connect(WS) as ws:
        sid = opening(ws)[0]["session_id"]
        turn(ws, "adenosine")
    with client.websocket_connect(WS + f"&session_id={sid}") as ws:
        session, history, progress = opening(ws)
        assert session["session_id"] == sid
        assert history["messages"] == [
            {"role": "user", "content": "adenosine"},
            {"role": "assistant", "content": "First reply."},
        ]
        assert progress["recalled"] == 1
        reply, progress = turn(ws, "tolerance")
        assert reply["content"] == "Second reply." and progress["recalled"] == 2


def test_resume_from_the_factory_when_not_in_memory(client, factory):
    script("judge", default=judge_says(["adenosine"]))
    script("tutor", default="ok")
    with client.websocket_connect(WS) as ws:
        sid = opening(ws)[0]["session_id"]
        turn(ws, "adenosine")
    client.app.state.jurist.sessions._items.clear()  # as after a restart: only the factory knows it
    with client.websocket_connect(WS + f"&session_id={sid}") as ws:
        session, history, progress = opening(ws)
        assert session["session_id"] == sid and len(history["messages"]) == 2 and progress["recalled"] == 1


def test_unknown_session_or_another_learners_session_is_refused(client):
    script("judge", default=judge_says([]))
    script("tutor", default="ok")
    with client.websocket_connect(WS) as ws:
        sid = opening(ws)[0]["session_id"]
    for url in (WS + "&session_id=doesnotexist", f"ws://localhost/tutor/ws?points=caffeine&learner=eve&session_id={sid}"):
        with client.websocket_connect(url) as ws:
            frame = ws.receive_json()
            assert frame["type"] == "error" and "no session" in frame["message"]
            with pytest.raises(WebSocketDisconnect) as closed:
                ws.receive_json()
            assert closed.value.code == 4404


@pytest.mark.parametrize(
    "query, expected, code",
    [
        ("points=nope&learner=ada", "no checklist named 'nope'", 4404),
        ("points=../secret&learner=ada", "invalid checklist name", 4400),
        ("points=caffeine", "invalid learner", 4400),
        ("points=caffeine&learner=ada&session_id=../x", "invalid session_id", 4400),
    ],
)
def test_bad_connection_parameters_get_an_error_frame_then_close(client, query, expected, code):
    with client.websocket_connect("ws://localhost/tutor/ws?" + query) as ws:
        frame = ws.receive_json()
        assert frame["type"] == "error" and expected in frame["message"]
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_json()
        assert closed.value.code == code


def test_model_failure_is_an_error_frame_without_details(client):
    script("judge", AuthFailed("401 from provider: raw body with internals"), default=judge_says([]))
    script("tutor", default="fine")
    with client.websocket_connect(WS) as ws:
        opening(ws)
        ws.send_json({"type": "message", "content": "hello"})
        frame = ws.receive_json()
        assert frame == {"type": "error", "message": "the tutor could not answer (AuthFailed); try again"}
        reply, _ = turn(ws, "again")
        assert reply["content"] == "fine"


def test_a_session_that_cannot_start_is_an_error_frame_without_internals(checklist_dir):
    from fastapi.testclient import TestClient

    from jurist.config import Settings
    from jurist.server import create_app

    class Broken:
        async def start(self, points, learner):
            raise RuntimeError("secret internals: /var/lib/db password=hunter2")

        async def resume(self, session_id, points, learner):
            return None

    with TestClient(create_app(Settings(), checklist_dirs=[checklist_dir], session_factory=Broken()), base_url="http://localhost") as client:
        with client.websocket_connect(WS) as ws:
            frame = ws.receive_json()
            assert frame == {"type": "error", "message": "the tutor session could not start (RuntimeError)"}
            with pytest.raises(WebSocketDisconnect) as closed:
                ws.receive_json()
            assert closed.value.code == 1011
