"""The prompt lab's routes over HTTP: the active version of a prompt and A/B tests.

* ``GET /api/prompts/{name}/active``: the prompt's route now (shipped, an active version, a test)
* ``PUT /api/prompts/{name}/active``: make a version the active one (a write)
* ``GET /api/prompt-tests`` (``?prompt=``): the A/B tests, newest first
* ``POST /api/prompt-tests``: start a test (a write; ends a running test of the same prompt)
* ``GET /api/prompt-tests/{id}``: one test with its call counts and running comparison; a
  test whose significance level is reached ends here (see :mod:`jurist.analysis.prompt_tests`)
* ``POST /api/prompt-tests/{id}/stop``: end a test now, keeping version A or the one named (a write)

Writes go through the server's guard (API token, same origin, JSON body). The routing
needs only the base install; the comparison needs the ``analysis`` extra (without it the
test is shown with ``comparison_notice`` naming the extra).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from fastapi import APIRouter, Body, Depends, Path, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from jurist import analysis
from jurist.analysis.prompt_tests import MAX_CALLS, PromptTest
from jurist.jsonfiles import Number, Whole
from jurist.server.api_analysis import MAX_VERSION, PromptName
from jurist.server.auth import require_write
from jurist.server.errors import error_responses
from jurist.server.state import get_state
from jurist.store.prompt_routes import TestRoute

router = APIRouter(tags=["prompt lab"])

TestId = Path(min_length=1, max_length=32, pattern=r"^[A-Za-z0-9]+$", description="an A/B test's id")


class ActiveRoute(BaseModel):
    prompt: str
    route: Literal["shipped", "active", "test"] = Field(
        description="shipped: the text shipped with jurist; active: a chosen version; test: an A/B test runs")
    version: int | None = Field(description="the active version (route 'active')")
    test_id: str | None = Field(description="the running test (route 'test')")
    since: datetime | None


class ActivateVersion(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: Whole = Field(ge=1, le=MAX_VERSION, description="the version every call of the prompt uses (1: shipped)")


class NewTest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prompt: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.-]+$")
    a: Whole = Field(ge=1, le=MAX_VERSION, description="version A, the control")
    b: Whole = Field(ge=1, le=MAX_VERSION, description="version B")
    share: Number = Field(0.5, gt=0, lt=1, description="the share of calls routed to B")
    calls: Whole | None = Field(None, ge=1, le=MAX_CALLS, description="end when each version has had this many calls")
    alpha: Number | None = Field(None, gt=0, le=0.5, description="end when the comparison is significant at this level")
    better: Literal["higher", "lower"] = Field("higher", description="which mean score wins a significant test")


class StopTest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: Whole | None = Field(None, ge=1, le=MAX_VERSION, description="the version kept (default: A)")


def _forget(request: Request) -> None:
    """This server's judges read the routes again at their next call."""
    prompts = get_state(request).runtime.prompts
    if prompts is not None:
        prompts.forget()


@router.get("/api/prompts/{name}/active", response_model=ActiveRoute, responses=error_responses(404, 422))
async def get_active(request: Request, name: PromptName) -> ActiveRoute:
    """Which text the prompt's calls use now."""
    store = get_state(request).store
    await analysis.prompt_versions(store, name)  # 404 for an unknown prompt
    route = (await analysis.active_routes(store)).get(name)
    if route is None:
        return ActiveRoute(prompt=name, route="shipped", version=None, test_id=None, since=None)
    if isinstance(route, TestRoute):
        return ActiveRoute(prompt=name, route="test", version=None, test_id=route.id, since=route.created_at)
    return ActiveRoute(prompt=name, route="active", version=route.version, test_id=None, since=route.created_at)


@router.put("/api/prompts/{name}/active", response_model=ActiveRoute, dependencies=[Depends(require_write)],
            responses=error_responses(400, 401, 404, 422))
async def put_active(request: Request, body: ActivateVersion, name: PromptName) -> ActiveRoute:
    """Make a version the one every call of the prompt uses (ends a running A/B test of it)."""
    await analysis.activate_version(get_state(request).store, name, body.version)
    _forget(request)
    return await get_active(request, name)


@router.get("/api/prompt-tests", response_model=list[PromptTest], responses=error_responses(422))
async def get_tests(request: Request, prompt: str | None = Query(None, min_length=1, max_length=200)
                    ) -> list[PromptTest]:
    """The A/B tests, running and ended, newest first (without their comparisons)."""
    return await analysis.list_tests(get_state(request).store, prompt)


@router.post("/api/prompt-tests", response_model=PromptTest, status_code=201, dependencies=[Depends(require_write)],
             responses=error_responses(400, 401, 404, 422))
async def post_test(request: Request, body: NewTest) -> PromptTest:
    """Start an A/B test: ``share`` of the prompt's calls go to version B until the end condition."""
    test = await analysis.start_test(get_state(request).store, body.prompt, body.a, body.b, body.share,
                                     calls=body.calls, alpha=body.alpha, better=body.better)
    _forget(request)
    return test


@router.get("/api/prompt-tests/{test_id}", response_model=PromptTest, responses=error_responses(404, 422))
async def get_test(request: Request, test_id: str = TestId) -> PromptTest:
    """One test with its call counts and running comparison (ends it when its significance level is reached)."""
    report = await analysis.ab_report(get_state(request).store, test_id)
    if not report.running:
        _forget(request)
    return report


@router.post("/api/prompt-tests/{test_id}/stop", response_model=PromptTest, dependencies=[Depends(require_write)],
             responses=error_responses(400, 401, 404, 422))
async def post_stop(request: Request, test_id: str = TestId, body: StopTest | None = Body(None)) -> PromptTest:
    """End a running test now; version A (or the one named) becomes the active one."""
    report = await analysis.stop_test(get_state(request).store, test_id, (body or StopTest()).version)
    _forget(request)
    return report
