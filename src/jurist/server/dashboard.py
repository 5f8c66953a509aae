"""The dashboard at ``/evaluation``: server-rendered pages over the stored evaluations.

Overview (aggregates and charts; the last 30 days unless ``period`` or a date
range says otherwise), explorer (filtered, paginated list), one evaluation's
trace (titled by what was asked; every judge call with prompt and raw response), the
research runtime view (progressive disclosure per stage), failure patterns
and the prompt lab. Pages are Jinja2 templates (autoescaped; nothing from the
database is ever marked safe); charts are plotly figures built here and drawn
by plotly.js served from this server, so the pages work offline. Every read
runs off the event loop; the query parameters are validated by the API's
``evaluation_filter`` (bad values are 422).

The charts and the statistics (A/B comparison, calibration, running an
analysis) need the ``analysis`` extra (plotly, scipy): without it the pages
render their tables and show a notice naming the extra where a chart or a
statistic would be.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from datetime import date, datetime, timedelta, timezone
from typing import Any, Callable, Literal, Mapping
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, Response

from jurist.errors import InputError, NotFound
from jurist.extras import missing_extra
from jurist.models.cost import format_usd
from jurist.server import dashboard_views as views
from jurist.server.api_evaluations import evaluation_filter
from jurist.server.state import get_state
from jurist.server.tutor import templates
from jurist.store import dashboard as q
from jurist.store.labels import labels_of

router = APIRouter(prefix="/evaluation", include_in_schema=False)

# Scripts and styles from this origin only (plotly sets inline styles on its SVG).
CSP = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
       "font-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
# The overview's periods: key -> (label, days; None: all time). "Last 30 days" by default, as note 002 draws it.
PERIODS: dict[str, tuple[str, int | None]] = {
    "7d": ("Last 7 days", 7), "30d": ("Last 30 days", 30), "90d": ("Last 90 days", 90),
    "365d": ("Last 12 months", 365), "all": ("All time", None)}
DEFAULT_PERIOD = "30d"
Period = Literal["7d", "30d", "90d", "365d", "all"]
NAV = (("overview", "Overview", "/evaluation"), ("explorer", "Explorer", "/evaluation/explorer"),
       ("patterns", "Patterns", "/evaluation/patterns"), ("prompts", "Prompt lab", "/evaluation/prompts"),
       ("calibration", "Calibration", "/evaluation/calibration"), ("datasets", "Datasets", "/evaluation/datasets"),
       ("experiments", "Experiments", "/evaluation/experiments"))


@functools.lru_cache(maxsize=1)
def _plotly_js() -> bytes:
    from plotly.offline import get_plotlyjs

    js: str = get_plotlyjs()
    return js.encode("utf-8")


def _plotly_src() -> str | None:
    """plotly.js's address on this server (None without the ``analysis`` extra)."""
    if charts_notice() is not None:
        return None
    import plotly

    return f"/evaluation/assets/plotly.min.js?v={plotly.__version__}"


def charts_notice() -> str | None:
    """None when the charts can be drawn, else the notice shown where a chart would be."""
    return missing_extra("analysis", "Drawing charts")


def render(request: Request, template: str, context: Mapping[str, object], status_code: int = 200) -> HTMLResponse:
    env = templates(request)
    env.env.filters.update(views.FILTERS)
    response = env.TemplateResponse(
        request, f"dashboard/{template}", {"nav": NAV, "plotly_src": _plotly_src(), **context},
        status_code=status_code)
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    return response


def not_found(request: Request, message: str) -> HTMLResponse:
    return render(request, "not_found.html", {"active": None, "message": message}, status_code=404)


def _query(request: Request, **changes: Any) -> str:
    """The current query string with ``changes`` applied (None drops a key)."""
    params = {k: v for k, v in request.query_params.items() if v != ""}
    for k, v in changes.items():
        if v is None:
            params.pop(k, None)
        else:
            params[k] = str(v)
    return urlencode(params)


@router.get("/assets/plotly.min.js")
async def plotly_js() -> Response:
    """plotly.js from the installed plotly package (no CDN); a JSON 404 naming the
    ``analysis`` extra without it."""
    notice = charts_notice()
    if notice is not None:
        raise NotFound(notice)
    body = await asyncio.to_thread(_plotly_js)
    return Response(body, media_type="application/javascript; charset=utf-8",
                    headers={"Cache-Control": "public, max-age=31536000, immutable"})


def period_filter(flt: q.EvaluationFilter, period: Period | None,
                  today: date | None = None) -> tuple[q.EvaluationFilter, str, str]:
    """The overview's date range: ``since``/``until`` when given (then the period is "custom"),
    else the period's days up to today, whole UTC days (``30d``: today and the 29 days before).
    Returns the filter, the period's key and its label."""
    if flt.since is not None or flt.until is not None:
        return flt, "custom", "Custom range"
    key: str = period or DEFAULT_PERIOD
    label, days = PERIODS[key]
    if days is None:
        return flt, key, label
    start = (today or datetime.now(timezone.utc).date()) - timedelta(days=days - 1)
    return dataclasses.replace(flt, since=datetime(start.year, start.month, start.day, tzinfo=timezone.utc)), key, label


def _explorer_link(request: Request, flt: q.EvaluationFilter) -> Callable[..., str]:
    """``explorer(**changes)``: the explorer's address with the overview's filters (the query string
    without ``period``, with the date range the period stands for) and ``changes`` applied."""
    params = {k: v for k, v in request.query_params.items() if v != "" and k != "period"}
    for key in ("since", "until"):
        value = getattr(flt, key)
        if value is not None and key not in params:
            params[key] = value.date().isoformat()

    def explorer(**changes: Any) -> str:
        query = urlencode({**params, **{k: str(v).lower() if isinstance(v, bool) else str(v)
                                        for k, v in changes.items()}})
        return f"/evaluation/explorer?{query}" if query else "/evaluation/explorer"

    return explorer


@router.get("", response_class=HTMLResponse)
async def overview_page(
    request: Request,
    flt: q.EvaluationFilter = Depends(evaluation_filter),
    period: Period | None = Query(None, description="7d | 30d (the default) | 90d | 365d | all; since/until win"),
) -> HTMLResponse:
    flt, period_key, period_label = period_filter(flt, period)
    data = await get_state(request).store.aread(q.overview, flt)
    notice, figures = charts_notice(), {}
    if notice is None:
        from jurist.server.dashboard_charts import overview_figures

        figures = await asyncio.to_thread(overview_figures, data)
    return render(request, "overview.html", {
        "active": "overview", "data": data, "figures": figures, "chart_notice": notice,
        "params": dict(request.query_params), "kinds": q.KINDS, "explorer": _explorer_link(request, flt),
        "periods": [(k, label) for k, (label, _) in PERIODS.items()], "period": period_key,
        "period_label": period_label, "since": flt.since, "until": flt.until,
        "cost": format_usd(data.calls.cost_usd)})


@router.get("/explorer", response_class=HTMLResponse)
async def explorer_page(
    request: Request,
    flt: q.EvaluationFilter = Depends(evaluation_filter),
    page: int = Query(1, ge=1, le=100_000),
    page_size: int = Query(50, ge=1, le=200),
) -> HTMLResponse:
    store = get_state(request).store
    listing, failures = await asyncio.gather(store.aread(q.list_page, flt, page=page, page_size=page_size),
                                             store.aread(q.failure_types))
    pages = max(1, -(-listing.total // page_size))
    return render(request, "explorer.html", {
        "active": "explorer", "listing": listing, "failures": failures, "kinds": q.KINDS,
        "params": dict(request.query_params), "pages": pages,
        "prev_query": _query(request, page=page - 1) if page > 1 else None,
        "next_query": _query(request, page=page + 1) if page < pages else None})


@router.get("/evaluations/{evaluation_id}", response_class=HTMLResponse)
async def trace_page(request: Request, evaluation_id: str) -> HTMLResponse:
    found = await get_state(request).store.aread(q.trace, evaluation_id)
    if found is None:
        return not_found(request, f"No evaluation with id {evaluation_id!r}.")
    view = await asyncio.to_thread(views.trace_view, found)
    state = get_state(request)
    ev = found["evaluation"]
    labels = await state.store.aread(labels_of, ev["subject_id"]) if ev.get("kind") == "rubric" else []
    low = int(state.settings.score_scale[0])
    return render(request, "trace.html", {
        "active": "explorer", **view, "labels": labels, "token_required": bool(state.settings.api_token),
        "label_range": lambda top: range(low, int(top if top is not None else state.settings.score_scale[1]) + 1)})


@router.get("/research/{evaluation_id}", response_class=HTMLResponse)
async def research_page(request: Request, evaluation_id: str) -> HTMLResponse:
    found = await get_state(request).store.aread(q.trace, evaluation_id)
    if found is None or found["evaluation"].get("kind") != "research":
        return not_found(request, f"No research evaluation with id {evaluation_id!r}.")
    view = await asyncio.to_thread(views.research_view, found["evaluation"])
    return render(request, "research.html", {"active": "explorer", "evaluation": found["evaluation"], **view})


@router.get("/patterns", response_class=HTMLResponse)
async def patterns_page(request: Request) -> HTMLResponse:
    from jurist.analysis import latest_patterns

    state = get_state(request)
    found = await latest_patterns(state.store)
    return render(request, "patterns.html", {
        "active": "patterns", "run": found.run, "patterns": found.patterns, "kinds": q.KINDS,
        "token_required": bool(state.settings.api_token),
        "analysis_notice": missing_extra("analysis", "Running the analysis")})


@router.get("/prompts", response_class=HTMLResponse)
async def prompts_page(request: Request) -> HTMLResponse:
    from jurist.analysis import list_prompts

    prompts = await list_prompts(get_state(request).store)
    return render(request, "prompts.html", {"active": "prompts", "prompts": prompts})


@router.get("/prompts/{name}", response_class=HTMLResponse)
async def prompt_page(
    request: Request,
    name: str,
    a: int | None = Query(None, ge=1, le=1_000_000, description="version A"),
    b: int | None = Query(None, ge=1, le=1_000_000, description="version B"),
    key: str | None = Query(None, max_length=200, description="compare on this rubric or dimension key only"),
    judge: str | None = Query(None, max_length=200, description="compare this judge model's verdicts"),
) -> HTMLResponse:
    from jurist.analysis import diff_lines, prompt_version, prompt_versions

    store = get_state(request).store
    try:
        info = await prompt_versions(store, name)
    except NotFound:
        return not_found(request, f"No prompt named {name!r}.")
    numbers = [v.version for v in info.versions]
    b = b if b is not None else numbers[-1]
    a = a if a is not None else (numbers[-2] if len(numbers) > 1 else numbers[-1])
    for v in (a, b):
        if v not in numbers:
            return not_found(request, f"Prompt {name!r} has no version {v}.")
    text_a, text_b = await asyncio.gather(prompt_version(store, name, a), prompt_version(store, name, b))
    diff = await asyncio.to_thread(diff_lines, text_a.text, text_b.text) if a != b else []
    comparison, problem = None, None
    if a == b:
        problem = "Choose two different versions to compare them." if len(numbers) > 1 else \
            "This prompt has one version so far; store a second one to compare them."
    elif (problem := missing_extra("analysis", "The A/B comparison")) is None:
        from jurist.analysis import compare_versions

        try:
            comparison = await compare_versions(store, name, a, b, key=key or None, judge=judge or None)
        except InputError as exc:
            problem = str(exc)
    from jurist.analysis import active_routes, list_tests

    return render(request, "prompt.html", {
        "active": "prompts", "prompt": info, "a": a, "b": b, "key": key or "", "judge": judge or "", "text_a": text_a,
        "text_b": text_b, "diff": diff, "comparison": comparison, "problem": problem,
        "route": (await active_routes(store)).get(name), "tests": await list_tests(store, name),
        "token_required": bool(get_state(request).settings.api_token)})


__all__ = ["router"]
