"""`jurist evaluate` and `jurist evaluate-batch`."""

from __future__ import annotations

import enum
import signal
from textwrap import shorten
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Coroutine, Optional, TypeVar

import typer
from rich.markup import escape

from jurist.cli.budget import AllowUnknownCostOpt, DryRunOpt, MaxCostOpt, cost_line
from jurist.cli.common import (ConfigOpt, DbOpt, EXIT_BAD_INPUT, EXIT_FAILURES, EXIT_OK, NoCacheOpt, console,
                               err_console, handle_errors, json_text, load_settings, local_load_notice,
                               require_local_judge, stdout_is_terminal, waiting)

if TYPE_CHECKING:  # pragma: no cover
    from rich.table import Table

    from jurist.rubrics.batch import BatchReport
    from jurist.rubrics.results import RubricResult

EXIT_TERMINATED = 128 + signal.SIGTERM  # 143, as the shell reports a process ended by SIGTERM
INTERRUPTED = "interrupted; finished results are kept, rerun to resume"
T = TypeVar("T")

JudgeOpt = typer.Option(None, "--judge", help="Judge model: provider/model or an alias (default: JURIST_JUDGE).")
TemplateOpt = typer.Option(None, "--template", help="Judge prompt template: a file ({rubric_name}, {chat_session}, ...), a shipped name (judge_template: note 003's SCORE: format) or name@version.")
TimeoutOpt = typer.Option(None, "--timeout", help="Seconds per judge attempt.")
RequireCalibrationOpt = typer.Option(
    None, "--require-calibration", min=-1.0, max=1.0, metavar="MIN_KAPPA",
    help="Before any judge call, require a stored calibration (jurist calibrate) of the judge on every rubric with "
         "κ >= MIN_KAPPA; else exit 2 naming what is missing (default: as the rubrics file says; none).")


class ScoreMode(str, enum.Enum):
    """plain: the judge's number; logprobs: also the expectation over the scale's tokens (G-Eval)."""

    plain = "plain"
    logprobs = "logprobs"


ScoreModeOpt = typer.Option(
    None, "--score-mode",
    help="plain: the judge's number; logprobs: also a weighted score from the endpoint's top logprobs "
         "(default: score_mode in jurist.yaml, else plain).")


class Engine(str, enum.Enum):
    """Where evaluate-batch runs: this process, or a Ray cluster (the `ray` extra)."""

    local = "local"
    ray = "ray"


def result_table(result: "RubricResult") -> "Table":
    from rich.table import Table

    table = Table(title=escape(f"session {result.session_id}"), title_justify="left")
    for col in ("rubric", "score", "status", "reasoning"):
        table.add_column(col, overflow="fold")
    for rs in result.rubric_scores:
        score = "—" if rs.score is None else f"{rs.score:g}/{rs.max_score:g}"
        if rs.score_range is not None:  # undecided items: the score lies in this range
            score = f"— ({rs.score_range[0]:g} to {rs.score_range[1]:g}/{rs.max_score:g})"
        if rs.weighted_score is not None:
            score = f"{rs.weighted_score:g}/{rs.max_score:g} (plain {rs.score:g})"
        elif rs.logprobs_unavailable:
            score += " (logprobs unavailable)"
        style = "green" if rs.file_status == "scored" else "red"
        table.add_row(escape(rs.rubric_name), score, f"[{style}]{rs.file_status}[/]", escape((rs.reasoning or "")[:300]))
    s = result.summary
    total = "—" if s.total_score is None else f"{s.total_score:g}/{s.max_score:g} ({s.percentage:g}%)"
    table.caption = f"total {total}; {s.rubrics_evaluated} scored, {s.rubrics_failed} failed"
    return table


def register(app: typer.Typer) -> None:
    @app.command("evaluate")
    @handle_errors
    def evaluate_cmd(
        rubrics: Path = typer.Option(..., "--rubrics", help="Rubrics JSON file."),
        session: Path = typer.Option(..., "--session", help="Chat session JSONL file."),
        output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write result.json here."),
        as_json: bool = typer.Option(
            False, "--json",
            help="Print the result as JSON, not the table (the default when stdout is not a terminal: "
                 "`jurist evaluate ... | jq` gets JSON only)."),
        judge: Optional[str] = JudgeOpt,
        template: Optional[Path] = TemplateOpt,
        config: Optional[str] = ConfigOpt,
        no_cache: bool = NoCacheOpt,
        timeout: Optional[float] = TimeoutOpt,
        score_mode: Optional[ScoreMode] = ScoreModeOpt,
        db: Optional[str] = DbOpt,
        require_calibration: Optional[float] = RequireCalibrationOpt,
    ) -> None:
        """Score one chat session against a rubrics file.

        On a terminal it prints the result as a table; piped (or with --json) as JSON, on stdout alone."""
        import asyncio

        from jurist.jsonfiles import write_json
        from jurist.models.registry import judge_ref
        from jurist.rubrics.api import evaluate_result
        from jurist.rubrics import load_rubrics
        from jurist.rubrics.calibration import with_bar

        settings = load_settings(config, db=db, timeout=timeout, cache=False if no_cache else None,
                                 score_mode=score_mode.value if score_mode else None)
        rubric_set = with_bar(load_rubrics(rubrics, settings.score_scale), require_calibration)
        ref = judge_ref(settings, judge)
        require_local_judge(ref)
        with waiting(f"scoring {session.name} with {ref}"):
            result = asyncio.run(evaluate_result(rubric_set, session, judge=judge, template=template,
                                                 settings=settings))
        data = result.to_json()
        if output:
            output.parent.mkdir(parents=True, exist_ok=True)
            write_json(output, data)
        if as_json or not (output or stdout_is_terminal()):
            typer.echo(json_text(data, indent=2))
        else:
            console.print(result_table(result))
        if output:
            err_console.print(escape(f"result written to {output}"), highlight=False)
        raise typer.Exit(EXIT_OK if result.status == "scored" else EXIT_FAILURES)

    @app.command("evaluate-batch")
    @handle_errors
    def evaluate_batch_cmd(
        rubrics: Path = typer.Option(..., "--rubrics", help="Rubrics JSON file."),
        sessions_dir: Path = typer.Option(..., "--sessions-dir", help="Folder of *.jsonl sessions."),
        output_dir: Path = typer.Option(..., "--output-dir", help="Where results and summary.json go."),
        parallel: int = typer.Option(5, "--parallel", min=1, help="Sessions scored at once."),
        max_concurrency: Optional[int] = typer.Option(
            None, "--max-concurrency", min=1, help="Requests in flight to the judge endpoint."
        ),
        force: bool = typer.Option(False, "--force", help="Rescore sessions that already have a result."),
        retry_failed: bool = typer.Option(
            True, "--retry-failed/--no-retry-failed",
            help="Score again sessions whose earlier result failed or partly failed (scored rubrics come from the "
                 "call cache).",
        ),
        judge: Optional[str] = JudgeOpt,
        template: Optional[Path] = TemplateOpt,
        config: Optional[str] = ConfigOpt,
        no_cache: bool = NoCacheOpt,
        timeout: Optional[float] = TimeoutOpt,
        engine: Engine = typer.Option(Engine.local, "--engine", help="local: this process; ray: a Ray cluster."),
        ray_address: Optional[str] = typer.Option(
            None, "--ray-address", help="Ray cluster to join ('auto', ray://host:10001); default: start a local one."
        ),
        workers: Optional[int] = typer.Option(
            None, "--workers", min=1, help="Ray: worker processes (default: one per CPU of the cluster)."
        ),
        shard_size: int = typer.Option(100, "--shard-size", min=1, help="Ray: sessions per shard."),
        worker_concurrency: Optional[int] = typer.Option(
            None, "--worker-concurrency", min=1, help="Ray: requests in flight per worker (default: no own cap)."
        ),
        score_mode: Optional[ScoreMode] = ScoreModeOpt,
        db: Optional[str] = DbOpt,
        require_calibration: Optional[float] = RequireCalibrationOpt,
        max_cost: Optional[float] = MaxCostOpt,
        allow_unknown_cost: bool = AllowUnknownCostOpt,
        dry_run: bool = DryRunOpt,
    ) -> None:
        """Score every session in a folder; resumable (a rerun scores what has no result, or a failed one).

        Each result file is written once its store row is committed; interrupted (Ctrl-C, SIGTERM, even kill -9),
        a rerun resumes where the batch stopped. One batch at a time writes to an output folder.
        With --engine ray the sessions are scored by worker processes on a Ray cluster; --max-concurrency
        then bounds the requests in flight across the whole cluster and --parallel is per worker.
        With --max-cost the batch stops cleanly when its calls' recorded cost reaches the budget (exit code 3,
        resumable); --dry-run prints the calls, tokens and cost it expects and makes none.
        """
        from jurist.errors import ConfigError
        from jurist.models.registry import judge_ref
        from jurist.rubrics import load_rubrics
        from jurist.rubrics.calibration import with_bar

        settings = load_settings(config, db=db, timeout=timeout, cache=False if no_cache else None,
                                 score_mode=score_mode.value if score_mode else None)
        rubric_set = with_bar(load_rubrics(rubrics, settings.score_scale), require_calibration)
        ref = judge_ref(settings, judge)
        require_local_judge(ref)
        if engine is Engine.ray and (max_cost is not None or dry_run):
            from jurist.errors import UsageError

            raise UsageError("--max-cost and --dry-run count the calls made in this process: use them with "
                             "--engine local (a Ray batch's calls and their cost are in `jurist logs`)")
        if allow_unknown_cost and max_cost is None:
            from jurist.errors import UsageError

            raise UsageError("--allow-unknown-cost goes with --max-cost USD")
        from jurist.cli.budget import check_budget

        check_budget(max_cost, allow_unknown_cost, [ref, *filter(None, [settings.visual_evaluator])], settings)
        kw: dict[str, Any] = dict(parallel=parallel, max_concurrency=max_concurrency, force=force,
                                  retry_failed=retry_failed, judge=judge, template=template, settings=settings)
        if engine is Engine.ray:
            from jurist.rubrics.ray_engine import RayOptions, import_ray

            try:
                import_ray()  # before any work
            except ConfigError as exc:  # printed without markup: the message holds "jurist[ray]"
                err_console.print(f"error: {exc}", markup=False, highlight=False)
                raise typer.Exit(EXIT_BAD_INPUT) from None
            kw["options"] = RayOptions(address=ray_address, workers=workers, shard_size=shard_size,
                                       worker_concurrency=worker_concurrency)
        from jurist.models.cost import CostBudget, DryRun, charged_to, expecting

        if dry_run:
            from jurist.cli.budget import print_dry_run

            dry = DryRun()
            with expecting(dry):
                report = run_batch_with_progress(rubric_set, sessions_dir, output_dir, engine=engine, **kw)
            print_dry_run(dry, f"{report.scored} sessions would be scored ({report.skipped} already done)")
            for err in report.input_errors:
                console.print(f"[red]input error:[/] {escape(str(err))}", highlight=False)
            raise typer.Exit(EXIT_BAD_INPUT if report.input_errors else EXIT_OK)
        with charged_to(CostBudget(max_cost) if max_cost is not None else None):
            report = run_batch_with_progress(rubric_set, sessions_dir, output_dir, engine=engine, **kw)
        print_batch_report(report)
        raise typer.Exit(report.exit_code)


def run_batch_with_progress(rubric_set: Any, sessions_dir: Path, output_dir: Path, *,
                            engine: "Engine | str" = "local", **kw: Any) -> "BatchReport":
    """Run a batch (in this process, or on Ray) with a rich progress bar over the session files.

    Until the first session is done, a spinner on the bar says what it waits
    for: the local judge's model loading, or the first judge answer."""
    import asyncio

    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn)

    from jurist.rubrics.batch import session_files

    run: Callable[..., Coroutine[Any, Any, BatchReport]]
    if Engine(engine) is Engine.ray:
        from jurist.rubrics.ray_engine import evaluate_batch_on_ray

        run = evaluate_batch_on_ray
    else:
        from jurist.rubrics import evaluate_batch

        run = evaluate_batch
    total = len(session_files(sessions_dir))
    first = "waiting for the first result"
    columns = (SpinnerColumn(), TextColumn("[bold]scoring"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[last]}"), TimeElapsedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task("sessions", total=total, last=first)

        def on_progress(name: str, status: str) -> None:
            progress.update(task, advance=1, last=f"{name}: {status}")

        def on_load(text: str | None) -> None:
            if not progress.tasks[task].completed:
                progress.update(task, last=text or first)

        with local_load_notice(on_load):
            return asyncio.run(until_terminated(run(rubric_set, sessions_dir, output_dir,
                                                     on_progress=on_progress, **kw)))


async def until_terminated(work: Coroutine[Any, Any, T]) -> T:
    """Run ``work``; SIGTERM cancels it as Ctrl-C does (what is being saved is saved, the store
    is flushed), then the command says so and exits 143."""
    import asyncio

    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    terminated = False

    def on_sigterm() -> None:
        nonlocal terminated
        terminated = True
        if task is not None:
            task.cancel()

    try:
        loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    except (NotImplementedError, RuntimeError):  # no signal handlers here (Windows, or not the main thread)
        return await work
    try:
        return await work
    except asyncio.CancelledError:
        if not terminated:
            raise
        err_console.print(INTERRUPTED)
        raise typer.Exit(EXIT_TERMINATED) from None
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


def print_batch_report(report: "BatchReport") -> None:
    from rich.table import Table

    bs = report.summary["batch_summary"]
    table = Table(title="per-rubric summary", title_justify="left")
    for col in ("rubric", "average", "median", "scored", "failed"):
        table.add_column(col)
    for rid, r in report.summary["per_rubric_summary"].items():
        fmt = lambda x: "—" if x is None else f"{x:g}"  # noqa: E731
        table.add_row(escape(f"{r['name']} ({rid})"), fmt(r["average"]), fmt(r["median"]), str(r["scored"]),
                      f"[red]{r['failed']}[/]" if r["failed"] else "0")
    console.print(table)
    avg = "—" if bs["average_score"] is None else f"{bs['average_score']:g}/{bs['max_score']:g}"
    retried = f", {report.retried} of them retried after failing" if report.retried else ""
    console.print(
        f"{bs['total_sessions']} sessions ({report.scored} scored now{retried}, {report.skipped} already done), "
        f"average {avg}, {report.evaluations_failed} rubric evaluations failed"
    )
    if report.failure_reasons:
        print_failure_reasons(report.failure_reasons)
    if report.endpoint_note:
        console.print(f"[red]{escape(report.endpoint_note)}[/]", highlight=False)
    line = cost_line(report.summary.get("cost"))
    if line:
        console.print(escape(line), highlight=False)
    if report.budget_note:
        console.print(f"[yellow]{escape(report.budget_note)}[/]", highlight=False)
    for err in report.input_errors:
        console.print(f"[red]input error:[/] {escape(str(err))}", highlight=False)
    console.print(escape(f"summary written to {report.summary_path}"), highlight=False)


SHOWN_REASONS = 5  # the most frequent failure reasons a batch prints; the others are summed up
REASON_CHARS = 300  # the most of a reason printed (all of it: the result files, `jurist logs --json`)


def print_failure_reasons(reasons: dict[str, int]) -> None:
    """Why rubric evaluations failed, most frequent reason first, with the `jurist logs`
    commands that list the judge calls behind them."""
    from rich.table import Table

    from jurist.errors import UNDECIDED
    from jurist.rubrics.judging import PURPOSE

    total = sum(reasons.values())
    console.print(f"[red]why the {total} rubric evaluation{'s' if total != 1 else ''} failed:[/]", highlight=False)
    grid = Table.grid(padding=(0, 1))
    grid.add_column(justify="right", no_wrap=True)
    grid.add_column()
    items = list(reasons.items())
    for reason, count in items[:SHOWN_REASONS]:
        grid.add_row(f"{count} ×", escape(shorten(reason, REASON_CHARS, placeholder=" …")))
    rest = items[SHOWN_REASONS:]
    if rest:
        grid.add_row(f"{sum(c for _, c in rest)} ×", f"{len(rest)} other reasons (in the result files' reasoning)")
    console.print(grid)
    if any(reason.startswith(UNDECIDED) for reason in reasons):
        console.print("where the judge could not decide an item, its result file lists the items it did decide "
                      '("met": null for the others) and the range the score lies in (score_range)', highlight=False)
    statuses = sorted({s for s in map(logs_status, reasons) if s is not None})
    if statuses:
        console.print("the failed judge calls, with their errors:", highlight=False)
        for status in statuses:  # one a line, never wrapped: to copy and run
            console.print(f"  jurist logs --status {status} --purpose {PURPOSE}", markup=False, highlight=False,
                          soft_wrap=True)


def logs_status(reason: str) -> str | None:
    """The status under which `jurist logs` lists the judge calls of a failure with this reason:
    ``parse_error`` for a reply that could not be parsed, ``error`` for a model error
    (the reason begins with its type: ``ModelUnavailable: ...``); None when no call failed
    (the local judge's refusal, a rubric out of time)."""
    from jurist import errors
    from jurist.judges.judge import PARSE_FAILED

    if reason.startswith(PARSE_FAILED):
        return "parse_error"
    kind = getattr(errors, reason.split(":", 1)[0], None)
    return "error" if isinstance(kind, type) and issubclass(kind, errors.ModelError) else None


__all__ = ["register", "run_batch_with_progress", "print_batch_report", "EXIT_BAD_INPUT"]
