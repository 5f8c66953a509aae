"""`jurist export`: a research evaluation record out of the store, as the note's folder."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from jurist.cli.common import ConfigOpt, DbOpt, console, handle_errors, load_settings

DEFAULT_EXPORT_DIR = Path("jurist-export")


def register(app: typer.Typer) -> None:
    """Add the research commands (``export``) to the ``jurist`` app."""

    @app.command("export")
    @handle_errors
    def export_cmd(
        log_id: str = typer.Argument(..., help="The logId of a research evaluation."),
        output_dir: Path = typer.Option(DEFAULT_EXPORT_DIR, "--output-dir", help="Where the {logId}/ folder goes (default: ./jurist-export)."),
        config: Optional[str] = ConfigOpt,
        db: Optional[str] = DbOpt,
    ) -> None:
        """Write a research evaluation's record: evaluation.json, plan_attempts/, evaluator_responses/."""
        from jurist.research.export import export_record
        from jurist.store import Store

        settings = load_settings(config, db=db)
        store = Store(settings.database)
        try:
            folder = export_record(store, log_id, output_dir)
        finally:
            store.close()
        files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.json"))
        console.print(escape(f"exported research evaluation {log_id} to {folder} ({len(files)} files)"),
                      highlight=False)
        for name in files:
            console.print(escape(f"  {name}"), highlight=False)
