"""The tutor socket's server frames keep their JSON: the same keys, in the same order."""

import json

from jurist.server.tutor_ws import (AssistantFrame, HistoryFrame, HistoryMessage, SessionFrame, error_frame,
                                    progress_frame)


def test_frames_dump_as_before():
    frames = [SessionFrame(session_id="s1", points="bio", title="Cells"),
              HistoryFrame(opening=None, messages=[HistoryMessage(role="user", content="hi")]),
              AssistantFrame(content="Right."), progress_frame(1, 3, False), error_frame("no")]
    assert [json.dumps(f.model_dump()) for f in frames] == [
        '{"type": "session", "session_id": "s1", "points": "bio", "title": "Cells"}',
        '{"type": "history", "opening": null, "messages": [{"role": "user", "content": "hi"}]}',
        '{"type": "assistant_message", "content": "Right."}',
        '{"type": "progress", "recalled": 1, "total": 3, "completed": false}',
        '{"type": "error", "message": "no"}']
