"""The stored record of one checklist turn (the payload of a ``checklist`` evaluation).

One user message, judged against the points still unchecked: which were
recalled and how surely, the judge's observations, the hidden feedback for
the tutor, ids the judge invented (dropped), and the progress of the session.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

TURN_VERSION = "1.0"


class ChecklistTurn(BaseModel):
    model_config = ConfigDict(extra="allow")

    kind: Literal["checklist"] = "checklist"
    version: str = TURN_VERSION
    id: str
    session_id: str
    message_seq: int
    mode: str | None = None
    status: str  # ok | evaluation_failed | skipped
    judge_model: str | None = None
    unchecked: list[str] = Field(default_factory=list)  # point ids unchecked before this message
    recalled: dict[str, float] = Field(default_factory=dict)  # point id -> confidence
    observations: dict[str, str] = Field(default_factory=dict)
    feedback: str | None = None
    dropped_ids: list[str] = Field(default_factory=list)
    dropped_count: int = 0
    reason: str | None = None
    call_ids: list[str] = Field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    learner: str | None = None
    title: str | None = None
    recalled_count: int | None = None  # recalled after this message
    total_points: int | None = None

    def to_json(self) -> dict[str, object]:
        return self.model_dump(mode="json")
