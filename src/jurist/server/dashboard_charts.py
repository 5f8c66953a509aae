"""The overview's charts: plotly figures built from ``overview()``'s aggregates.

Each figure goes into the page as JSON (``<script type="application/json">``)
and is drawn by the plotly.js the server ships; only aggregates are plotted,
never rows, so a page stays small whatever the number of evaluations.
"""

from __future__ import annotations

import json

import plotly.graph_objects as go
from pydantic import JsonValue

from jurist.store.dashboard import Overview

ACCENT = "#2f6fdb"
GOOD = "#2e8b57"
BAD = "#c0504d"
MUTED = "#8a93a6"
FONT: dict[str, JsonValue] = dict(family="system-ui, -apple-system, Segoe UI, Roboto, sans-serif", size=12, color="#1d2330")


def _layout(**extra: JsonValue) -> dict[str, JsonValue]:
    """A plotly layout (JSON): the house style, with ``extra``'s properties (a dict one merged into the style's)."""
    axis: dict[str, JsonValue] = dict(gridcolor="#e8ebf0", zeroline=False, linecolor="#c9ced8", automargin=True)
    base: dict[str, JsonValue] = dict(template="none", font=FONT, margin=dict(l=48, r=16, t=8, b=40), height=260,
                                paper_bgcolor="rgba(0,0,0,0)", plot_bgcolor="rgba(0,0,0,0)", showlegend=False,
                                xaxis=dict(axis), yaxis=dict(axis), bargap=0.15)
    for k, v in extra.items():
        old = base.get(k)
        base[k] = {**old, **v} if isinstance(v, dict) and isinstance(old, dict) else v
    return base


def _plain(fig: go.Figure) -> dict[str, JsonValue]:
    figure: dict[str, JsonValue] = json.loads(fig.to_json())
    return figure


def distribution(data: Overview) -> dict[str, JsonValue]:
    bins = data.distribution
    labels = [f"{b.low:.1f}–{b.high:.1f}" for b in bins]
    colors = [BAD if b.high <= 0.5 else ACCENT for b in bins]
    fig = go.Figure(go.Bar(x=labels, y=[b.count for b in bins], marker_color=colors,
                           hovertemplate="score %{x}<br>%{y} evaluations<extra></extra>"),
                    layout=_layout(height=340, xaxis=dict(title=dict(text="score (0–1)")),
                                   yaxis=dict(title=dict(text="evaluations"))))
    return _plain(fig)


def failures(data: Overview) -> dict[str, JsonValue] | None:
    rows = list(reversed(data.failures[:12]))
    if not rows:
        return None
    fig = go.Figure(go.Bar(x=[r.count for r in rows], y=[r.failure for r in rows], orientation="h",
                           marker_color=BAD, hovertemplate="%{y}: %{x}<extra></extra>"),
                    layout=_layout(height=max(160, 28 * len(rows) + 60), margin=dict(l=8),
                                   xaxis=dict(title=dict(text="failed evaluations"))))
    return _plain(fig)


def trend(data: Overview) -> dict[str, JsonValue] | None:
    weeks = data.trend
    if not weeks:
        return None
    x = [w.week for w in weeks]
    fig = go.Figure(layout=_layout(
        showlegend=True, legend=dict(orientation="h", y=1.12, x=0),
        margin=dict(t=28, r=48),
        yaxis=dict(title=dict(text="evaluations"), range=[0, max(w.count for w in weeks) * 1.15]),
        yaxis2=dict(overlaying="y", side="right", range=[0, 1.05], showgrid=False, title=dict(text="score / rate"),
                    tickvals=[0, 0.25, 0.5, 0.75, 1], tickformat=".0%"),
        xaxis=dict(type="category")))
    fig.add_bar(x=x, y=[w.count for w in weeks], name="evaluations", marker_color="#c9d8f5",
                hovertemplate="week of %{x}<br>%{y} evaluations<extra></extra>")
    fig.add_scatter(x=x, y=[w.average_score for w in weeks], name="average score", yaxis="y2",
                    mode="lines+markers", line=dict(color=ACCENT, width=2),
                    hovertemplate="average score %{y:.2f}<extra></extra>")
    fig.add_scatter(x=x, y=[w.pass_rate for w in weeks], name="pass rate", yaxis="y2", mode="lines+markers",
                    line=dict(color=GOOD, width=2, dash="dot"), hovertemplate="pass rate %{y:.0%}<extra></extra>")
    return _plain(fig)


def overview_figures(data: Overview) -> dict[str, dict[str, JsonValue]]:
    """The overview's figures by element id (absent when there is nothing to draw)."""
    out: dict[str, dict[str, JsonValue] | None] = {
        "chart-distribution": distribution(data) if data.total else None,
        "chart-failures": failures(data),
        "chart-trend": trend(data),
    }
    return {k: v for k, v in out.items() if v is not None}
