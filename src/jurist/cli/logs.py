"""`jurist logs`: every recorded LLM call."""

from __future__ import annotations

from textwrap import shorten
from typing import TYPE_CHECKING, Any, Optional

import typer
from rich.markup import escape

from jurist.cli.common import (ConfigOpt, DbOpt, console, err_console, handle_errors, json_text, load_settings,
                               print_store)

if TYPE_CHECKING:  # pragma: no cover
    from rich.table import Table


def _row_json(row: dict[str, Any]) -> dict[str, Any]:
    out = dict(row)
    out["created_at"] = row["created_at"].isoformat() if row.get("created_at") else None
    return out


def _tokens(row: dict[str, Any]) -> str:
    """Tokens in/out; "n/a" for a stream whose endpoint reported no usage."""
    if row.get("usage_known") is False:
        return "n/a"
    return f"{row['input_tokens']}/{row['output_tokens']}"


def _cost(row: dict[str, Any]) -> str:
    """A call's cost in dollars; "unknown" when its price is not known (``--json``'s cost_note
    says why); "—" for a call recorded before jurist kept costs."""
    from jurist.models.cost import format_usd

    if row.get("cost_usd") is None:
        return "unknown" if row.get("cost_note") else "—"
    return format_usd(row["cost_usd"])


def cost_total(rows: list[dict[str, Any]]) -> str:
    """The total cost of ``rows``: ``$0.0123``, and for how many calls it is unknown (not counted)."""
    from jurist.models.cost import format_usd

    total = sum(r["cost_usd"] for r in rows if r.get("cost_usd") is not None)
    unknown = sum(1 for r in rows if r.get("cost_usd") is None)
    line = f"cost of these {len(rows)} calls: {format_usd(total)}"
    if unknown:
        line += f" (unknown for {unknown} call{'s' if unknown != 1 else ''}: not included)"
    return line


WIDE = 100  # from this width on: full dates and a trace column
ERROR_CHARS = 200  # the most of a failed call's error the table shows (all of it: --json)


def calls_table(rows: list[dict[str, Any]], width: int) -> "Table":
    """The calls as a table that reads at 80 columns: every column but one holds short
    values and never wraps; the "call" column (purpose, model, a failure's error) wraps at
    spaces; each call's cost is under its tokens. From WIDE columns on, full dates and the
    trace ids."""
    from rich import box
    from rich.table import Table

    wide = width >= WIDE
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0), leading=1)
    table.add_column("time", no_wrap=True)
    table.add_column("call", overflow="fold")
    table.add_column("tokens in/out\ncost", no_wrap=True, justify="right")  # the cost under the tokens it is of
    table.add_column("latency", no_wrap=True, justify="right")
    table.add_column("status", no_wrap=True)
    if wide:
        table.add_column("trace", no_wrap=True)
    for r in rows:
        ok = r["status"] == "ok"
        call = escape(r["purpose"]) + f"\n[dim]{escape(r['model'])}[/]"
        if r.get("error"):
            call += f"\n[red]{escape(shorten(r['error'], ERROR_CHARS, placeholder=' …'))}[/]"
        status = f"[{'green' if ok else 'red'}]{escape(r['status'])}[/]"
        if r["attempts"] > 1:
            status += f"\n{r['attempts']} attempts"
        if r["cached"]:
            status += "\ncached"
        when = r["created_at"].strftime("%Y-%m-%d %H:%M:%S" if wide else "%m-%d %H:%M")
        cells = [when, call, f"{_tokens(r)}\n{_cost(r)}", _latency(r["latency_ms"]), status]
        if wide:
            cells.append(escape((r["trace_id"] or "")[:12]))
        table.add_row(*cells)
    return table


def _latency(ms: float) -> str:
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


def check_status(status: str | None) -> None:
    """A UsageError (exit 2) naming the accepted values unless ``status`` is one of them (or None)."""
    from jurist.errors import UsageError
    from jurist.store.queries import unknown_call_status

    problem = None if status is None else unknown_call_status(status)
    if problem is not None:
        raise UsageError(f"--status {problem}")


def register(app: typer.Typer) -> None:
    @app.command("logs")
    @handle_errors
    def logs_cmd(
        n: int = typer.Option(20, "-n", "--limit", min=1, help="How many calls, newest first."),
        as_json: bool = typer.Option(False, "--json", help="One JSON object per line, with messages and response."),
        purpose: Optional[str] = typer.Option(None, "--purpose", help="Only calls with this purpose tag."),
        status: Optional[str] = typer.Option(None, "--status", help="Only calls with this status: ok, error (the "
                                             "model call failed), parse_error (its reply could not be read), or "
                                             "failed (either failure)."),
        trace: Optional[str] = typer.Option(None, "--trace", help="Only calls of this trace id."),
        config: Optional[str] = ConfigOpt,
        db: Optional[str] = DbOpt,
    ) -> None:
        """List recorded judge and model calls: purpose, model, tokens, latency, cost, status, and why a call failed.

        The cost is in dollars from genai-prices; "unknown" when the model's price is not known
        (--json's cost_note says why), and the total of the calls listed says for how many."""
        from jurist.store import Store

        check_status(status)
        settings = load_settings(config, db=db)
        print_store(settings, err_console if as_json else console)  # stdout stays JSON lines with --json
        store = Store(settings.database)
        try:
            rows = store.calls(limit=n, purpose=purpose, status=status, trace_id=trace)
        finally:
            store.close()
        if status not in (None, "ok", "failed"):  # one kind of failure
            err_console.print(escape(f"only calls with status {status}; --status failed shows every failed call"),
                              highlight=False, soft_wrap=True)
        if as_json:
            for row in rows:
                typer.echo(json_text(_row_json(row), default=str))
            return
        if not rows:
            filtered = " matching these filters" if purpose or status or trace else ""
            console.print(escape(f"no calls{filtered}"), highlight=False, soft_wrap=True)
            return
        console.print(escape(f"last {len(rows)} calls"), highlight=False, soft_wrap=True)
        console.print(calls_table(rows, console.width))
        console.print(escape(cost_total(rows)), highlight=False, soft_wrap=True)
