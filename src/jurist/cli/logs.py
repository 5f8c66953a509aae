"""`jurist logs`: every recorded LLM call."""

from __future__ import annotations

import json
from typing import Any, Optional

import typer
from rich.markup import escape

from jurist.cli.common import console, handle_errors, load_settings


def _row_json(row: dict[str, Any]) -> dict[str, Any]:
    out = dict(row)
    out["created_at"] = row["created_at"].isoformat() if row.get("created_at") else None
    return out


def _tokens(row: dict[str, Any]) -> str:
    """Tokens in/out; "n/a" for a stream whose endpoint reported no usage."""
    if (row.get("params") or {}).get("usage") == "not reported":
        return "n/a"
    return f"{row['input_tokens']}/{row['output_tokens']}"


def register(app: typer.Typer) -> None:
    @app.command("logs")
    @handle_errors
    def logs_cmd(
        n: int = typer.Option(20, "-n", "--limit", min=1, help="How many calls, newest first."),
        as_json: bool = typer.Option(False, "--json", help="One JSON object per line, with messages and response."),
        purpose: Optional[str] = typer.Option(None, "--purpose", help="Only calls with this purpose tag."),
        status: Optional[str] = typer.Option(None, "--status", help="Only calls with this status (ok, error, parse_error)."),
        trace: Optional[str] = typer.Option(None, "--trace", help="Only calls of this trace id."),
        config: Optional[str] = typer.Option(None, "--config", help="Settings file."),
    ) -> None:
        """List recorded judge and model calls: purpose, model, tokens, latency, status."""
        from rich.table import Table

        from jurist.store import Store

        settings = load_settings(config)
        store = Store(settings.database)
        try:
            rows = store.calls(limit=n, purpose=purpose, status=status, trace_id=trace)
        finally:
            store.close()
        if as_json:
            for row in rows:
                typer.echo(json.dumps(_row_json(row), ensure_ascii=False, default=str))
            return
        table = Table(title=escape(f"last {len(rows)} calls ({settings.database})"), title_justify="left")
        for col in ("time", "purpose", "model", "tokens in/out", "latency", "attempts", "status", "trace"):
            table.add_column(col, overflow="fold")
        for r in rows:
            status_txt = r["status"] + (" (cached)" if r["cached"] else "")
            style = "green" if r["status"] == "ok" else "red"
            table.add_row(
                r["created_at"].strftime("%Y-%m-%d %H:%M:%S"), escape(r["purpose"]), escape(r["model"]),
                _tokens(r), f"{r['latency_ms']:.0f} ms", str(r["attempts"]),
                f"[{style}]{escape(status_txt)}[/]", escape((r["trace_id"] or "")[:12]),
            )
        console.print(table)
