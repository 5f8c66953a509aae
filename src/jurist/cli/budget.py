"""What the commands that make many calls share for cost: ``--max-cost``, ``--allow-unknown-cost``
and ``--dry-run``, the check of prices before a budgeted run, and the lines that show cost."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Mapping

import typer
from rich.markup import escape

from jurist.cli.common import console

if TYPE_CHECKING:  # pragma: no cover
    from jurist.config import Settings
    from jurist.models.cost import DryRun

MaxCostOpt = typer.Option(
    None, "--max-cost", min=0.0, metavar="USD",
    help="Stop cleanly once the recorded cost of this run's calls reaches USD dollars (prices from genai-prices): "
         "no new call starts, what was scored is kept, a rerun with a larger budget resumes (exit code 3).")
AllowUnknownCostOpt = typer.Option(
    False, "--allow-unknown-cost",
    help="With --max-cost: run even when a model's price is unknown (a local server, a custom base_url, a model "
         "genai-prices lacks); the budget then counts only the calls whose cost is known.")
DryRunOpt = typer.Option(
    False, "--dry-run",
    help="Make no call: print the calls this run would make, their tokens (the model's tokenizer where one is "
         "available offline, else an estimate that says so) and their most cost, then exit.")


def unknown_prices(refs: Iterable[str], settings: "Settings") -> dict[str, str]:
    """The models among ``refs`` (references or aliases) whose calls get no known cost, each with
    why (:func:`jurist.models.cost.is_priced` at the endpoint the reference resolves to)."""
    import asyncio

    from jurist.models.cost import is_free, is_priced
    from jurist.models.registry import build_adapter, resolve_ref

    out: dict[str, str] = {}
    for ref in dict.fromkeys(refs):
        full = resolve_ref(ref, settings)
        if is_free(full):
            continue
        adapter = build_adapter(full, settings)
        try:
            price = is_priced(adapter.name, adapter.endpoint)
        finally:
            asyncio.run(adapter.aclose())
        if not price.known:
            out[full] = price.note or "unknown"
    return out


def check_budget(max_cost: float | None, allow_unknown: bool, refs: Iterable[str], settings: "Settings") -> None:
    """Before a run with ``--max-cost``: a UsageError (exit 2) when a model's price is unknown,
    unless ``allow_unknown``; then a line on stderr says the budget counts known costs only."""
    from jurist.cli.common import err_console
    from jurist.errors import UsageError

    if max_cost is None:
        return
    unknown = unknown_prices(refs, settings)
    if not unknown:
        return
    why = "; ".join(f"{ref}: {note}" for ref, note in unknown.items())
    if not allow_unknown:
        raise UsageError(f"--max-cost cannot be kept: the cost of these calls is unknown ({why}). Pass "
                         "--allow-unknown-cost to run with a budget that counts only the calls whose cost is known, "
                         "or drop --max-cost")
    err_console.print(escape(f"the budget counts only known costs: {why}"), highlight=False, soft_wrap=True)


def cost_line(cost: Mapping[str, object] | None) -> str | None:
    """``cost $0.0123 (unknown for 2 calls)`` for a summary's cost block; None without one."""
    from jurist.models.cost import format_usd

    if not cost:
        return None
    usd = cost.get("cost_usd")
    unknown = cost.get("cost_unknown_calls") or 0
    line = f"cost of this run's {cost.get('calls', 0)} calls: {format_usd(usd if isinstance(usd, float) else None)}"
    if unknown:
        line += f" (unknown for {unknown} call{'s' if unknown != 1 else ''}: not included)"
    limit = cost.get("max_cost_usd")
    if isinstance(limit, (int, float)):
        line += f", budget {format_usd(float(limit))}"
    return line


def print_dry_run(dry: "DryRun", lead: str) -> None:
    """The calls a dry run counted, per model, and the totals after ``lead`` (what the run would
    do: ``3 sessions would be scored (1 already done)``)."""
    from rich.table import Table

    from jurist.models.cost import format_usd

    table = Table(title="expected calls (none made)", title_justify="left")
    for col in ("model", "calls", "from cache", "input tokens", "output tokens at most", "cost at most"):
        table.add_column(col, justify="left" if col == "model" else "right")
    notes: list[str] = []
    for e in dry.models.values():
        tokens = f"{e.input_tokens:,}" + (" (estimate)" if e.estimated else "")
        cost = format_usd(e.cost_usd) + (f" + {e.unknown} unknown" if e.unknown else "")
        table.add_row(escape(e.model), str(e.calls), str(e.from_cache), tokens, f"{e.max_output_tokens:,}", cost)
        notes += [f"{e.model}: {n}" for n in sorted(e.notes)]
        if e.estimated:
            notes.append(f"{e.model}: input tokens estimated at 4 characters a token (no tokenizer of this model "
                         "available offline)")
    console.print(table)
    unknown = f"; the cost of {dry.unknown} calls is unknown" if dry.unknown else ""
    console.print(escape(f"{lead}: {dry.calls} calls, at most {format_usd(dry.cost_usd)}{unknown}"), highlight=False)
    for note in notes:
        console.print(escape(f"  {note}"), highlight=False, soft_wrap=True)
    console.print("  not counted: retries, and the re-ask after a reply that cannot be read (each a call "
                  "more, when it happens)", highlight=False, soft_wrap=True)


__all__ = ["AllowUnknownCostOpt", "DryRunOpt", "MaxCostOpt", "check_budget", "cost_line", "print_dry_run",
           "unknown_prices"]
