"""The result of an A/B comparison of two prompt versions (:mod:`jurist.analysis.ab`
computes it; this model needs no statistics package, so the API can declare it
without the ``analysis`` extra)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

CONFIDENCE = 0.95

Design = Literal["paired", "randomized"]


class JudgePool(BaseModel):
    """The verdicts one judge model gave with each version (a verdict: the newest score of one
    subject on one rubric and scale)."""

    model_config = ConfigDict(frozen=True)

    judge_model: str | None = Field(description="None: verdicts whose judge was not recorded (never compared)")
    n_a: int = Field(description="verdicts with version A")
    n_b: int = Field(description="verdicts with version B")
    common: int = Field(description="of them, on a subject, rubric and scale both versions scored")
    compared: bool = Field(description="whether the comparison is on this judge's verdicts")


class ABComparison(BaseModel):
    """Two versions of one prompt compared on the evaluations they scored: only verdicts of one
    judge model, each rubric on its own scale (see docs/analysis.md, "Comparing versions")."""

    prompt: str
    a: int = Field(description="version A")
    b: int = Field(description="version B")
    key: str | None = Field(None, description="only this rubric or dimension key, when given")
    hash_a: str
    hash_b: str
    unit: Literal["points", "share"] = Field(description="points on the rubric's scale, or a 0-1 share")
    mean_a: float | None
    mean_b: float | None
    n_a: int = Field(description="subjects of version A in the test (paired: the subjects both versions scored); "
                     "where no test was run, the subjects version A scored (with the judge, if one was chosen)")
    n_b: int
    difference: float | None = Field(description="mean of B minus mean of A")
    ci_low: float | None
    ci_high: float | None
    confidence: float = CONFIDENCE
    p_value: float | None
    test: str | None = Field(description="paired t-test, Welch t-test, or None where no test was run")
    paired: bool
    significant: bool
    verdict: str
    judge_model: str | None = Field(None, description="the one judge model whose verdicts the comparison is on "
                                    "(None: no judge could be chosen, see refused)")
    judges: list[JudgePool] = Field(default_factory=list, description="every judge model that scored either "
                                    "version, with its verdicts per version")
    design: Design = Field("paired", description="paired: versions compared on the subjects both scored (the "
                           "prompt lab); randomized: an A/B test's calls, routed to a version at random")
    refused: str | None = Field(None, description="why no significance test was run (judges or subjects that "
                                "differ, too little data)")


class ComparisonStats(BaseModel):
    """The statistics of a comparison, without the prompt it compares (:func:`jurist.analysis.ab.compare_rows`)."""

    unit: Literal["points", "share"] = "points"
    mean_a: float | None = None
    mean_b: float | None = None
    n_a: int = 0
    n_b: int = 0
    difference: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    test: str | None = None
    paired: bool = False
    judge_model: str | None = None
    judges: list[JudgePool] = Field(default_factory=list)
    design: Design = "paired"
    refused: str | None = None
