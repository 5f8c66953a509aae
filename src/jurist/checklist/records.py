"""The checklist's records: the evaluation of one user message, and the stored turn.

:class:`BatchEvaluation` is the evaluator's result in memory: which of the
unchecked points the learner recalled and how surely, the judge's observations,
the hidden feedback for the tutor, ids the judge invented (dropped), and the
outcome :data:`~jurist.judges.outcome.Status` (``ok | failed | skipped``).

:class:`ChecklistTurn` is the stored record of one turn (the payload of a
``checklist`` evaluation): the evaluation, where in the session it was made, and
the progress of the session. Its ``status`` is stored and shown by its documented
name, ``ok | evaluation_failed | skipped`` (:data:`TURN_STATUS`); either name is
read back.
"""

from __future__ import annotations

from typing import Any, Final, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field, field_serializer, field_validator

from jurist.judges.outcome import OK, Status

TURN_VERSION = "1.0"
Mode = Literal["recall", "rabbithole"]  # the tutoring modes
#: A checklist turn's stored (and shown) name for each outcome status.
TurnStatus = Literal["ok", "evaluation_failed", "skipped"]
TURN_STATUS: Final[Mapping[Status, TurnStatus]] = {"ok": "ok", "failed": "evaluation_failed", "skipped": "skipped"}
_OUTCOME_STATUS: Final[Mapping[str, Status]] = {name: status for status, name in TURN_STATUS.items()}


def _outcome_status(value: Any) -> Any:
    """A status given by its stored name read as the outcome's (``evaluation_failed`` is ``failed``)."""
    return _OUTCOME_STATUS.get(value, value) if isinstance(value, str) else value


class BatchEvaluation(BaseModel):
    """Which unchecked points the learner recalled, how surely, and feedback for the tutor."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    recalled_point_ids: list[str] = Field(default_factory=list)
    confidence_per_point: dict[str, float] = Field(default_factory=dict)
    feedback: str = ""
    status: Status = OK
    reason: str | None = None
    observations: dict[str, str] = Field(default_factory=dict)
    dropped_ids: list[str] = Field(default_factory=list)  # ids the judge invented
    # ids the judge could not decide (inside its band of uncertainty; ``reason`` says why): not recalled
    undecided_ids: list[str] = Field(default_factory=list)
    judge_model: str | None = None
    call_ids: list[str] = Field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def turn_status(self) -> TurnStatus:
        """``status`` by the stored turn's name: ``ok | evaluation_failed | skipped``."""
        return TURN_STATUS[self.status]


class ChecklistTurn(BaseModel):
    """One turn as stored: :meth:`of` builds it from the turn's :class:`BatchEvaluation`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["checklist"] = "checklist"
    version: str = TURN_VERSION
    id: str
    session_id: str
    message_seq: int
    mode: Mode | None = None
    status: Status  # stored as ok | evaluation_failed | skipped (TURN_STATUS)
    judge_model: str | None = None
    unchecked: list[str] = Field(default_factory=list)  # point ids unchecked before this message
    recalled: dict[str, float] = Field(default_factory=dict)  # point id -> confidence
    observations: dict[str, str] = Field(default_factory=dict)
    feedback: str | None = None
    dropped_ids: list[str] = Field(default_factory=list)
    dropped_count: int = 0
    undecided: list[str] = Field(default_factory=list)  # point ids the judge could not decide (see reason)
    reason: str | None = None
    call_ids: list[str] = Field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    learner: str | None = None
    title: str | None = None
    recalled_count: int | None = None  # recalled after this message
    total_points: int | None = None

    _validate_status = field_validator("status", mode="before")(_outcome_status)

    @field_serializer("status")
    def _stored_status(self, status: Status) -> TurnStatus:
        return TURN_STATUS[status]

    @classmethod
    def of(cls, evaluation: BatchEvaluation, *, id: str, session_id: str, message_seq: int, mode: Mode,
           unchecked: list[str], learner: str | None = None, title: str | None = None,
           recalled_count: int | None = None, total_points: int | None = None) -> "ChecklistTurn":
        """The stored turn of ``evaluation``: its fields under their stored names, and the session's."""
        kept = evaluation.model_dump(include={"status", "judge_model", "observations", "feedback", "dropped_ids",
                                              "reason", "call_ids", "input_tokens", "output_tokens"})
        return cls(**kept, id=id, session_id=session_id, message_seq=message_seq, mode=mode, unchecked=unchecked,
                   recalled=dict(evaluation.confidence_per_point), dropped_count=len(evaluation.dropped_ids),
                   undecided=list(evaluation.undecided_ids),
                   learner=learner, title=title, recalled_count=recalled_count, total_points=total_points)

    @property
    def turn_status(self) -> TurnStatus:
        """``status`` by its stored name: ``ok | evaluation_failed | skipped``."""
        return TURN_STATUS[self.status]

    def to_json(self) -> dict[str, object]:
        return self.model_dump(mode="json")
