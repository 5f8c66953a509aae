"""The dashboard's datasets and experiments.

* ``/evaluation/datasets``: every dataset with its versions; ``/evaluation/datasets/{name}``
  (``?version=``): one version's items (inputs, expected answers, metadata), and its versions
* ``/evaluation/experiments``: experiments, newest first (dataset version, target, judge,
  pass rate, cost), with a form that compares two
* ``/evaluation/experiments/{name}``: one experiment's items, each with its answer, scores and a
  link to the stored evaluation's trace
* ``/evaluation/compare?a=&b=``: B compared with A, the data ``jurist experiment compare`` prints
  (it needs the ``analysis`` extra: without it the page names the extra)
* ``/evaluation/evaluations/{id}/add-to-dataset``: a stored evaluation's input and judged answer,
  with a form that adds it to a dataset with the expected answer typed in (``POST
  /api/datasets/{name}/items``: a new version of the dataset)

Everything shown is data (autoescaped templates); reads run off the event loop through the
API's functions (:mod:`jurist.server.api_experiments`).
"""

from __future__ import annotations

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from jurist.errors import NotFound, UsageError
from jurist.experiments.compare import ItemRow
from jurist.extras import missing_extra
from jurist.server import api_experiments as api
from jurist.server.dashboard import not_found, render
from jurist.server.state import get_state
from jurist.store import dashboard as dq

router = APIRouter(prefix="/evaluation", include_in_schema=False)

PAGE_EXPERIMENTS = 200  # the newest listed
PAGE_ITEMS = 500  # items shown on a page (the page says how many it leaves to the API)


def _rank(row: ItemRow) -> tuple[int, str]:
    """The comparison's rows, what a reader looks for first: regressions, items not compared,
    improvements, other changes, then the items that scored the same."""
    if row.change == "regression":
        return 0, row.item_id
    if row.not_paired:
        return 1, row.item_id
    if row.change == "improvement":
        return 2, row.item_id
    return (3 if row.difference else 4), row.item_id


@router.get("/datasets", response_class=HTMLResponse)
async def datasets_page(request: Request) -> HTMLResponse:
    datasets = await get_state(request).store.aread(api._datasets)
    return render(request, "datasets.html", {"active": "datasets", "datasets": datasets})


@router.get("/datasets/{name}", response_class=HTMLResponse)
async def dataset_page(request: Request, name: str,
                       version: str | None = Query(None, max_length=64, pattern=r"^[0-9a-f]+$")) -> HTMLResponse:
    store = get_state(request).store
    try:
        found = await store.aread(api._dataset_items, name, version)
    except NotFound as exc:
        return not_found(request, str(exc))
    versions = [v for d in await store.aread(api._datasets) if d.name == name for v in d.versions]
    experiments = await store.aread(api._experiments, name, PAGE_EXPERIMENTS)
    return render(request, "dataset.html", {"active": "datasets", "dataset": found, "versions": versions,
                                            "shown": found.items[:PAGE_ITEMS],
                                            "experiments": [e for e in experiments
                                                            if e.record.dataset_version == found.version.dataset_version]})


@router.get("/experiments", response_class=HTMLResponse)
async def experiments_page(request: Request) -> HTMLResponse:
    experiments = await get_state(request).store.aread(api._experiments, None, PAGE_EXPERIMENTS)
    return render(request, "experiments.html", {"active": "experiments", "experiments": experiments})


@router.get("/experiments/{name}", response_class=HTMLResponse)
async def experiment_page(request: Request, name: str) -> HTMLResponse:
    try:
        detail = await get_state(request).store.aread(api._experiment, name)
    except NotFound as exc:
        return not_found(request, str(exc))
    return render(request, "experiment.html", {"active": "experiments", "e": detail, "record": detail.record,
                                               "shown": detail.items[:PAGE_ITEMS]})


@router.get("/compare", response_class=HTMLResponse)
async def compare_page(request: Request, a: str = Query(..., max_length=100), b: str = Query(..., max_length=100),
                       allow_different: bool = Query(False)) -> HTMLResponse:
    context: dict[str, object] = {"active": "experiments", "a": a, "b": b, "allow_different": allow_different,
                                  "comparison": None, "problem": None, "refused": False}
    problem = missing_extra("analysis", "Comparing experiments")
    if problem is None:
        try:
            comparison = await api.stored_comparison(request, a, b, allow_different=allow_different)
            context["comparison"] = comparison
            context["shown"] = sorted(comparison.items, key=_rank)[:PAGE_ITEMS]
        except NotFound as exc:
            return not_found(request, str(exc))
        except UsageError as exc:
            problem, context["refused"] = str(exc), True
    context["problem"] = problem
    return render(request, "compare.html", context)


@router.get("/evaluations/{evaluation_id}/add-to-dataset", response_class=HTMLResponse)
async def add_to_dataset_page(request: Request, evaluation_id: str) -> HTMLResponse:
    state = get_state(request)
    found = await state.store.aread(dq.trace, evaluation_id)
    if found is None:
        return not_found(request, f"No evaluation with id {evaluation_id!r}.")
    problem, text, answer = None, None, None
    try:
        text, answer = api.input_and_answer(found)
    except Exception as exc:  # a RequestValidationError naming why this evaluation makes no item
        errors = getattr(exc, "errors", None)
        problem = errors()[0]["msg"] if callable(errors) else str(exc)
    datasets = await state.store.aread(api._datasets)
    return render(request, "add_to_dataset.html", {
        "active": "datasets", "evaluation": found["evaluation"], "input": text, "answer": answer, "problem": problem,
        "datasets": datasets, "token_required": bool(state.settings.api_token)})


__all__ = ["router"]
