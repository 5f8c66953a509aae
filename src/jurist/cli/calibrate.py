"""`jurist calibrate`: does the judge agree with our people?"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer
from rich.markup import escape

from jurist.cli.common import EXIT_OK, DbOpt, console, handle_errors, load_settings, waiting

if TYPE_CHECKING:  # pragma: no cover
    from rich.table import Table

    from jurist.analysis.calibrate import CalibrationReport

BOOTSTRAP_RESAMPLES = 2000  # jurist.analysis.agreement.BOOTSTRAP_RESAMPLES (a test keeps them equal)

FIGURES = (("exact", "exact agreement"), ("within_one", "within one"), ("kappa", "Cohen's κ"),
           ("weighted_kappa", "Cohen's κ (quadratic)"), ("spearman", "Spearman ρ"), ("kendall", "Kendall τ-b"),
           ("mean_bias", "mean bias (judge − human)"))


def _fmt(estimate: dict[str, Any]) -> str:
    value, low, high = estimate["value"], estimate["low"], estimate["high"]
    if value is None:
        return "—"
    if low is None or high is None:
        return f"{value:.3f}"
    return f"{value:.3f} [{low:.3f}, {high:.3f}]"


def figures_table(r: dict[str, Any]) -> "Table":
    from rich.table import Table

    table = Table(title=escape(f"{r['name']} ({r['rubric']}), scale {r['scale']}: {r['items']} items"),
                  title_justify="left")
    table.add_column("figure (95% bootstrap interval)")
    table.add_column(f"judge vs people (n={r['judge_vs_humans']['n']})")
    table.add_column(f"people vs people (n={r['humans']['n']}): the ceiling")
    for key, label in FIGURES:
        table.add_row(label, _fmt(r["judge_vs_humans"][key]), _fmt(r["humans"][key]))
    table.add_row("Krippendorff's α (ordinal)", _fmt(r["alpha"]) + " (with the judge)", _fmt(r["alpha_humans"]))
    if r["unscored"]:
        table.caption = escape(f"the judge gave no score for {', '.join(r['unscored'])}")
    return table


def confusion_table(r: dict[str, Any]) -> "Table":
    from rich.table import Table

    cats = [str(c) for c in r["categories"]]
    if r["scale"] == "pass/fail":
        cats = ["fail", "pass"]
    table = Table(title=escape(f"{r['rubric']}: confusion"), title_justify="left")
    table.add_column("judge ↓ people →")
    for c in cats:
        table.add_column(c, justify="right")
    for i, (c, row) in enumerate(zip(cats, r["judge_vs_humans"]["confusion"])):
        table.add_row(c, *(f"[bold]{n}[/]" if i == j and n else str(n) for j, n in enumerate(row)))
    return table


def differing_table(r: dict[str, Any]) -> "Table":
    from rich.table import Table

    table = Table(title=escape(f"{r['rubric']}: where the judge and the people differ most"), title_justify="left")
    for col in ("item", "judge", "people", "gap", "judge's reasoning", "trace"):
        table.add_column(col, overflow="fold")
    for d in r["differing"]:
        people = ", ".join(f"{a}: {v:g}" for a, v in d["humans"].items())
        judge = "—" if d["judge"] is None else f"{d['judge']:g}"
        table.add_row(escape(d["item"]), judge, escape(people), f"{d['gap']:g}", escape((d["reasoning"] or "")[:200]),
                      escape(d["trace"] or "—"))
    return table


def print_report(report: dict[str, Any]) -> None:
    console.print(escape(f"judge {report['judge']}; labels {report['labels']} "
                         f"(annotators: {', '.join(report['annotators'])}); "
                         f"{report['bootstrap_resamples']} bootstrap resamples over the items"), highlight=False)
    for r in report["rubrics"]:
        console.print(figures_table(r))
        console.print(confusion_table(r))
        if r["differing"]:
            console.print(differing_table(r))


def register(app: typer.Typer) -> None:
    @app.command("calibrate")
    @handle_errors
    def calibrate_cmd(
        rubrics: Path = typer.Option(..., "--rubrics", help="Rubrics JSON file."),
        labels: Path = typer.Option(..., "--labels", help="Human labels (JSONL: item, rubric, label, annotator)."),
        sessions: list[Path] = typer.Option(..., "--sessions", help="A session file or a folder of *.jsonl; "
                                            "repeat for more."),
        judge: Optional[str] = typer.Option(None, "--judge", help="Judge model (default: JURIST_JUDGE, "
                                            "else the offline local/minilm)."),
        template: Optional[Path] = typer.Option(None, "--template", help="Judge prompt template file."),
        config: Optional[str] = typer.Option(None, "--config", help="Settings file."),
        no_cache: bool = typer.Option(False, "--no-cache", help="Always call the judge; do not answer from the cache."),
        resamples: int = typer.Option(BOOTSTRAP_RESAMPLES, "--resamples", min=0,
                                      help="Bootstrap resamples for the 95% intervals (0: none)."),
        seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap."),
        as_json: bool = typer.Option(False, "--json", help="Print the report as JSON instead of tables."),
        output: Optional[Path] = typer.Option(None, "--output", "-o", help="Also write the report (JSON) here."),
        db: Optional[str] = DbOpt,
    ) -> None:
        """Compare the judge's rubric scores with human labels: agreement, κ, ρ, τ, α, bias."""
        import asyncio

        from jurist.analysis.labels import load_labels
        from jurist.extras import require_extra
        from jurist.jsonfiles import write_json
        from jurist.rubrics import load_rubrics

        require_extra("analysis", "jurist calibrate")
        settings = load_settings(config, db=db, cache=False if no_cache else None)
        rubric_set = load_rubrics(rubrics, settings.score_scale)
        label_set = load_labels(labels)
        report = asyncio.run(_run(settings, rubric_set, label_set, sessions, judge, template, resamples, seed))
        data = report.to_json()
        if output:
            output.parent.mkdir(parents=True, exist_ok=True)
            write_json(output, data)
        if as_json:
            console.print_json(json.dumps(data))
        else:
            print_report(data)
            if output:
                console.print(escape(f"report written to {output}"), highlight=False)
        raise typer.Exit(EXIT_OK)


async def _run(settings: Any, rubric_set: Any, label_set: Any, sessions: list[Path], judge: str | None,
               template: Path | None, resamples: int, seed: int) -> "CalibrationReport":
    import asyncio

    from jurist.analysis.calibrate import calibrate
    from jurist.runtime import Runtime

    runtime = await asyncio.to_thread(Runtime, settings)
    try:
        with waiting("scoring the labelled sessions"):
            return await calibrate(rubric_set, label_set, sessions, runtime, judge=judge, template=template,
                                   resamples=resamples, seed=seed)
    finally:
        await runtime.aclose()
