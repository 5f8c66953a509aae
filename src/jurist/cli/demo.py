"""`jurist demo`: the main job end to end, offline, on the bundled examples."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from jurist.cli.common import (ConfigOpt, DbOpt, LOCAL_JUDGE, console, handle_errors, load_settings,
                               require_local_judge, waiting)
from jurist.errors import UNDECIDED


def register(app: typer.Typer) -> None:
    @app.command("demo")
    @handle_errors
    def demo_cmd(
        output_dir: Path = typer.Option(Path("jurist-demo"), "--output-dir", help="Where results go."),
        judge: Optional[str] = typer.Option(
            None, "--judge",
            help=f"Judge of every part: rubrics, research panels, checklist, gate (default: the offline "
                 f"{LOCAL_JUDGE}, no LLM needed)."
        ),
        config: Optional[str] = ConfigOpt,
        db: Optional[str] = DbOpt,
    ) -> None:
        """Run the bundled examples: rubric scoring, a research pipeline, a checklist tutor, a response gate.

        Offline by default; with --judge, every part is judged by that model (the tutor and the generators
        stay the scripted, offline ones)."""
        import asyncio

        from rich.markup import escape
        from rich.panel import Panel

        from jurist.cli.evaluate import print_batch_report, run_batch_with_progress
        from jurist.config import shown_url
        from jurist.demo import examples_dir
        from jurist.demo.checklist import run_checklist_demo
        from jurist.demo.gate import run_gate_demo
        from jurist.demo.research import run_research_demo
        from jurist.models.registry import resolve_ref
        from jurist.rubrics import load_rubrics
        from jurist.store import Store

        settings = load_settings(config, db=db)
        ex = examples_dir()
        rubric_set = load_rubrics(ex / "rubrics.json", settings.score_scale)
        judge_ref = resolve_ref(judge, settings) if judge else LOCAL_JUDGE
        require_local_judge(judge_ref)
        console.print(Panel.fit(
            escape(f"Rubric scoring of {ex / 'sessions'}\nagainst {ex / 'rubrics.json'} with judge ")
            + f"[bold]{escape(judge_ref)}[/]",
            title="jurist demo",
        ))
        report = run_batch_with_progress(
            rubric_set, ex / "sessions", output_dir / "rubrics", parallel=4, force=True, judge=judge_ref,
            settings=settings,
        )
        print_batch_report(report)
        store = Store(settings.database)
        try:
            calls = store.calls(limit=None, purpose="rubric_judge")
        finally:
            store.close()
        console.print(escape(
            f"results in {output_dir / 'rubrics'}; {len(calls)} judge calls on record in "
            f"{shown_url(settings.database)} "
            "(see them with `jurist logs`)"
        ), highlight=False)
        offline = ", offline" if judge_ref == LOCAL_JUDGE else ""
        console.print(Panel.fit(f"A research pipeline judged stage by stage{offline}", title="jurist demo: research"))
        with waiting("running the research pipeline and its judges"):
            research_code = asyncio.run(run_research_demo(console, settings, output_dir / "research", judge_ref))
        console.print(Panel.fit(f"A recall tutor that checks the learner's checklist on every message{offline}",
                                title="jurist demo: checklist"))
        with waiting("tutoring and judging the learner's messages"):
            checklist_code = asyncio.run(run_checklist_demo(console, settings, output_dir / "checklist", judge_ref))
        console.print(Panel.fit("Answers judged before the user gets them, regenerated when incomplete",
                                title="jurist demo: response gate"))
        with waiting("answering and judging through the gate"):
            gate_code = asyncio.run(run_gate_demo(console, settings, output_dir / "gate", judge_ref))
        serve = "jurist serve" + (f" --db {db}" if db else "")
        console.print(Panel.fit(
            escape(f"Everything above is stored in {shown_url(settings.database)}.\n")
            + "See it in the dashboard: run [bold]" + escape(serve) + "[/] (the same store), "
            "then open [bold]http://127.0.0.1:8000/evaluation[/]",
            title="jurist demo: dashboard",
        ))
        # The offline judge's "uncertain" is a verdict the demo shows (it says why), not a fault of the run.
        undecided = sum(n for reason, n in report.failure_reasons.items() if reason.startswith(UNDECIDED))
        rubric_code = 0 if report.exit_code == 1 and undecided == report.evaluations_failed else report.exit_code
        raise typer.Exit(max(rubric_code, research_code, checklist_code, gate_code))
