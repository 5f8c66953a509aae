"""The offline analysis and the prompt lab over HTTP.

* ``GET /api/evaluation/patterns``: the newest analysis run's patterns (or ``?run_id=``)
* ``POST /api/evaluation/analyze``: run the analysis now (a write: needs the API token)
* ``GET /api/prompts``: every prompt with its versions
* ``GET /api/prompts/{name}``, ``GET /api/prompts/{name}/versions/{version}``
* ``PUT /api/prompts/{name}``: a new version (a write: needs the API token)
* ``GET /api/prompts/{name}/diff?a=&b=``, ``GET /api/prompts/{name}/compare?a=&b=&key=&judge=``

Running the analysis and the A/B comparison need the ``analysis`` extra
(scipy): without it they answer 501 naming it; the rest needs the base install.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Depends, Path, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from jurist import analysis
from jurist.analysis.comparison import ABComparison
from jurist.analysis.prompts import PromptInfo, PromptText
from jurist.extras import require_extra
from jurist.jsonfiles import Number, Whole
from jurist.server.auth import require_write
from jurist.server.errors import IsoDateTime, error_responses
from jurist.server.state import get_state
from jurist.store.analysis import PatternReport

router = APIRouter(tags=["analysis"])

PromptName = Annotated[str, Path(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.-]+$",
                                 description="a prompt (template) name")]
MAX_VERSION = 1_000_000  # larger numbers are not versions (and overflow the database's integers)


class NewPromptVersion(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(description="the prompt; it must use exactly the placeholders of version 1")
    note: str | None = Field(None, max_length=2000, description="what changed and why")


class DiffLine(BaseModel):
    op: Literal[" ", "-", "+", "@"] = Field(description="' ' in both, '-' only in a, '+' only in b, '@' hunk header")
    text: str


class PromptDiff(BaseModel):
    name: str
    a: int
    b: int
    lines: list[DiffLine]


class AnalysisRun(BaseModel):
    id: str
    status: Literal["running", "done", "failed"]
    params: dict[str, Any]
    evaluations: int = Field(description="how many evaluations were analysed (grouped by subject)")
    writer_model: str | None = Field(description="the LLM that wrote the patterns; None: the statistics did")
    error: str | None
    created_at: datetime
    finished_at: datetime | None


class Pattern(BaseModel):
    id: str
    run_id: str
    impact: Literal["high", "medium", "low"]
    feature_type: Literal["term", "length", "judge_model", "prompt_version"]
    feature: str
    dimension: str = Field(description='the score compared: "overall" or a rubric / dimension key')
    affected_count: int = Field(description="the affected subjects (sessions, queries, requests), each counted "
                                            "once however often it was evaluated")
    mean_affected: float | None = Field(description="mean 0-1 score of the affected subjects (each subject: the "
                                                    "mean of its evaluations)")
    mean_rest: float | None
    effect_size: float | None = Field(description="Cliff's delta, affected vs the rest")
    p_value: float | None = Field(description="one-sided Mann-Whitney U, Benjamini-Hochberg adjusted")
    test: str | None
    title: str
    description: str
    suggested_fix: str | None
    writer: str | None = Field(description='the model that wrote the text, or "statistics"')
    created_at: datetime
    evaluation_ids: list[str] = Field(description="every evaluation of the affected subjects (the first 100)")


class PatternsResponse(BaseModel):
    run: AnalysisRun | None = Field(description="None before the first finished analysis")
    patterns: list[Pattern]


class AnalyzeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["rubric", "gate", "research", "checklist"] | None = None
    since: IsoDateTime | None = Field(None, description="only evaluations created at or after this time")
    until: IsoDateTime | None = Field(None, description="only evaluations created before this time")
    writer: str | None = Field(None, max_length=200, description="the LLM that writes the patterns (default: the "
                                                                  "configured judge; none: the statistics)")
    min_count: Whole = Field(5, ge=2, le=100_000, description="evaluations needed on each side of a feature")
    alpha: Number = Field(0.05, gt=0, lt=1, description="false discovery rate")
    limit: Whole = Field(20000, ge=1, le=100_000, description="the newest evaluations analysed")


@router.get("/api/evaluation/patterns", response_model=PatternsResponse, responses=error_responses(404, 422))
async def get_patterns(
    request: Request, run_id: str | None = Query(None, min_length=1, max_length=32, description="a run; default "
                                                 "the newest finished one"),
) -> PatternReport:
    """The patterns of an analysis run: what low-scoring evaluations have in common."""
    return await analysis.latest_patterns(get_state(request).store, run_id)


@router.post("/api/evaluation/analyze", response_model=PatternsResponse, dependencies=[Depends(require_write)],
             responses=error_responses(400, 401, 422, 500, 501))
async def analyze(request: Request, body: AnalyzeRequest | None = Body(None)) -> PatternReport:
    """Run the offline analysis now on the newest evaluations; returns the run with its patterns."""
    state = get_state(request)
    params = (body or AnalyzeRequest()).model_dump()
    return await analysis.run_analysis(state.store, state.settings, **params)


@router.get("/api/prompts", response_model=list[PromptInfo])
async def get_prompts(request: Request) -> list[PromptInfo]:
    """Every judge and generator prompt with its versions."""
    return await analysis.list_prompts(get_state(request).store)


@router.get("/api/prompts/{name}", response_model=PromptInfo, responses=error_responses(404, 422))
async def get_prompt(request: Request, name: PromptName) -> PromptInfo:
    """One prompt with its versions."""
    return await analysis.prompt_versions(get_state(request).store, name)


@router.get("/api/prompts/{name}/versions/{version}", response_model=PromptText, responses=error_responses(404, 422))
async def get_prompt_version(request: Request, name: PromptName, version: int = Path(ge=1, le=MAX_VERSION)) -> PromptText:
    """One version of a prompt, with its text."""
    return await analysis.prompt_version(get_state(request).store, name, version)


@router.put("/api/prompts/{name}", response_model=PromptText, status_code=201, dependencies=[Depends(require_write)],
            responses=error_responses(400, 401, 404, 422))
async def put_prompt(request: Request, body: NewPromptVersion, name: PromptName) -> PromptText:
    """Save a new version of a prompt (the next version number)."""
    return await analysis.create_prompt_version(get_state(request).store, name, body.text, body.note)


@router.get("/api/prompts/{name}/diff", response_model=PromptDiff, responses=error_responses(404, 422))
async def get_diff(request: Request, name: PromptName, a: int = Query(ge=1, le=MAX_VERSION), b: int = Query(ge=1, le=MAX_VERSION)
                   ) -> PromptDiff:
    """A unified, line-by-line diff between two versions."""
    store = get_state(request).store
    va, vb = await analysis.prompt_version(store, name, a), await analysis.prompt_version(store, name, b)
    lines = [DiffLine.model_validate({"op": op, "text": text})
             for op, text in analysis.diff_lines(va.text, vb.text)]
    return PromptDiff(name=name, a=a, b=b, lines=lines)


@router.get("/api/prompts/{name}/compare", response_model=ABComparison,
            responses=error_responses(400, 404, 422, 501))
async def get_comparison(
    request: Request, name: PromptName, a: int = Query(ge=1, le=MAX_VERSION), b: int = Query(ge=1, le=MAX_VERSION),
    key: str | None = Query(None, min_length=1, max_length=200, description="only this rubric or dimension key"),
    judge: str | None = Query(None, min_length=1, max_length=200, description="only this judge model's verdicts "
                              "(default: the one judge that scored both versions)"),
) -> ABComparison:
    """A/B comparison of two versions on the subjects both scored with one judge model: n per
    version, the judges that scored each, means, difference with a 95% confidence interval, a paired
    t-test and a plain-language verdict; ``refused`` says why no test was run (several judges, or no
    subject scored by both)."""
    require_extra("analysis", "The A/B comparison")
    return await analysis.compare_versions(get_state(request).store, name, a, b, key, judge=judge)
