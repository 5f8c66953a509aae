"""`jurist probe`: the judge's position and verbosity biases, self-preference, run-to-run variance."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer
from rich.markup import escape

from jurist.cli.common import (ConfigOpt, DbOpt, EXIT_OK, JsonOpt, NoCacheOpt, OutputOpt, ResamplesOpt, SeedOpt,
                               console, handle_errors, load_settings, show_report, waiting)
from jurist.cli.compare import fmt, print_position

if TYPE_CHECKING:  # pragma: no cover
    from jurist.analysis.agreement import Estimate
    from jurist.analysis.probe import ProbeReport, Section, SelfPreferenceFigures, VarianceFigures, VerbosityFigures

DEFAULT_SAMPLES = 3  # jurist.analysis.probe.DEFAULT_SAMPLES (a test keeps them equal)
PAD_FACTOR = 2.0  # jurist.analysis.bias.PAD_FACTOR


def _points(estimate: Estimate) -> str:
    return fmt(estimate.to_json(), percent=False)


def _heading(s: Section, text: str | None = None) -> None:
    title = escape(s.name.replace("_", "-"))
    text = text or f"{s.measured}; {s.items} {s.unit}."
    console.print(f"[bold]{title}[/]: " + escape(text), highlight=False)


def print_verbosity(s: Section, figures: VerbosityFigures) -> None:
    from rich.table import Table

    _heading(s)
    table = Table(title="score shift per rubric (95% bootstrap intervals over the answers)", title_justify="left")
    for col in ("rubric", "scale", "answers", "mean shift", "up", "same", "down", "mean characters"):
        table.add_column(col, overflow="fold")
    for r in figures.rubrics:
        chars = "—" if r.mean_chars is None else f"{r.mean_chars[0]:.0f} → {r.mean_chars[1]:.0f}"
        table.add_row(escape(r.rubric), r.scale, str(r.items), _points(r.mean_shift), str(r.up),
                      str(r.same), str(r.down), chars)
    console.print(table)


def print_variance(s: Section, figures: VarianceFigures) -> None:
    from rich.table import Table

    _heading(s)
    table = Table(title="spread per rubric (95% bootstrap interval over the answers)", title_justify="left")
    for col in ("rubric", "scale", "answers", "varying", "repeatability SD [95%]", "mean range"):
        table.add_column(col, overflow="fold")
    for r in figures.rubrics:
        table.add_row(escape(r.rubric), r.scale, str(r.items), str(r.varying),
                      _points(r.repeatability_sd), "—" if r.mean_range is None else f"{r.mean_range:g}")
    console.print(table)
    varying = [(r.rubric, a) for r in figures.rubrics for a in r.answers[:10] if a.sd]
    if varying:
        detail = Table(title="the answers whose scores varied most", title_justify="left")
        for col in ("rubric", "answer", "system", "samples", "mean [95% t interval]", "SD", "range"):
            detail.add_column(col, overflow="fold")
        for rubric, a in varying:
            interval = f"{a.mean:g}" if a.low is None else f"{a.mean:g} [{a.low:g}, {a.high:g}]"
            detail.add_row(escape(rubric), escape(a.item), escape(a.system), str(a.n), interval,
                           f"{a.sd:g}", f"{a.min:g}–{a.max:g}")
        console.print(detail)
    for reason in figures.failures:
        console.print(escape(f"  not scored: {reason[:300]}"), highlight=False)


def print_self_preference(s: Section, figures: SelfPreferenceFigures) -> None:
    families = ", ".join(f"{k}: {v}" for k, v in figures.by_family.items()) or "none known"
    _heading(s)
    console.print(escape(f"families of the answers' models: {families}; unknown: {figures.unknown}"),
                  highlight=False)
    if figures.warning:
        console.print("[bold yellow]warning:[/] " + escape(figures.warning + " (" + ", ".join(
            figures.same_family_answers) + (", …" if figures.same_family > 10 else "") + ")"), highlight=False)


def print_report(report: ProbeReport) -> None:
    from jurist.analysis.probe import PositionFigures, SelfPreferenceFigures, VarianceFigures, VerbosityFigures

    systems = ", ".join(f"{s.name} ({s.answers} answers)" for s in report.systems)
    console.print(escape(f"judge {report.judge} (family {report.judge_family}); systems: {systems}; "
                         f"{report.resamples} bootstrap resamples"), highlight=False)
    for s in report.sections:
        console.print()
        figures = s.figures
        if s.skipped:
            _heading(s, f"not measured ({s.skipped}): {s.measured}")
            failures = figures.failures if isinstance(figures, (PositionFigures, VarianceFigures)) else ()
            for reason in failures:
                console.print(escape(f"  {reason[:300]}"), highlight=False)
            continue
        if isinstance(figures, PositionFigures):
            _heading(s)
            print_position(figures.to_json())
        elif isinstance(figures, VerbosityFigures):
            print_verbosity(s, figures)
        elif isinstance(figures, SelfPreferenceFigures):
            print_self_preference(s, figures)
        elif isinstance(figures, VarianceFigures):
            print_variance(s, figures)


def register(app: typer.Typer) -> None:
    @app.command("probe")
    @handle_errors
    def probe_cmd(
        answers: list[str] = typer.Argument(..., metavar="[NAME=]ANSWERS...",
                                            help="Each system's answers: a JSONL file (id, prompt, answer, model), "
                                            "a session file or a folder of sessions; two or more for the position "
                                            "probe."),
        rubrics: Optional[Path] = typer.Option(None, "--rubrics", help="Rubrics JSON file: the verbosity and "
                                               "variance probes score the answers against it."),
        samples: int = typer.Option(DEFAULT_SAMPLES, "--samples", min=1, help="Judge samples per answer and rubric "
                                    "for the variance probe (each its own call; a rerun answers from the cache)."),
        padding: float = typer.Option(PAD_FACTOR, "--padding", min=1.1, max=10.0,
                                      help="Pad each answer with neutral filler to this many times its length."),
        judge: Optional[str] = typer.Option(None, "--judge", help="Judge model (default: JURIST_JUDGE, else the "
                                            "offline local/minilm)."),
        template: Optional[Path] = typer.Option(None, "--template", help="Rubric judge template file."),
        criteria: Optional[str] = typer.Option(None, "--criteria", help="What makes an answer better, for the "
                                               "pairwise judge of the position probe."),
        config: Optional[str] = ConfigOpt,
        no_cache: bool = NoCacheOpt,
        parallel: int = typer.Option(4, "--parallel", min=1, help="Answers (or pairs) judged at once."),
        resamples: int = ResamplesOpt,
        seed: int = SeedOpt,
        as_json: bool = JsonOpt,
        output: Optional[Path] = OutputOpt,
        db: Optional[str] = DbOpt,
    ) -> None:
        """Probe the judge: position flips, verbosity bias, self-preference, run-to-run variance."""
        import asyncio

        from jurist.analysis.answers import answer_sets
        from jurist.extras import require_extra
        from jurist.rubrics import load_rubrics

        require_extra("analysis", "jurist probe")
        systems = answer_sets(answers)
        settings = load_settings(config, db=db, cache=False if no_cache else None)
        rubric_set = load_rubrics(rubrics, settings.score_scale) if rubrics else None
        report = asyncio.run(_run(settings, systems, rubric_set, judge, template, criteria, samples, padding,
                                  parallel, resamples, seed))
        show_report(report.to_json(), lambda _: print_report(report), as_json=as_json, output=output)
        raise typer.Exit(EXIT_OK)


async def _run(settings: Any, systems: Any, rubric_set: Any, judge: str | None, template: Path | None,
               criteria: str | None, samples: int, padding: float, parallel: int, resamples: int,
               seed: int) -> "ProbeReport":
    import asyncio

    from jurist.analysis.probe import probe
    from jurist.runtime import Runtime

    runtime = await asyncio.to_thread(Runtime, settings)
    done = 0
    try:
        with waiting("probing the judge") as status:
            def progress() -> None:
                nonlocal done
                done += 1
                status.update(f"probing the judge: {done} judgements")

            return await probe(systems, runtime, rubric_set=rubric_set, judge=judge, template=template,
                               criteria=criteria, samples=samples, padding=padding, parallel=parallel,
                               resamples=resamples, seed=seed, on_progress=progress)
    finally:
        await runtime.aclose()
