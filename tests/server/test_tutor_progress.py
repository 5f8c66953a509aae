"""The tutor page shows the learner the conversation only, unless the operator shows progress.

Note 000's criterion 17: the evaluation is invisible middleware. By default the
page has no progress count and the socket sends no progress frame; with
``tutor_progress`` (``jurist serve --tutor-progress``) both come back.
"""

from __future__ import annotations

import json

from jurist.models import script
from tests.server.fakes import judge_says

WS = "ws://localhost/tutor/ws?points=caffeine&learner=ada"
PAGE = {"points": "caffeine", "learner": "ada"}


def frames_of_three_turns(client, shown: bool) -> list[dict]:
    """Every frame of a session of three turns (with progress shown, each reply is followed by its counts)."""
    script("judge", judge_says(["adenosine"]), judge_says(["half-life", "tolerance"]), judge_says([]))
    script("tutor", "Right. And how long does it last?", "That is all of it.", "No, that was the list.")
    with client.websocket_connect(WS) as ws:
        frames = [ws.receive_json() for _ in range(3 if shown else 2)]  # session, history (, progress)
        for text in ("It blocks adenosine.", "Five hours; tolerance builds.", "Anything else?"):
            ws.send_json({"type": "message", "content": text})
            frames += [ws.receive_json(), ws.receive_json()] if shown else [ws.receive_json()]
    return frames


def test_by_default_the_page_shows_the_conversation_only(quiet_client):
    html = quiet_client.get("/tutor", params=PAGE).text
    assert 'id="conversation"' in html and 'id="composer"' in html
    assert 'id="progress"' not in html and 'id="recalled"' not in html and "points</p>" not in html


def test_by_default_the_socket_sends_no_progress(quiet_client):
    frames = frames_of_three_turns(quiet_client, shown=False)
    assert [f["type"] for f in frames] == ["session", "history", "assistant_message", "assistant_message",
                                           "assistant_message"]
    assert [f["content"] for f in frames[2:]] == ["Right. And how long does it last?", "That is all of it.",
                                                  "No, that was the list."]
    text = json.dumps(frames)
    assert "recalled" not in text and "adenosine" not in text.replace("It blocks adenosine.", "")


def test_with_progress_on_the_page_and_socket_show_the_counts(client):
    html = client.get("/tutor", params=PAGE).text
    assert '<span id="recalled">0</span> / <span id="total">3</span> points' in html
    frames = frames_of_three_turns(client, shown=True)
    assert [f["type"] for f in frames] == ["session", "history", "progress", "assistant_message", "progress",
                                           "assistant_message", "progress", "assistant_message", "progress"]
    assert frames[2] == {"type": "progress", "recalled": 0, "total": 3, "completed": False}
    assert frames[4] == {"type": "progress", "recalled": 1, "total": 3, "completed": False}
    assert frames[6] == {"type": "progress", "recalled": 3, "total": 3, "completed": True}
