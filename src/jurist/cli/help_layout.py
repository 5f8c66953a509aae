"""``--help`` that never cuts an option's name.

typer draws a command's options as a rich table: the long names, the short ones,
the negative forms (``--no-...``), the value type, the help. When the terminal is
too narrow for all of them, rich shrinks the widest columns first and, once the
help column is no wider than the names, the names too, to ``--max-concurre…``. A
command whose table would come to that gets click's plain layout instead (each
option on its own line, the help wrapped beside or below it), which never cuts a
name; where the table fits, the rich panels stay.
"""

from __future__ import annotations

import os
import shutil
from typing import Any, Callable

PANEL_EDGES = 4  # the panel's border and padding, left and right
HELP_MIN = 30  # the help column's least width beside the names, in characters


def help_width() -> int:
    """The width typer's console draws help at: TERMINAL_WIDTH, else COLUMNS or the terminal's."""
    forced = os.environ.get("TERMINAL_WIDTH", "")
    if forced.isdigit():
        return int(forced)
    return shutil.get_terminal_size().columns


def _types_text(param: Any, ctx: Any) -> str:
    """The type column's text of ``param``, as typer writes it (``INTEGER [x>=1]``)."""
    display = getattr(param, "display_type_rich", None)
    shown = str(display(ctx=ctx) or "") if callable(display) else ""
    ranged = getattr(param, "_get_number_range_help_str", None)
    range_text = ranged() if callable(ranged) else ""
    return f"{shown} [{range_text}]" if range_text else shown


def _table_fits(params: list[Any], ctx: Any, width: int) -> bool:
    """Whether typer's table of ``params`` fits ``width`` with every name whole: the names' columns
    at full width, the type column up to the widest name column, the help no narrower than either."""
    def widest(pick: Callable[[Any], list[str]]) -> int:
        return max(len(",".join(pick(p))) for p in params)

    def short(p: Any) -> list[str]:
        if p.param_type_name == "argument":
            return [str(getattr(p, "display_name_raw", None) or (p.name or "").upper())]
        return [o for o in p.opts if "--" not in o]

    columns = [widest(lambda p: [o for o in p.opts if "--" in o]), widest(short),
               widest(lambda p: [o for o in p.secondary_opts if "--" in o]),
               widest(lambda p: [o for o in p.secondary_opts if "--" not in o])]
    if any(p.required for p in params):
        columns.insert(0, 1)
    widest_name = max(columns)
    types = min(max(len(_types_text(p, ctx)) for p in params), widest_name)
    cells = [*columns, types, max(widest_name, HELP_MIN)]
    padding = 2 * len(cells) - 2  # one space each side of every cell but the table's edges
    return sum(cells) + padding <= width - PANEL_EDGES


def rich_help_fits(command: Any, ctx: Any, width: int | None = None) -> bool:
    """Whether ``command``'s rich help (one table per panel: arguments, options) shows every
    option's full name at ``width`` (default: :func:`help_width`)."""
    width = help_width() if width is None else width
    params = [p for p in command.get_params(ctx) if not getattr(p, "hidden", False)]
    panels = [[p for p in params if p.param_type_name == kind] for kind in ("argument", "option")]
    return all(_table_fits(panel, ctx, width) for panel in panels if panel)


def fit_help(command: Any, ctx: Any) -> None:
    """Give ``command`` click's plain help layout where its rich table would cut an option's name."""
    if getattr(command, "rich_markup_mode", None) is not None and not rich_help_fits(command, ctx):
        command.rich_markup_mode = None
