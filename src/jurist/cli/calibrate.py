"""`jurist calibrate`: does the judge agree with our people?"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer
from rich.markup import escape

from jurist.cli.common import (ConfigOpt, DbOpt, EXIT_FAILURES, EXIT_OK, JsonOpt, NoCacheOpt, OutputOpt,
                               ResamplesOpt, SeedOpt, console, err_console, handle_errors, load_settings, show_report,
                               waiting)

if TYPE_CHECKING:  # pragma: no cover
    from rich.table import Table

    from jurist.analysis.agreement import Estimate
    from jurist.analysis.calibrate import CalibrationReport, RubricCalibration
    from jurist.analysis.calibrate_local import LocalFit
    from jurist.analysis.threshold import ThresholdFit
    from jurist.judges.calibration import JudgeIdentity


FIGURES = (("exact", "exact agreement"), ("within_one", "within one"), ("kappa", "Cohen's κ"),
           ("weighted_kappa", "Cohen's κ (quadratic)"), ("spearman", "Spearman ρ"), ("kendall", "Kendall τ-b"),
           ("mean_bias", "mean bias (judge − human)"))


def _fmt(estimate: "Estimate") -> str:
    value, low, high = estimate.value, estimate.low, estimate.high
    if value is None:
        return "—"
    if low is None or high is None:
        return f"{value:.3f}"
    return f"{value:.3f} [{low:.3f}, {high:.3f}]"


def figures_table(r: "RubricCalibration") -> "Table":
    from rich.table import Table

    a = r.agreement
    table = Table(title=escape(f"{r.name} ({r.rubric}), scale {r.scale}: {a.items} items"),
                  title_justify="left")
    table.add_column("figure (95% bootstrap interval)")
    table.add_column(f"judge vs people (n={a.judge_vs_humans.n})")
    table.add_column(f"people vs people (n={a.humans.n}): the ceiling")
    for key, label in FIGURES:
        table.add_row(label, _fmt(getattr(a.judge_vs_humans, key)), _fmt(getattr(a.humans, key)))
    table.add_row("Krippendorff's α (ordinal)", _fmt(a.alpha) + " (with the judge)", _fmt(a.alpha_humans))
    if r.unscored:
        table.caption = escape(f"the judge gave no score for {', '.join(r.unscored)}")
    return table


def confusion_table(r: "RubricCalibration") -> "Table":
    from rich.table import Table

    cats = [str(c) for c in r.agreement.categories]
    if r.scale == "pass/fail":
        cats = ["fail", "pass"]
    table = Table(title=escape(f"{r.rubric}: confusion"), title_justify="left")
    table.add_column("judge ↓ people →")
    for c in cats:
        table.add_column(c, justify="right")
    for i, (c, row) in enumerate(zip(cats, r.agreement.judge_vs_humans.confusion)):
        table.add_row(c, *(f"[bold]{n}[/]" if i == j and n else str(n) for j, n in enumerate(row)))
    return table


def differing_table(r: "RubricCalibration") -> "Table":
    from rich.table import Table

    table = Table(title=escape(f"{r.rubric}: where the judge and the people differ most"), title_justify="left")
    for col in ("item", "judge", "people", "gap", "judge's reasoning", "trace"):
        table.add_column(col, overflow="fold")
    for d in r.differing:
        people = ", ".join(f"{a}: {v:g}" for a, v in d.humans.items())
        judge = "—" if d.judge is None else f"{d.judge:g}"
        table.add_row(escape(d.item), judge, escape(people), f"{round(d.gap, 4):g}", escape((d.reasoning or "")[:200]),
                      escape(d.trace or "—"))
    return table


def threshold_table(r: "RubricCalibration", t: "ThresholdFit") -> "Table":
    from rich.table import Table

    degenerate = t.degenerate
    title = f"{r.rubric}: fitted threshold (the judge passes at a score ≥ it), by {t.fit}"
    if degenerate:
        title += ": DEGENERATE, no threshold to use"
    table = Table(title=escape(title), title_justify="left")
    table.add_column("figure (95% bootstrap interval)")
    table.add_column(f"at the fitted threshold (n={t.n})")
    shown = "—" if t.threshold is None else f"{t.threshold:g}"
    table.add_row("threshold", f"[red]{shown} (degenerate)[/]" if degenerate else shown)
    table.add_row("agreement", _fmt(t.agreement))
    table.add_row("Cohen's κ", _fmt(t.kappa))
    table.add_row("F1 (pass)", "—" if t.f1 is None else f"{t.f1:.3f}")
    if degenerate:
        table.caption = escape(f"{degenerate}: the judge's score does not separate what the people pass from what "
                               "they fail (not stored as the calibration's threshold)")
    elif r.pass_at is not None:
        table.caption = escape(f"the figures above count a score ≥ {r.pass_at:g} as a pass; the threshold is "
                               "fitted on these items, so on new ones expect somewhat less")
    return table


def local_fit_table(r: "RubricCalibration", fit: "LocalFit") -> "Table":
    from rich.table import Table

    title = (f"{r.rubric}: the offline judge's threshold (an item is met at a probability ≥ it), fitted by "
             f"macro-F1 on {fit.items} labelled sessions ({', '.join(f'{k} {v}' for k, v in fit.classes.items())})")
    if fit.degenerate:
        title += ": DEGENERATE, not stored"
    table = Table(title=escape(title), title_justify="left")
    table.add_column("figure (every item decided: no band)")
    table.add_column("shipped")
    table.add_column("fitted")
    band = fit.band.get("expresses", 0.0)
    for label, key, fmt in (("threshold (expresses)", "threshold", "{:.4f}"), ("macro-F1", "macro_f1", "{:.3f}"),
                            ("agreement", "agreement", "{:.3f}"),
                            (f"sessions the band (±{band:.3g}) leaves undecided", "uncertain", "{}")):
        table.add_row(label, fmt.format(getattr(fit.before, key)), fmt.format(getattr(fit.after, key)))
    if fit.degenerate:
        table.caption = escape(fit.degenerate)
    else:
        table.caption = escape("fitted on these sessions, so on new ones expect somewhat less; the figures above "
                               "it are the judge as it ran (with the band, and the thresholds of an earlier fit "
                               "where one was stored)"
                               + (f"; not judged: {', '.join(fit.unscored)}" if fit.unscored else ""))
    return table


def stored_line(r: "RubricCalibration", key: "JudgeIdentity") -> str:
    line = (f"stored calibration {r.calibration_id}: judge {key.judge_model}, template {key.template_name} "
            f"({key.template_hash}), rubric {r.rubric!r}")
    if r.local is not None and not r.local.degenerate:
        t = r.local.thresholds["expresses"]
        line += (f", with the offline judge's fitted threshold {t:.4f} (band ±{r.local.band.get('expresses', 0.0):.3g}), "
                 "which it judges this rubric with from now on")
    return line


def print_report(report: "CalibrationReport") -> None:
    console.print(escape(f"judge {report.judge}; labels {report.labels} "
                         f"(annotators: {', '.join(report.annotators)}); "
                         f"{report.resamples} bootstrap resamples over the items"), highlight=False)
    for r in report.rubrics:
        console.print(figures_table(r))
        console.print(confusion_table(r))
        if r.threshold is not None:
            console.print(threshold_table(r, r.threshold))
        if r.local is not None:
            console.print(local_fit_table(r, r.local))
        if r.differing:
            console.print(differing_table(r))
    for r in report.rubrics:
        if r.calibration_id and r.judge is not None:
            console.print(escape(stored_line(r, r.judge)), highlight=False)


GATE_EVALUATORS = ("quality", "comprehensiveness")
RESEARCH_STAGES = ("plan", "retrieval", "answer")
FITS = ("agreement", "f1")  # jurist.analysis.threshold.FITS
GATE_THRESHOLD = 0.4  # jurist.gate.config.GateConfig's default threshold


def _target(rubrics: Path | None, gate: str | None, research: str | None, sessions: list[Path] | None,
            items: Path | None, template: Path | None, fit: str, fit_local: bool = False,
            local_band: float | None = None) -> str:
    """What is calibrated (rubric | gate | research), the options checked against it."""
    from jurist.errors import UsageError

    given = [name for name, value in (("--rubrics", rubrics), ("--gate", gate), ("--research", research)) if value]
    if len(given) != 1:
        raise UsageError("say what to calibrate with one of --rubrics FILE (rubric scoring), --gate "
                         f"{'|'.join(GATE_EVALUATORS)} (the response gate) or --research "
                         f"{'|'.join(RESEARCH_STAGES)} (a research stage's panel)"
                         + (f", not {' and '.join(given)}" if given else ""))
    if gate is not None and gate not in GATE_EVALUATORS:
        raise UsageError(f"--gate must be one of {', '.join(GATE_EVALUATORS)}, not {gate!r}")
    if research is not None and research not in RESEARCH_STAGES:
        raise UsageError(f"--research must be one of {', '.join(RESEARCH_STAGES)}, not {research!r}")
    if fit not in FITS:
        raise UsageError(f"--fit must be one of {', '.join(FITS)}, not {fit!r}")
    if research is not None:
        if items is None:
            raise UsageError("--research needs --items: a JSONL file of the labelled items (docs/calibration.md)")
        if sessions:
            raise UsageError("--research judges --items, not --sessions")
    elif not sessions:
        raise UsageError(f"{given[0]} needs --sessions: a session file or a folder of *.jsonl")
    if template is not None and rubrics is None:
        raise UsageError("--template is the rubric judge's prompt; the gate and the panels use their own")
    if fit_local and rubrics is None:
        raise UsageError("--fit-local fits the offline judge's threshold of rubric items (--rubrics); the gate and "
                         "the research stages keep the shipped thresholds")
    if local_band is not None and not fit_local:
        raise UsageError("--local-band is the band kept with a fit: give it with --fit-local")
    return "rubric" if rubrics else "gate" if gate else "research"


def register(app: typer.Typer) -> None:
    @app.command("calibrate")
    @handle_errors
    def calibrate_cmd(
        labels: Path = typer.Option(..., "--labels", help="Human labels (JSONL: item, rubric, label, annotator)."),
        rubrics: Optional[Path] = typer.Option(None, "--rubrics", help="Calibrate the rubric judge on this rubrics "
                                               "JSON file."),
        gate: Optional[str] = typer.Option(None, "--gate", help="Calibrate the response gate's judge: quality | "
                                           "comprehensiveness (pass/fail labels of the last assistant turn)."),
        research: Optional[str] = typer.Option(None, "--research", help="Calibrate a research stage's panel: plan | "
                                               "retrieval | answer (pass/fail labels per dimension)."),
        sessions: Optional[list[Path]] = typer.Option(None, "--sessions", help="A session file or a folder of "
                                                      "*.jsonl; repeat for more (--rubrics, --gate)."),
        items: Optional[Path] = typer.Option(None, "--items", help="--research: the items (JSONL: item, query, "
                                             "plan, sources, answer)."),
        judge: Optional[str] = typer.Option(None, "--judge", help="Judge model (default: as evaluate or the gate "
                                            "would pick it; the offline local/minilm when none is configured)."),
        template: Optional[Path] = typer.Option(None, "--template", help="Judge prompt template (--rubrics)."),
        threshold: float = typer.Option(GATE_THRESHOLD, "--threshold", min=0.0, max=1.0,
                                        help="--gate quality: the gate's threshold (its pass in the figures)."),
        fit: str = typer.Option("agreement", "--fit", help="What the fitted threshold of a pass/fail rubric "
                                "maximises: agreement | f1."),
        fit_local: bool = typer.Option(False, "--fit-local", help="--rubrics with --judge local/minilm: fit the "
                                       "offline judge's item threshold on the labels (by macro-F1; at least 20 "
                                       "labelled sessions per rubric) and store it with the calibration."),
        local_band: Optional[float] = typer.Option(None, "--local-band", min=0.0, max=0.49, help="--fit-local: the "
                                                   "half-width of the band of uncertainty kept with the fit "
                                                   "(default: as shipped)."),
        config: Optional[str] = ConfigOpt,
        no_cache: bool = NoCacheOpt,
        no_store: bool = typer.Option(False, "--no-store", help="Do not keep the calibration in the store "
                                      "(require_calibration then will not find it)."),
        resamples: int = ResamplesOpt,
        seed: int = SeedOpt,
        as_json: bool = JsonOpt,
        output: Optional[Path] = OutputOpt,
        db: Optional[str] = DbOpt,
    ) -> None:
        """Compare a judge's verdicts with human labels (κ, ρ, τ, α, bias; a fitted pass threshold) and store
        the calibration that require_calibration looks up; with --fit-local, fit the offline judge's item
        threshold too. Exit 1 when a fitted threshold is degenerate, 2 when the labels are too few to fit on."""
        import asyncio

        from jurist.analysis.labels import load_labels
        from jurist.extras import require_extra

        require_extra("analysis", "jurist calibrate")
        target = _target(rubrics, gate, research, sessions, items, template, fit, fit_local, local_band)
        settings = load_settings(config, db=db, cache=False if no_cache else None)
        job = _Job(target, settings, load_labels(labels), sessions or [], judge,
                   dict(resamples=resamples, seed=seed, fit=fit, store=not no_store), template=template, gate=gate,
                   threshold=threshold, stage=research, items=items, local=(fit_local, local_band))
        if rubrics is not None:
            from jurist.rubrics import load_rubrics

            job.rubric_set = load_rubrics(rubrics, settings.score_scale)
        report = asyncio.run(job.run())
        show_report(report.to_json(), lambda _: print_report(report), as_json=as_json, output=output)
        if report.degenerate:  # the figures stand; the fitted threshold is no result
            for line in report.degenerate:
                err_console.print(escape(f"no usable threshold for {line}"), style="red", highlight=False)
            raise typer.Exit(EXIT_FAILURES)
        raise typer.Exit(EXIT_OK)


@dataclass
class _Job:
    """One calibration run: what is calibrated (rubric | gate | research) and how."""

    target: str
    settings: Any
    labels: Any
    sessions: list[Path]
    judge: str | None
    options: dict[str, Any]  # resamples, seed, fit, store
    rubric_set: Any = None  # rubric: the rubrics
    template: Path | None = None  # rubric: the judge's template
    gate: str | None = None  # gate: the evaluator
    threshold: float = GATE_THRESHOLD  # gate: its threshold
    stage: str | None = None  # research: the stage
    items: Path | None = None  # research: the items file
    local: tuple[bool, float | None] = (False, None)  # rubric: fit the offline judge's threshold; its band

    async def run(self) -> "CalibrationReport":
        import asyncio

        from jurist.runtime import Runtime

        runtime = await asyncio.to_thread(Runtime, self.settings)
        try:
            with waiting(f"judging the labelled items ({self.target})"):
                return await self._calibrate(runtime)
        finally:
            await runtime.aclose()

    async def _calibrate(self, runtime: Any) -> "CalibrationReport":
        opts = self.options
        if self.target == "rubric":
            from jurist.analysis.calibrate import calibrate

            return await calibrate(self.rubric_set, self.labels, self.sessions, runtime, judge=self.judge,
                                   template=self.template, fit_local=self.local[0], local_band=self.local[1], **opts)
        if self.target == "gate":
            from jurist.analysis.calibrate_gate import calibrate_gate
            from jurist.gate import Gate, GateConfig

            gate_config = GateConfig(evaluator=self.gate, threshold=self.threshold, judge=self.judge)
            async with Gate(gate_config, runtime=runtime) as gate:
                return await calibrate_gate(gate, self.labels, self.sessions, **opts)
        from jurist.analysis.calibrate_panel import calibrate_research
        from jurist.research.config import load_research_config

        assert self.stage is not None and self.items is not None
        config = load_research_config(settings=self.settings)
        if self.judge:  # every role of the stage on this judge
            config = config.model_copy(update={"model": self.judge, "evaluators": {
                role: entry.model_copy(update={"model": self.judge}) for role, entry in config.evaluators.items()}})
        return await calibrate_research(self.stage, self.items, self.labels, runtime, config=config, **opts)
