"""The result of an A/B comparison of two prompt versions (:mod:`jurist.analysis.ab`
computes it; this model needs no statistics package, so the API can declare it
without the ``analysis`` extra)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

CONFIDENCE = 0.95


class ABComparison(BaseModel):
    """Two versions of one prompt compared on the evaluations they scored."""

    prompt: str
    a: int = Field(description="version A")
    b: int = Field(description="version B")
    key: str | None = Field(None, description="only this rubric or dimension key, when given")
    hash_a: str
    hash_b: str
    unit: Literal["points", "share"] = Field(description="points on the rubric's scale, or a 0-1 share")
    mean_a: float | None
    mean_b: float | None
    n_a: int
    n_b: int
    difference: float | None = Field(description="mean of B minus mean of A")
    ci_low: float | None
    ci_high: float | None
    confidence: float = CONFIDENCE
    p_value: float | None
    test: str | None = Field(description="paired t-test, Welch t-test, or None without enough data")
    paired: bool
    significant: bool
    verdict: str
