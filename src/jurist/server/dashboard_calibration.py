"""The dashboard's calibration page: the stored calibrations (``jurist calibrate``, what
``require_calibration`` looks up), and the judge against the labels people gave on the
trace pages, per rubric, with the confusion matrix as a chart (see docs/calibration.md).
Without the ``analysis`` extra (scipy, plotly) the stored calibrations are listed and the
page says which extra the rest needs."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from jurist.extras import missing_extra
from jurist.server.api_labels import stored_calibration, stored_calibrations
from jurist.server.dashboard import render

router = APIRouter(prefix="/evaluation", include_in_schema=False)

PAGE_RESAMPLES = 1000
PAGE_CALIBRATIONS = 100  # the newest stored calibrations listed
FIGURES = (("exact", "Exact agreement"), ("within_one", "Within one"), ("kappa", "Cohen's κ"),
           ("weighted_kappa", "Cohen's κ (quadratic)"), ("spearman", "Spearman ρ"), ("kendall", "Kendall τ-b"),
           ("mean_bias", "Mean bias (judge − human)"))


def confusion_figure(rubric: dict[str, Any]) -> dict[str, Any]:
    """The judge's scores (rows) against the people's (columns) as a heatmap."""
    import plotly.graph_objects as go

    from jurist.server.dashboard_charts import FONT

    names = ["fail", "pass"] if rubric["scale"] == "pass/fail" else [str(c) for c in rubric["categories"]]
    counts = rubric["judge_vs_humans"]["confusion"]
    fig = go.Figure(go.Heatmap(
        z=counts, x=names, y=names, colorscale="Blues", showscale=False, text=counts, texttemplate="%{text}",
        hovertemplate="judge %{y}, person %{x}: %{z}<extra></extra>"),
        layout=dict(template="none", font=FONT, height=300, margin=dict(l=56, r=8, t=8, b=48),
                    paper_bgcolor="rgba(0,0,0,0)", plot_bgcolor="rgba(0,0,0,0)",
                    xaxis=dict(title=dict(text="person"), type="category"),
                    yaxis=dict(title=dict(text="judge"), type="category")))
    out: dict[str, Any] = json.loads(fig.to_json())
    return out


@router.get("/calibration", response_class=HTMLResponse)
async def calibration_page(request: Request) -> HTMLResponse:
    stored = await stored_calibrations(request, PAGE_CALIBRATIONS)  # a store read: no extra needed
    notice = missing_extra("analysis", "The calibration")
    if notice is not None:
        return render(request, "calibration.html", {"active": "calibration", "notice": notice,
                                                    "report": {"rubrics": []}, "stored": stored})
    report = await stored_calibration(request, PAGE_RESAMPLES)
    figures = await asyncio.to_thread(lambda: {r["rubric"]: confusion_figure(r) for r in report["rubrics"]})
    return render(request, "calibration.html", {"active": "calibration", "report": report, "figures": figures,
                                                "rows": FIGURES, "stored": stored})
