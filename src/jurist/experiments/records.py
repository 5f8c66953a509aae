"""The typed records of datasets and experiments (stored payloads: ``kind`` + ``version``).

* :class:`DatasetItem`: one test input with the answer(s) it expects. ``input`` is the
  user's text, or a list of chat messages in the session format (``role``, ``content``, ...,
  the last one a user turn); ``expected`` is the reference answer, a list of acceptable
  ones, or None.
* :class:`DatasetVersion`: one version of a named dataset. Its ``version`` is the hash of
  its items' content: the same items give the same version.
* :class:`ExperimentRecord`: one run of a target over a dataset version, judged by a
  rubric set: what ran (dataset version, target, rubrics with their template hashes, judge
  models, jurist version, git commit) and how it went (status, counts, cost).
* :class:`ExperimentItem`: one item of an experiment: the target's answer (or the error
  that failed it), each rubric's score and the overall score, the stored evaluation's id,
  the item's cost and latency.

These shapes are what ``jurist experiment compare`` and the dashboard read; fields added
later get defaults, so records stored earlier keep loading.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

DATASET_ITEM_VERSION = "1.0"
DATASET_VERSION_VERSION = "1.0"
EXPERIMENT_VERSION = "1.0"
EXPERIMENT_ITEM_VERSION = "1.0"

#: How an experiment stands: ``running`` (or killed while running: a rerun of the same name
#: goes on), ``finished`` (every item has a result: scored or failed), ``interrupted``
#: (Ctrl-C), ``stopped`` (its cost reached ``--max-cost``).
ExperimentStatus = Literal["running", "finished", "interrupted", "stopped"]
#: An item's status: ``scored`` (answered and judged: every rubric scored), ``failed`` (the
#: target failed, or a rubric could not be scored: ``error`` says why).
ItemStatus = Literal["scored", "failed"]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class DatasetItem(_Record):
    """One item of a dataset (a line of its JSONL file)."""

    id: str
    input: str | list[dict[str, JsonValue]]  # text, or chat messages in the session format
    expected: str | list[str] | None = None  # the reference answer, or the acceptable ones
    metadata: dict[str, JsonValue] | None = None  # the user's own data: kept, never read

    @property
    def expected_answers(self) -> tuple[str, ...]:
        """``expected`` as a tuple (empty when there is none)."""
        if self.expected is None:
            return ()
        return (self.expected,) if isinstance(self.expected, str) else tuple(self.expected)


class DatasetVersion(_Record):
    """One version of a named dataset: its content hash, where it came from, how many items."""

    kind: Literal["dataset_version"] = "dataset_version"
    version: str = DATASET_VERSION_VERSION  # the record's format
    dataset: str  # the dataset's name
    dataset_version: str  # the hash of its items' content (a short hex prefix of sha256)
    number: int  # 1 for the dataset's first version, then 2, 3, ... in the order they were added
    items: int
    source: str | None = None  # the file it was added from
    created_at: str  # ISO 8601 UTC


class RubricRef(_Record):
    """A rubric an experiment judged with, and the hash of the judge template it used."""

    id: str
    name: str
    weight: float = 1.0
    template_hash: str | None = None


class ExperimentRecord(_Record):
    """One experiment: a target run over a dataset version and judged with a rubric set."""

    kind: Literal["experiment"] = "experiment"
    version: str = EXPERIMENT_VERSION
    name: str
    dataset: str
    dataset_version: str
    target: str  # a model reference or python:module:function
    rubrics_file: str | None = None
    rubrics_version: str | None = None
    rubrics: list[RubricRef] = Field(default_factory=list)
    judge_models: list[str] = Field(default_factory=list)
    jurist_version: str
    git_commit: str | None = None  # HEAD of the working folder's git checkout, "-dirty" when it has changes
    status: ExperimentStatus = "running"
    created_at: str  # ISO 8601 UTC
    finished_at: str | None = None
    items_total: int = 0
    items_scored: int = 0
    items_failed: int = 0
    cost_usd: float | None = None  # the experiment's total, where every call's cost is known
    cost_note: str | None = None  # why the cost is unknown or partial
    output_dir: str | None = None


class ItemScore(_Record):
    """One rubric's score of an item's answer."""

    score: float | None
    max_score: float
    passed: bool | None  # score at least PASS_PERCENTAGE of the scale; None when not scored
    status: str  # scored | evaluation_failed
    reason: str | None = None


class ExperimentItem(_Record):
    """One item of an experiment: the answer and its scores, or why it failed."""

    kind: Literal["experiment_item"] = "experiment_item"
    version: str = EXPERIMENT_ITEM_VERSION
    experiment: str
    item_id: str
    status: ItemStatus
    answer: str | None = None
    error: str | None = None
    scores: dict[str, ItemScore] = Field(default_factory=dict)  # rubric id -> its score
    score: float | None = None  # the weighted total, on the rubric set's scale
    max_score: float | None = None
    percentage: float | None = None
    passed: bool | None = None
    evaluation_id: str | None = None  # the stored evaluation (its trace id) when the answer was judged
    generation_call_id: str | None = None  # the target's recorded call (llm_calls.id)
    cost_usd: float | None = None
    cost_note: str | None = None
    latency_ms: float | None = None  # the target's generation
    judged_at: str  # ISO 8601 UTC
