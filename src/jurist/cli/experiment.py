"""`jurist experiment`: run a target over a dataset and judge every answer (and `compare`, where it is installed)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer
from rich.markup import escape

from jurist.cli.common import (ConfigOpt, DbOpt, CommandGroup, NoCacheOpt, console, err_console, handle_errors,
                               load_settings, local_load_notice, print_store, require_local_judge)
from jurist.cli.budget import AllowUnknownCostOpt, DryRunOpt, MaxCostOpt, check_budget, print_dry_run
from jurist.cli.evaluate import JudgeOpt, TemplateOpt, TimeoutOpt, until_terminated

if TYPE_CHECKING:  # pragma: no cover
    from jurist.config import Settings
    from jurist.experiments.run import ExperimentReport, ExperimentSpec

experiment_app = typer.Typer(name="experiment", cls=CommandGroup, no_args_is_help=True, add_completion=False,
                             help="Experiments: a target run over a dataset version, every answer judged.")


def register(app: typer.Typer) -> None:
    app.add_typer(experiment_app)


@experiment_app.command("run")
@handle_errors
def run_cmd(
    dataset: str = typer.Option(..., "--dataset", help="The dataset's name (jurist datasets list)."),
    target: str = typer.Option(..., "--target", help="What answers each item: a model (provider/model or an alias) "
                                                     "or python:module:function."),
    rubrics: Path = typer.Option(..., "--rubrics", help="Rubrics JSON file the answers are judged with."),
    name: Optional[str] = typer.Option(None, "--name", help="The experiment's name (default: <dataset>-<time>); "
                                                            "a rerun with the same name resumes it."),
    version: Optional[str] = typer.Option(None, "--version", help="The dataset version: its hash or number "
                                                                  "(default: the latest)."),
    judge: Optional[str] = JudgeOpt,
    template: Optional[Path] = TemplateOpt,
    parallel: int = typer.Option(8, "--parallel", min=1, help="Items answered and judged at once."),
    output_dir: Optional[Path] = typer.Option(None, "--output-dir", help="Where the item results and summary.json "
                                                                        "go (default: experiments/<name>)."),
    retry_failed: bool = typer.Option(True, "--retry-failed/--no-retry-failed",
                                      help="On a rerun, run again the items that failed."),
    max_cost: Optional[float] = MaxCostOpt,
    allow_unknown_cost: bool = AllowUnknownCostOpt,
    dry_run: bool = DryRunOpt,
    timeout: Optional[float] = TimeoutOpt,
    no_cache: bool = NoCacheOpt,
    config: Optional[str] = ConfigOpt,
    db: Optional[str] = DbOpt,
) -> None:
    """Run TARGET on every item of a dataset version and judge each answer with the rubrics.

    Resumable: a rerun with the same --name skips the items that were scored, runs again the ones that failed,
    and judges the answers kept from a run that stopped (nothing is generated or judged twice). Writes one
    <item>_result.json per item and summary.json; exit 1 when an item failed, 3 when --max-cost stopped it."""
    from datetime import datetime, timezone

    from jurist.experiments.run import ExperimentSpec
    from jurist.models.registry import judge_ref

    settings = load_settings(config, db=db, timeout=timeout, cache=False if no_cache else None)
    ref = judge_ref(settings, judge)
    require_local_judge(ref)
    check_cost_options(target, ref, max_cost, allow_unknown_cost, settings)
    if name is None:
        name = f"{dataset}-{datetime.now(timezone.utc).strftime('%Y%m%d-%H%M%S')}"
    print_store(settings, err_console)
    spec = ExperimentSpec(name=name, dataset=dataset, target=target, rubrics=rubrics, version=version, judge=judge,
                          template=template, parallel=parallel, output_dir=output_dir, retry_failed=retry_failed,
                          max_cost=max_cost)
    if dry_run:
        print_expected(spec, settings)
        raise typer.Exit(0)
    report = run_with_progress(spec, settings)
    print_report(report)
    raise typer.Exit(report.exit_code)


def check_cost_options(target: str, judge: str, max_cost: float | None, allow_unknown: bool,
                       settings: "Settings") -> None:
    """Before a budgeted run: every model's price must be known (a function target's never is),
    unless --allow-unknown-cost; exit 2 otherwise."""
    from jurist.errors import UsageError
    from jurist.experiments.targets import PYTHON

    if allow_unknown and max_cost is None:
        raise UsageError("--allow-unknown-cost goes with --max-cost USD")
    if max_cost is None:
        return
    refs = [judge, *filter(None, [settings.visual_evaluator])]
    if target.startswith(PYTHON):
        if not allow_unknown:
            raise UsageError(f"--max-cost cannot be kept: the target {target} is your own function, whose cost "
                             "jurist does not know. Pass --allow-unknown-cost to run with a budget that counts the "
                             "judge's calls only, or drop --max-cost")
        err_console.print(escape(f"the budget counts only known costs: {target}: a function target's cost is "
                                 "unknown"), highlight=False, soft_wrap=True)
    else:
        refs.insert(0, target)
    check_budget(max_cost, allow_unknown, refs, settings)


def print_expected(spec: "ExperimentSpec", settings: "Settings") -> None:
    """--dry-run: the calls the run would make, with no call made and nothing written."""
    import asyncio

    from jurist.experiments.dryrun import expect_experiment

    with local_load_notice(lambda text: None):
        expected = asyncio.run(expect_experiment(spec, settings=settings))
    print_dry_run(expected.dry, f"{expected.todo} items would be answered and judged ({expected.done_before} "
                                "already done); the judge's input counts a stand-in answer as long as the target "
                                "may write")


def run_with_progress(spec: "ExperimentSpec", settings: "Settings") -> "ExperimentReport":
    """Run the experiment with a rich progress bar over its items."""
    import asyncio

    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn)

    from jurist.experiments.run import run_experiment

    first = "waiting for the first answer"
    columns = (SpinnerColumn(), TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[last]}"), TimeElapsedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task(spec.name, total=None, last=first)

        def on_start(record: object, todo: int) -> None:
            progress.update(task, total=todo)

        def on_progress(item_id: str, status: str) -> None:
            if status == "skipped":
                return
            progress.update(task, advance=1, last=f"{item_id}: {status}")

        def on_load(text: str | None) -> None:
            if not progress.tasks[task].completed:
                progress.update(task, last=text or first)

        with local_load_notice(on_load):
            work = run_experiment(spec, settings=settings, on_progress=on_progress, on_start=on_start)
            return asyncio.run(until_terminated(work))


def print_report(report: "ExperimentReport") -> None:
    from rich.table import Table

    from jurist.models.cost import format_usd

    s = report.summary
    table = Table(title="per-rubric summary", title_justify="left")
    for col in ("rubric", "average", "pass rate", "scored", "failed"):
        table.add_column(col)
    per_rubric = s["per_rubric"]
    assert isinstance(per_rubric, dict)
    for rid, r in per_rubric.items():
        assert isinstance(r, dict)
        fmt = lambda x: "—" if x is None else f"{x:g}"  # noqa: E731
        table.add_row(escape(f"{r['name']} ({rid})"), fmt(r["average"]), fmt(r["pass_rate"]), str(r["scored"]),
                      f"[red]{r['failed']}[/]" if r["failed"] else "0")
    console.print(table)
    record = report.record
    items = s["items"]
    overall = s["overall"]
    assert isinstance(items, dict) and isinstance(overall, dict)
    avg = "—" if overall["average_score"] is None else f"{overall['average_score']:g}/{overall['max_score']:g}"
    cost = format_usd(record.cost_usd) + (f" ({record.cost_note})" if record.cost_note else "")
    console.print(escape(
        f"experiment {record.name} ({record.status}): dataset {record.dataset} version {record.dataset_version}, "
        f"target {record.target}, judge {', '.join(record.judge_models)}"), highlight=False, soft_wrap=True)
    console.print(escape(
        f"{items['total']} items: {items['scored']} scored, {items['failed']} failed, {items['not_done']} not done "
        f"({report.done_now} done now, {report.skipped} done before); average {avg}; cost {cost}"),
        highlight=False, soft_wrap=True)
    failures = s["failures"]
    assert isinstance(failures, list)
    for f in failures[:5]:
        assert isinstance(f, dict)
        console.print(f"[red]failed:[/] {escape(str(f['item_id']))}: {escape(str(f['error'])[:300])}",
                      highlight=False)
    for note in report.notes:
        console.print(escape(note), style="yellow", highlight=False, soft_wrap=True)
    console.print(escape(f"summary written to {report.summary_path}"), highlight=False)


def _add_compare() -> None:
    """`jurist experiment compare`, from its own module (when this jurist has it)."""
    from importlib import import_module
    from importlib.util import find_spec

    if find_spec("jurist.cli.experiment_compare") is not None:
        import_module("jurist.cli.experiment_compare").register(experiment_app)


_add_compare()
