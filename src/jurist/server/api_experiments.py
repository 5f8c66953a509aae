"""Datasets and experiments over HTTP.

* ``GET /api/datasets``: every dataset with its versions (oldest first)
* ``GET /api/datasets/{name}/items`` (``?version=``, a hash or a number; default the latest): a
  version's items
* ``POST /api/datasets/{name}/items``: add a stored evaluation as an item (its input and the
  answer that was judged, with the expected answer typed in): a new version of the dataset, the
  latest version's items and this one (a write; 201 with the new version)
* ``GET /api/experiments`` (``?dataset=``): experiments, newest first, each with its pass rate,
  items scored and failed and their cost, counted by the store (no item is read)
* ``GET /api/experiments/{name}``: one experiment's record and items
* ``GET /api/experiments/{a}/compare/{b}``: the comparison ``jurist experiment compare A B``
  prints, as JSON (400 when the runs are not like with like and ``allow_different`` is not
  true; it needs the ``analysis`` extra: 501 naming it without)

All SQL is in :mod:`jurist.store.experiments`; the statistics in
:mod:`jurist.experiments.compare`, run off the event loop.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, Field, JsonValue
from sqlalchemy.engine import Connection

from jurist.errors import InputError, NotFound
from jurist.experiments.compare import ALPHA, RESAMPLES, ExperimentComparison
from jurist.experiments.compare_store import stored_runs
from jurist.experiments.records import DatasetItem, DatasetVersion, ExperimentItem, ExperimentRecord
from jurist.server.auth import require_write
from jurist.server.errors import error_responses
from jurist.server.state import get_state
from jurist.store import dashboard as dq
from jurist.store import experiments as xq

router = APIRouter(tags=["experiments"])

NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"  # jurist.experiments.datasets.name_problem's rule
ITEM_ID = r"^[A-Za-z0-9_.:@/-]{1,300}$"


def _name(what: str) -> Any:
    """A path parameter naming a dataset or an experiment (a new one each time: FastAPI keeps per-route state
    on it)."""
    return Path(pattern=NAME, description=f"{what}'s name")


MAX_EXPECTED = 100_000  # characters of an expected answer typed in


class DatasetSummary(BaseModel):
    name: str
    versions: list[DatasetVersion]  # oldest first; the last is the latest


class DatasetItems(BaseModel):
    dataset: str
    version: DatasetVersion
    items: list[DatasetItem]


class ExperimentSummary(BaseModel):
    """An experiment as the list shows it: its record and its items counted in the store now
    (the record's counts are as of the run's last end)."""

    record: ExperimentRecord
    passed: int
    judged: int  # items with a pass/fail (scored)
    pass_rate: float | None
    scored: int = 0
    failed: int = 0
    cost_usd: float | None = None  # the finished items' known costs, summed (None: none known)
    cost_unknown: int = 0  # finished items whose cost is not known (not in cost_usd)


class ExperimentDetail(ExperimentSummary):
    items: list[ExperimentItem]


class NewItem(BaseModel):
    """A stored evaluation made a dataset item: its input and answer as judged, the expected answer typed in."""

    model_config = ConfigDict(extra="forbid")

    evaluation_id: str = Field(min_length=1, max_length=32, description="the stored evaluation (its trace page)")
    expected: str = Field(min_length=1, max_length=MAX_EXPECTED, description="the answer the item expects")
    item_id: str | None = Field(None, pattern=ITEM_ID, description="the item's id (default: the evaluation's "
                                "subject); unique in the dataset")
    metadata: dict[str, JsonValue] | None = Field(None, description="your own data, kept with the item")


class AddedItem(BaseModel):
    version: DatasetVersion
    item: DatasetItem
    answer: str  # the answer that was judged (kept in the item's metadata as judged_answer)


def refused(field: str, message: str) -> RequestValidationError:
    return RequestValidationError([{"type": "value_error", "loc": ("body", field), "msg": message}])


def summary_of(record: ExperimentRecord, tally: xq.ExperimentTally) -> ExperimentSummary:
    return ExperimentSummary(record=record, passed=tally.passed, judged=tally.judged, pass_rate=tally.pass_rate,
                             scored=tally.scored, failed=tally.failed, cost_usd=tally.cost_usd,
                             cost_unknown=tally.cost_unknown)


def _datasets(conn: Connection) -> list[DatasetSummary]:
    by_name: dict[str, list[DatasetVersion]] = {}
    for v in xq.list_dataset_versions(conn):
        by_name.setdefault(v.dataset, []).append(v)
    return [DatasetSummary(name=k, versions=v) for k, v in sorted(by_name.items())]


def _dataset_items(conn: Connection, name: str, version: str | None) -> DatasetItems:
    found = xq.get_dataset_version(conn, name, version)
    if found is None:
        if xq.get_dataset_version(conn, name) is None:
            raise NotFound(f"no dataset named {name!r}")
        raise NotFound(f"dataset {name!r} has no version {version!r}")
    return DatasetItems(dataset=name, version=found, items=xq.get_dataset_items(conn, name, found.dataset_version))


def _experiments(conn: Connection, dataset: str | None, limit: int) -> list[ExperimentSummary]:
    """Experiments, newest first, with their items counted by the store (no item is read)."""
    records = xq.list_experiments(conn, dataset, limit)
    tallies = xq.experiment_tallies(conn, [r.name for r in records])
    return [summary_of(r, tallies[r.name]) for r in records]


def _experiment(conn: Connection, name: str) -> ExperimentDetail:
    record = xq.get_experiment(conn, name)
    if record is None:
        raise NotFound(f"no experiment named {name!r}")
    tally = xq.experiment_tallies(conn, [name])[name]
    return ExperimentDetail(**summary_of(record, tally).model_dump(), items=xq.get_experiment_items(conn, name))


@router.get("/api/datasets", response_model=list[DatasetSummary])
async def list_datasets(request: Request) -> list[DatasetSummary]:
    """Every dataset with its versions, by name."""
    return await get_state(request).store.aread(_datasets)


@router.get("/api/datasets/{name}/items", response_model=DatasetItems, responses=error_responses(404, 422))
async def dataset_items(request: Request, name: str = _name("a dataset"),
                        version: str | None = Query(None, max_length=64, pattern=r"^[0-9a-f]+$",
                                                    description="a version's hash or number (default: the latest)")
                        ) -> DatasetItems:
    """One version's items, in the order of its file."""
    return await get_state(request).store.aread(_dataset_items, name, version)


def input_and_answer(found: dict[str, Any]) -> tuple[str | list[dict[str, JsonValue]], str]:
    """A stored evaluation's input (the user's text, or the conversation up to the judged answer) and the
    answer that was judged; a 422 naming why when the evaluation holds none."""
    from jurist.gate.records import GateRecord
    from jurist.payloads import read_payload
    from jurist.research.records import EvaluationRecord
    from jurist.rubrics.results import RubricResult

    ev = found["evaluation"]
    try:
        payload = read_payload(ev.get("kind"), ev.get("payload"))
    except Exception as exc:  # a payload no model reads: the trace page shows it as stored
        raise refused("evaluation_id", f"the evaluation's stored record cannot be read: {exc}") from None
    if isinstance(payload, RubricResult):
        transcript = getattr(payload, "transcript", None)
        if transcript is None or not transcript.turns:
            raise refused("evaluation_id", "the evaluation stored no transcript (it predates transcripts)")
        if transcript.omitted_chars:
            raise refused("evaluation_id", f"the stored transcript was cut ({transcript.omitted_chars:,} characters "
                                           "left out): an item made from it would not be what was judged")
        turns = transcript.turns
        last = max((i for i, t in enumerate(turns) if t.role == "assistant"), default=None)
        if last is None or last == 0:
            raise refused("evaluation_id", "the transcript has no answer after a user turn")
        before = [{"role": t.role, "content": t.content} for t in turns[:last]]
        if before[-1]["role"] != "user":
            raise refused("evaluation_id", "the judged answer does not follow a user turn")
        text: str | list[dict[str, JsonValue]] = before[0]["content"] if len(before) == 1 else \
            [dict(m) for m in before]
        return text, turns[last].content
    if isinstance(payload, GateRecord):
        question = payload.question
        if payload.continue_context:
            messages = [m for m in payload.continue_context if isinstance(m, dict)]
            if messages and messages[-1].get("role") == "user" and len(messages) > 1:
                return [dict(m) for m in messages], payload.answer
        if not question:
            raise refused("evaluation_id", "the gated request's record names no question")
        return question, payload.answer
    if isinstance(payload, EvaluationRecord):
        stage = payload.answer_evaluation
        if stage is None or not stage.attempts:
            raise refused("evaluation_id", "the research evaluation holds no answer")
        return payload.user_query, stage.attempts[-1].answer
    raise refused("evaluation_id", f"a {ev.get('kind')} evaluation has no question and answer to make an item of "
                                   "(rubric, gate and research evaluations do)")


def _field_of(reason: str) -> str:
    """The request's field an item's problem (:func:`jurist.experiments.datasets.check_item`'s reason) is about."""
    if reason.startswith("id "):
        return "item_id"
    if reason.startswith(("expected", "the item holds")):
        return "expected"
    if reason.startswith("metadata"):
        return "metadata"
    return "evaluation_id"  # the input the evaluation holds


def _add_item(conn: Connection, name: str, body: NewItem, found: dict[str, Any], text: str | list[dict[str, JsonValue]],
              answer: str) -> AddedItem:
    from jurist.experiments.datasets import check_item, content_version

    latest = xq.get_dataset_version(conn, name)
    items = xq.get_dataset_items(conn, name, latest.dataset_version) if latest is not None else []
    item_id = body.item_id or str(found["evaluation"]["subject_id"])
    metadata: dict[str, JsonValue] = {**(body.metadata or {}), "from_evaluation": body.evaluation_id,
                                      "judged_answer": answer}
    try:  # checked as a dataset file's line is: what the dataset exports reads back
        item = check_item({"id": item_id, "input": text, "expected": body.expected, "metadata": metadata},
                          f"evaluation {body.evaluation_id}")
    except InputError as exc:
        hint = " (the input, the judged answer and the expected one)" if exc.reason.startswith("the item holds") \
            else ": give item_id" if exc.reason.startswith("id ") else ""
        raise refused(_field_of(exc.reason), f"{exc}{hint}") from None
    if any(i.id == item.id for i in items):
        raise refused("item_id", f"dataset {name!r} already has an item {item.id!r}: give another item_id")
    new_items = [*items, item]
    version, _ = xq.add_dataset_version(conn, name, content_version(new_items), new_items,
                                        f"dashboard: evaluation {body.evaluation_id}")
    return AddedItem(version=version, item=item, answer=answer)


@router.post("/api/datasets/{name}/items", response_model=AddedItem, status_code=201,
             dependencies=[Depends(require_write)], responses=error_responses(401, 404, 422))
async def add_item(request: Request, body: NewItem, name: str = _name("a dataset")) -> AddedItem:
    """Add a stored evaluation to a dataset (a new dataset is made when there is none of that name): the
    item's input is the evaluation's (the user's text, or the conversation up to the judged answer), its
    expected answer the one given. The dataset gets a new version: its latest version's items, then this one."""
    state = get_state(request)
    found = await state.store.aread(dq.trace, body.evaluation_id)
    if found is None:
        raise NotFound(f"no evaluation with id {body.evaluation_id!r}")
    text, answer = input_and_answer(found)
    return await state.store.awrite(_add_item, name, body, found, text, answer)


@router.get("/api/experiments", response_model=list[ExperimentSummary], responses=error_responses(422))
async def list_experiments(request: Request, dataset: str | None = Query(None, pattern=NAME),
                           limit: int = Query(100, ge=1, le=1000)) -> list[ExperimentSummary]:
    """Experiments, newest first (of one dataset when given), with their pass rates."""
    return await get_state(request).store.aread(_experiments, dataset, limit)


@router.get("/api/experiments/{name}", response_model=ExperimentDetail, responses=error_responses(404, 422))
async def get_experiment(request: Request, name: str = _name("an experiment")) -> ExperimentDetail:
    """One experiment: its record, its items (answers, scores, evaluation ids) and its pass rate."""
    return await get_state(request).store.aread(_experiment, name)


@router.get("/api/experiments/{a}/compare/{b}", response_model=ExperimentComparison,
            responses=error_responses(400, 404, 422, 501))
async def compare(request: Request, a: str = _name("the baseline experiment"),
                  b: str = _name("the candidate experiment"),
                  allow_different: bool = Query(False, description="compare runs with different judges or dataset "
                                                "versions (the comparison says so)"),
                  alpha: float = Query(ALPHA, gt=0, lt=1), resamples: int = Query(RESAMPLES, ge=0, le=20_000),
                  seed: int = Query(0, ge=0, le=2**32 - 1)) -> ExperimentComparison:
    """Experiment B compared with A, item by item (the same as ``jurist experiment compare A B --json``)."""
    from jurist.extras import require_extra

    require_extra("analysis", "Comparing experiments")
    return await stored_comparison(request, a, b, allow_different=allow_different, alpha=alpha,
                                   resamples=resamples, seed=seed)


async def stored_comparison(request: Request, a: str, b: str, *, allow_different: bool, alpha: float = ALPHA,
                            resamples: int = RESAMPLES, seed: int = 0) -> ExperimentComparison:
    """Experiments ``a`` and ``b`` read from the server's store and compared off the event loop."""
    from jurist.experiments.compare import compare_experiments

    runs = await get_state(request).store.aread(stored_runs, a, b)
    return await asyncio.to_thread(compare_experiments, runs.a, runs.items_a, runs.b, runs.items_b,
                                   allow_different=allow_different, alpha=alpha, resamples=resamples, seed=seed,
                                   inputs=runs.inputs)


__all__ = ["router"]
