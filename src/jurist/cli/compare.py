"""`jurist compare`: which system's answers are better, judged pairwise in both orders."""

from __future__ import annotations

from pathlib import Path
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Optional

import typer
from rich.markup import escape

from jurist.cli.common import (ConfigOpt, DbOpt, EXIT_FAILURES, EXIT_OK, JsonOpt, NoCacheOpt, OutputOpt,
                               ResamplesOpt, SeedOpt, console, err_console, handle_errors, load_settings,
                               show_report, waiting)

if TYPE_CHECKING:  # pragma: no cover
    from rich.table import Table

    from jurist.analysis.agreement import Estimate
    from jurist.analysis.pairwise import CompareReport



def fmt(estimate: "Estimate | Mapping[str, float | None]", percent: bool = True) -> str:
    """``62.5% [40.0%, 85.0%]`` (or plain numbers); — where there is no value."""
    figures = estimate.to_json() if not isinstance(estimate, Mapping) else estimate
    value, low, high = figures["value"], figures["low"], figures["high"]
    if value is None:
        return "—"
    show = (lambda x: f"{x * 100:.1f}%") if percent else (lambda x: f"{x:.3f}")
    return show(value) if low is None or high is None else f"{show(value)} [{show(low)}, {show(high)}]"


def matchups_table(report: "CompareReport") -> "Table":
    from rich.table import Table

    from jurist.analysis.agreement import Estimate

    table = Table(title="Each system against each other (95% bootstrap intervals over the prompts)",
                  title_justify="left")
    for col in ("first", "second", "prompts", "judged", "wins", "ties", "losses", "win rate", "score (tie = ½)",
                "position flips"):
        table.add_column(col, overflow="fold")
    for m in report.matchups:
        flips = m.position
        table.add_row(escape(m.first), escape(m.second), str(m.items), str(m.judged), str(m.wins),
                      str(m.ties), str(m.losses), fmt(m.win_rate), fmt(m.score),
                      f"{flips.flips} ({fmt(Estimate(flips.flip_rate.value, None, flips.flip_rate.high))})")
    return table


def ranking_table(report: "CompareReport") -> "Table":
    from rich.table import Table

    table = Table(title="Bradley–Terry ranking (log-strength, centred on 0; 95% bootstrap interval; a rank "
                        "range where the order is not established)", title_justify="left")
    for col in ("rank", "system", "strength", "P(beats the mean)", "wins", "ties", "losses"):
        table.add_column(col)
    for r in report.ranking or []:
        table.add_row(r.rank_text, escape(r.system), fmt(r.strength, percent=False),
                      f"{round(r.p_vs_mean, 4) * 100:.1f}%", str(r.wins), str(r.ties), str(r.losses))
    return table


def failures_table(report: "CompareReport") -> "Table | None":
    from rich.table import Table

    rows = [(m.first, m.second, f) for m in report.matchups for f in m.failures]
    if not rows:
        return None
    table = Table(title="Pairs without a verdict in both orders (left out of the figures)", title_justify="left")
    for col in ("first", "second", "prompt", "reason"):
        table.add_column(col, overflow="fold")
    for first, second, f in rows:
        table.add_row(escape(first), escape(second), escape(f["item"]), escape(f["reason"][:300]))
    return table


def dropped_table(report: "CompareReport") -> "Table | None":
    from rich.table import Table

    dropped = report.dropped
    if not dropped:
        return None
    table = Table(title=f"{len(dropped)} prompt(s) not every system answered: left out of the matchups with the "
                        "systems that did not answer them", title_justify="left")
    for col in ("prompt", "answered by", "not answered by", "left out of"):
        table.add_column(col, overflow="fold")
    for d in dropped:
        where = "every matchup" if not len(d.answered_by) > 1 else f"{d.left_out_of} matchup(s)"
        table.add_row(escape(d.prompt), escape(", ".join(d.answered_by)), escape(", ".join(d.missing_from)),
                      where)
    return table


def print_position(p: dict[str, Any], what: str = "") -> None:
    """A position figures' JSON (``PositionStats.to_json()``) as one line."""
    console.print(escape(
        f"position flips{what}: {p['flips']} of {p['pairs']} pairs judged both ways ({fmt(p['flip_rate'])}); "
        f"the answer shown first won {fmt(p['first_position_share'])} of {p['decisive_verdicts']} decisive "
        "verdicts (50% without position bias)"), highlight=False)


def print_report(report: "CompareReport") -> None:
    systems = ", ".join(f"{s.name} ({s.answers} answers, {s.source})" for s in report.systems)
    console.print(escape(f"judge {report.judge}, template {report.template} ({report.template_hash}); "
                         f"systems: {systems}; every pair judged in both orders, a verdict that changes with "
                         f"the order counted as a tie; {report.resamples} bootstrap resamples"),
                  highlight=False)
    console.print(matchups_table(report))
    print_position(report.position.to_json(), " over every pair")
    if report.ranking:
        console.print(ranking_table(report))
        if report.order_note:
            console.print(f"[yellow]{escape(report.order_note)}[/]", highlight=False)
    for table in (dropped_table(report), failures_table(report)):
        if table is not None:
            console.print(table)
    if report.caveat:
        console.print(f"[yellow]{escape(report.caveat)}[/]", highlight=False)


def register(app: typer.Typer) -> None:
    @app.command("compare")
    @handle_errors
    def compare_cmd(
        answers: Optional[list[str]] = typer.Argument(None, metavar="[NAME=]ANSWERS...",
                                                      help="Each system's answers: a JSONL file (id, prompt, answer, "
                                                      "model), a session file or a folder of sessions; NAME= "
                                                      "names the system (default: the file's name)."),
        prompt: Optional[str] = typer.Option(None, "--prompt", help="Compare two answers to this prompt instead "
                                             "(with --answer twice)."),
        answer: Optional[list[str]] = typer.Option(None, "--answer", help="An answer to --prompt (twice)."),
        judge: Optional[str] = typer.Option(None, "--judge", help="Judge model (default: JURIST_JUDGE, else the "
                                            "offline local/minilm, which prefers the answer more relevant to the "
                                            "prompt)."),
        criteria: Optional[str] = typer.Option(None, "--criteria", help="What makes an answer better (default: "
                                               "helpful, accurate, complete, nothing false or unsafe)."),
        template: Optional[Path] = typer.Option(None, "--template", help="Pairwise judge template file "
                                                "({criteria}, {question}, {answer_a}, {answer_b})."),
        config: Optional[str] = ConfigOpt,
        no_cache: bool = NoCacheOpt,
        parallel: int = typer.Option(4, "--parallel", min=1, help="Pairs judged at once."),
        resamples: int = ResamplesOpt,
        seed: int = SeedOpt,
        as_json: bool = JsonOpt,
        output: Optional[Path] = OutputOpt,
        db: Optional[str] = DbOpt,
    ) -> None:
        """Compare systems' answers pairwise: each pair judged in both orders; win rates, position flips,
        a Bradley–Terry ranking of three or more systems."""
        import asyncio

        from jurist.analysis.answers import answer_sets, inline_answers
        from jurist.errors import InputError
        from jurist.extras import require_extra

        require_extra("analysis", "jurist compare")
        if prompt is not None:
            if answers:
                raise InputError("give answer files or --prompt with two --answer, not both")
            systems = inline_answers(prompt, answer or [])
        elif answer:
            raise InputError("--answer needs --prompt")
        else:
            systems = answer_sets(answers or [])
        settings = load_settings(config, db=db, cache=False if no_cache else None)
        result = asyncio.run(_run(settings, systems, judge, template, criteria, parallel, resamples, seed))
        show_report(result.to_json(), lambda _: print_report(result), as_json=as_json, output=output)
        if result.judged == 0:
            err_console.print("no pair got a verdict in both orders; see the reasons above (or in the report)",
                              highlight=False)
            raise typer.Exit(EXIT_FAILURES)
        raise typer.Exit(EXIT_OK)


async def _run(settings: Any, systems: Any, judge: str | None, template: Path | None, criteria: str | None,
               parallel: int, resamples: int, seed: int) -> "CompareReport":
    import asyncio

    from jurist.analysis.pairwise import compare
    from jurist.runtime import Runtime

    runtime = await asyncio.to_thread(Runtime, settings)
    done = 0
    try:
        with waiting("judging the pairs in both orders") as status:
            def progress(_: Any) -> None:
                nonlocal done
                done += 1
                status.update(f"judging the pairs in both orders: {done} pairs judged")

            return await compare(systems, runtime, judge=judge, template=template, criteria=criteria,
                                 parallel=parallel, resamples=resamples, seed=seed, on_progress=progress)
    finally:
        await runtime.aclose()
