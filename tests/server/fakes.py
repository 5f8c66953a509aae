"""A stand-in checklist session for the server tests, driven by scripted models.

It behaves like jurist.checklist's session as far as the server can see: a
judge call per user message (whose hidden feedback goes only to the tutor's
prompt), then a tutor reply, and progress counts.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from jurist.config import Settings
from jurist.models import ChatRequest, resolve_model
from jurist.server import TurnResult, VisibleMessage

SECRET_FEEDBACK = "HIDDEN-FEEDBACK-7f3a: learner confused adenosine with dopamine, confidence 0.42, score 3/5"


class FakeSession:
    def __init__(self, points: Path, learner: str, judge: str, tutor: str, settings: Settings) -> None:
        data = json.loads(points.read_text())
        self.session_id = uuid.uuid4().hex
        self.points = points
        self.learner = learner
        self.point_ids = [p["id"] for p in data["points"]]
        self.recalled: set[str] = set()
        self.messages: list[VisibleMessage] = []
        self.hidden_feedback: list[str] = []
        self.judge = resolve_model(judge, settings, cache=False)
        self.tutor = resolve_model(tutor, settings, cache=False)

    @property
    def recalled_count(self) -> int:
        return len(self.recalled)

    @property
    def total_points(self) -> int:
        return len(self.point_ids)

    @property
    def completed(self) -> bool:
        return self.recalled_count == self.total_points

    def opening(self) -> str | None:
        return "Tell me what you remember."

    def visible_messages(self) -> list[VisibleMessage]:
        return list(self.messages)

    async def process_user_message(self, content: str) -> TurnResult:
        self.messages.append(VisibleMessage("user", content))
        verdict = await self.judge.complete(ChatRequest(messages=[{"role": "user", "content": content}]))
        data = json.loads(verdict.text)
        self.recalled.update(p for p in data["recalled"] if p in self.point_ids)
        self.hidden_feedback.append(data["feedback"])
        reply = await self.tutor.complete(
            ChatRequest(messages=[{"role": "system", "content": "Hidden feedback: " + data["feedback"]},
                                  {"role": "user", "content": content}])
        )
        self.messages.append(VisibleMessage("assistant", reply.text))
        return TurnResult(reply.text, self.completed, self.recalled_count, self.total_points)


class FakeFactory:
    def __init__(self, judge: str = "scripted/judge", tutor: str = "scripted/tutor") -> None:
        self.judge, self.tutor = judge, tutor
        self.settings = Settings()
        self.started: dict[str, FakeSession] = {}

    async def start(self, points: Path, learner: str) -> FakeSession:
        session = FakeSession(points, learner, self.judge, self.tutor, self.settings)
        self.started[session.session_id] = session
        return session

    async def resume(self, session_id: str, points: Path, learner: str) -> FakeSession | None:
        s = self.started.get(session_id)
        return s if s is not None and s.points == points and s.learner == learner else None


def judge_says(recalled: list[str], feedback: str = SECRET_FEEDBACK) -> str:
    return json.dumps({"recalled": recalled, "feedback": feedback, "confidence": {p: 0.42 for p in recalled}})
