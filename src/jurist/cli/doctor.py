"""`jurist doctor`: check an endpoint before a long run."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import typer
from rich.markup import escape

from jurist.cli.common import EXIT_FAILURES, EXIT_OK, console, handle_errors, load_settings
from jurist.cli.evaluate import ConfigOpt, ScoreMode

if TYPE_CHECKING:  # pragma: no cover
    from jurist.models.doctor import Diagnosis


def print_diagnosis(diagnosis: "Diagnosis") -> None:
    """The checks as a table, then the fixes, then what jurist will use."""
    from rich.table import Table

    from jurist.models.doctor import FAIL, OK, SKIP, WARN

    style = {OK: "green", WARN: "yellow", FAIL: "bold red", SKIP: "dim"}
    table = Table(title=f"jurist doctor: {escape(diagnosis.model or 'no model')}", title_justify="left")
    for column in ("check", "status", "detail"):
        table.add_column(column, overflow="fold")
    for check in diagnosis.checks:
        table.add_row(check.name, f"[{style[check.status]}]{check.status}[/]", escape(check.detail))
    console.print(table)
    fixes = [c for c in diagnosis.checks if c.fix and c.status in (FAIL, WARN)]
    if fixes:
        console.print("to fix:")
        for check in fixes:
            console.print(f"  {check.name}: {escape(check.fix or '')}", highlight=False)
    if diagnosis.uses:
        console.print("jurist will use:")
        for name, value in diagnosis.uses.items():
            console.print(f"  {name}: {escape(value)}", highlight=False)
    verdict = "[green]ready[/]" if diagnosis.ok else "[bold red]not ready[/]"
    console.print(f"{verdict}: {sum(c.status == OK for c in diagnosis.checks)} ok, "
                  f"{sum(c.status == WARN for c in diagnosis.checks)} warning(s), "
                  f"{sum(c.status == FAIL for c in diagnosis.checks)} failed")


def register(app: typer.Typer) -> None:
    @app.command("doctor")
    @handle_errors
    def doctor_cmd(
        model: Optional[str] = typer.Argument(None, help="provider/model or an alias (default: the configured judge)."),
        config: Optional[str] = ConfigOpt,
        timeout: Optional[float] = typer.Option(None, "--timeout", help="Seconds per check's request."),
        score_mode: Optional[ScoreMode] = typer.Option(
            None, "--score-mode", help="Check for this score mode (default: score_mode in jurist.yaml, else plain)."),
    ) -> None:
        """Check a judge's endpoint before a long run: reachable, model, key, structured output,
        streaming, logprobs, latency; print what jurist will use and how to fix what fails.
        Exit 0 when nothing failed, 1 otherwise."""
        import asyncio

        from jurist.models.doctor import diagnose

        settings = load_settings(config)
        diagnosis = asyncio.run(diagnose(settings, model, timeout=timeout,
                                         score_mode=score_mode.value if score_mode else None))
        print_diagnosis(diagnosis)
        raise typer.Exit(EXIT_OK if diagnosis.ok else EXIT_FAILURES)


__all__ = ["print_diagnosis", "register"]
