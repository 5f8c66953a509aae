"""result.json and summary.json as pydantic models (the files are written from them).

Field names and their order are the files' documented format
(docs/rubrics.md). A few keys are written only when they apply (``cached``,
``items``, an item's ``reasoning`` / ``confidence`` / ``evidence``, ``score_range``,
``truncated``, ``images``, and under score mode ``logprobs`` ``score_mode``,
``weighted_score`` / ``logprobs_unavailable``): those are the fields marked *optional*, written when given and
left out otherwise, so a file read back is written again byte for byte.

A :class:`RubricResult` is also the payload of the store's ``rubric``
evaluations: ``kind`` and ``version`` name its format; a result written before
``kind`` existed reads as ``kind="rubric"``. The stored payload also carries
the session's ``transcript`` (bounded, :class:`Transcript`), which result.json
does not: the store keeps what was judged even when the session was posted or
built in memory, or its file is gone.
"""

from __future__ import annotations

from typing import Any, ClassVar, Final, Literal, Mapping

from pydantic import (BaseModel, ConfigDict, Field, JsonValue, SerializerFunctionWrapHandler, field_serializer,
                      field_validator, model_serializer)

from jurist.judges.outcome import Status

RESULT_KIND: Final = "rubric"
RESULT_VERSION = "1.0"
#: result.json's (and the store's score rows') names for a rubric's outcome status.
FILE_STATUS: Final[Mapping[str, str]] = {"ok": "scored", "failed": "evaluation_failed", "skipped": "skipped"}
_OUTCOME_STATUS: Final[Mapping[str, str]] = {name: status for status, name in FILE_STATUS.items()}


class _FileModel(BaseModel):
    """Base: extra keys are kept (a newer file read by an older jurist); the
    ``_optional`` fields are written only when they were given; numbers are
    finite (JSON has no NaN or infinity, and the store takes none)."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)
    _optional: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _given_optionals(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        data: dict[str, object] = handler(self)
        for name in self._optional - self.model_fields_set:
            data.pop(name, None)
        return data

    def to_json(self) -> dict[str, JsonValue]:
        """The model as the file's JSON data."""
        return self.model_dump(mode="json")


class ItemDecision(_FileModel):
    """One criterion of an item-based rubric: met or not, and why (an LLM judge
    gives ``reasoning``; the local judge ``confidence`` and ``evidence``)."""

    _optional = frozenset({"reasoning", "confidence", "evidence"})

    id: str
    text: str
    points: float
    met: bool | None  # null: the judge could not decide (the rubric's score is then a range, score_range)
    reasoning: str | None = None
    confidence: float | None = None
    evidence: str | None = None


class Tokens(_FileModel):
    input: int = 0
    output: int = 0


class RubricScore(_FileModel):
    """One rubric's outcome: what :class:`~jurist.rubrics.judging.RubricJudge` returns, and its
    entry of ``rubric_scores``. With score mode ``logprobs``, ``weighted_score`` (the
    expectation over the scale's tokens) stands beside the plain ``score``, or
    ``logprobs_unavailable`` says why there is none.

    ``status`` is the outcome's (``ok`` | ``failed``); the file writes it by its documented
    name, ``scored`` | ``evaluation_failed`` (:data:`FILE_STATUS`), and reads either.
    ``template_hash`` and ``call_ids`` (the judge's calls) are kept in memory for the
    store's score row; the file does not carry them."""

    _optional = frozenset({"cached", "items", "score_mode", "weighted_score", "logprobs_unavailable",
                           "local_thresholds", "score_range"})

    rubric_id: str
    rubric_name: str
    score: float | None
    max_score: float
    reasoning: str | None = None
    status: Status  # ok | failed; in the file: scored | evaluation_failed
    weight: float = 1.0
    judge_model: str | None = None
    tokens: Tokens = Field(default_factory=Tokens)
    latency_ms: float = 0.0
    cached: bool = False
    items: list[ItemDecision] | None = None
    score_mode: str | None = None
    weighted_score: float | None = None
    logprobs_unavailable: str | None = None
    local_thresholds: str | None = None  # the offline judge's thresholds fitted by a calibration, when it used them
    # an item-based rubric the judge could not decide (status failed, reason "uncertain: ..."): the lowest and
    # highest score its undecided items allow; its items say which were decided (met null: undecided)
    score_range: tuple[float, float] | None = None
    template_hash: str | None = Field(None, exclude=True)
    call_ids: list[str] = Field(default_factory=list, exclude=True)

    @field_validator("status", mode="before")
    @classmethod
    def _outcome_status(cls, value: Any) -> Any:
        return _OUTCOME_STATUS.get(value, value) if isinstance(value, str) else value

    @field_validator("score_range")
    @classmethod
    def _low_to_high(cls, value: tuple[float, float] | None) -> tuple[float, float] | None:
        if value is not None and value[0] > value[1]:
            raise ValueError(f"the low end ({value[0]:g}) is above the high end ({value[1]:g})")
        return value

    @field_serializer("status")
    def _file_status(self, status: Status) -> str:
        return FILE_STATUS[status]

    @property
    def file_status(self) -> str:
        """``status`` by result.json's name: ``scored`` | ``evaluation_failed``."""
        return FILE_STATUS[self.status]

    @property
    def final_score(self) -> float | None:
        """The score totals use: the weighted one where there is one, else the plain one."""
        return self.weighted_score if self.weighted_score is not None else self.score


class ResultSummary(_FileModel):
    total_score: float | None
    max_score: float
    percentage: float | None
    rubrics_evaluated: int
    rubrics_failed: int


class Truncation(_FileModel):
    omitted_chars: int


class TranscriptTurn(_FileModel):
    role: str
    content: str


class Transcript(_FileModel):
    """A session's turns as the store keeps them with its evaluation: at most
    ``TRANSCRIPT_CHARS`` characters of content in all; over that, the longest turns
    are cut to one length (short turns, such as most user turns, stay whole) and
    ``omitted_chars`` counts what was cut."""

    turns: list[TranscriptTurn]
    omitted_chars: int = 0

    def text_of(self, role: str) -> str:
        return "\n".join(t.content for t in self.turns if t.role == role)


class ImagesNote(_FileModel):
    """A session's images: how many, and the vision model that was sent them (``judge_model``),
    or why the judge did not see them (``not_seen``)."""

    _optional = frozenset({"judge_model", "not_seen"})

    count: int
    judge_model: str | None = None
    not_seen: str | None = None


class RubricResult(_FileModel):
    """result.json: one session scored against a rubric set (as a stored payload, with its
    ``transcript``)."""

    _optional = frozenset({"truncated", "images", "transcript"})

    kind: Literal["rubric"] = RESULT_KIND
    version: str = RESULT_VERSION
    session_id: str
    evaluated_at: str
    rubrics_version: str | None = None
    status: str  # scored | partial | failed
    judge_model: str | None = None
    trace_id: str | None = None
    rubric_scores: list[RubricScore] = Field(default_factory=list)
    summary: ResultSummary
    truncated: Truncation | None = None
    images: ImagesNote | None = None
    transcript: Transcript | None = None  # in the stored payload only, never in result.json


# -- summary.json ---------------------------------------------------------------------
class BatchStats(_FileModel):
    total_sessions: int
    average_score: float | None
    median_score: float | None
    std_deviation: float | None
    score_distribution: dict[str, int]
    max_score: float


class RubricStats(_FileModel):
    name: str
    average: float | None
    median: float | None
    scored: int
    failed: int
    failure_rate: float


class FailureCounts(_FileModel):
    evaluations_failed: int
    sessions_with_failures: int
    sessions_without_score: int
    input_errors: list[str] = Field(default_factory=list)


class BatchCost(_FileModel):
    """What the judge calls made by this run of a batch cost (earlier runs of a resumed batch
    are not counted; calls answered from the call cache cost 0). ``cost_usd`` is the known part;
    ``cost_unknown_calls`` calls had no known price, for the reasons in ``unknown_reasons``
    (reason -> calls). With ``--max-cost``: ``max_cost_usd``, and ``stopped_by_budget`` with the
    ``sessions_not_scored`` left for a rerun when the budget ran out."""

    _optional = frozenset({"max_cost_usd", "unknown_reasons"})

    cost_usd: float
    calls: int
    cost_unknown_calls: int
    unknown_reasons: dict[str, int] = Field(default_factory=dict)
    max_cost_usd: float | None = None
    stopped_by_budget: bool = False
    sessions_not_scored: int = 0


class BatchSummary(_FileModel):
    """summary.json: the statistics of a batch; ``cost`` when the batch ran in this process
    (a Ray batch's calls are made by its workers: see ``jurist logs``)."""

    _optional = frozenset({"cost"})

    batch_summary: BatchStats
    per_rubric_summary: dict[str, RubricStats]
    failures: FailureCounts
    rubrics_version: str | None = None
    cost: BatchCost | None = None
