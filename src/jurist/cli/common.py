"""What every command shares: settings, the console, error handling, spinners.

Command modules import only this, typer and the standard library at the top;
the rest of jurist (settings, the store, the server, the models) is imported
inside the command that runs, so ``jurist --help`` stays fast.
"""

from __future__ import annotations

import functools
import re
import sys
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, ParamSpec, TypeVar

import typer
from rich.console import Console, ConsoleOptions, RenderableType
from rich.markup import escape
from rich.segment import Segment
from typer.core import TyperGroup

from jurist.errors import JuristError, ModelError, StoreError, UsageError

if TYPE_CHECKING:  # pragma: no cover
    from pathlib import Path

    from rich.status import Status
    from rich.text import Text

    from jurist.config import Settings

# What a terminal would act on rather than show: escape sequences (CSI: ESC [ or 0x9B, parameters, a final
# byte; OSC, DCS, SOS, PM and APC strings, ESC ] ... BEL or ST, an OSC 8 link among them; any other ESC x),
# and the control characters left (C0 but tab and line feed, DEL, C1; a carriage return too).
_ESCAPE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d-\x9f])(?:[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c))?"
    r"|\x1b[ -~]?"
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with every terminal escape sequence (whole) and control character removed; line
    feeds and tabs stay. What a judge, a file or a user wrote is printed, never acted on."""
    return _ESCAPE.sub("", text) if _ESCAPE.search(text) else text


class SafeConsole(Console):
    """A console that prints text it is given without the escapes and control characters in it
    (:func:`printable`): a judge's reasoning holding ``ESC]0;...`` or ``ESC[2J`` shows as text, it
    does not retitle or clear the terminal. Every string becomes text through :meth:`render_str`
    (printed strings, table cells, titles), and every segment it renders is checked again (text
    built elsewhere: a progress bar's fields); rich's own cursor and colour codes are kept."""

    def render_str(self, text: str, **kwargs: Any) -> "Text":
        return super().render_str(printable(text), **kwargs)

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            if segment.control or not _ESCAPE.search(segment.text):
                yield segment
            else:
                yield Segment(printable(segment.text), segment.style, segment.control)


def json_text(data: object, **kwargs: Any) -> str:
    """``data`` as JSON with its text readable (not ASCII-escaped), but the control characters JSON
    leaves as they are (DEL, C1) escaped too, so a terminal shows the JSON and acts on nothing."""
    import json

    return re.sub(r"[\x7f-\x9f]", lambda m: f"\\u{ord(m.group()):04x}",
                  json.dumps(data, ensure_ascii=False, **kwargs))


console = SafeConsole()
err_console = SafeConsole(stderr=True)

P = ParamSpec("P")
R = TypeVar("R")
Report = TypeVar("Report", bound=Mapping[str, object])  # a report's JSON

EXIT_OK, EXIT_FAILURES, EXIT_BAD_INPUT = 0, 1, 2


LOCAL_JUDGE = "local/minilm"  # jurist.models.registry.LOCAL_JUDGE, named here without importing the registry
LOADING_LOCAL = f"loading the offline judge {LOCAL_JUDGE}"


# The value types as help names them (click's names), for a typer that writes ``<str>``, ``<bool>``.
TYPE_NAMES = {"str": "TEXT", "int": "INTEGER", "float": "FLOAT", "bool": "BOOLEAN", "path": "PATH",
              "file": "FILE", "dir": "DIRECTORY", "int range": "INTEGER", "float range": "FLOAT"}


def help_metavar(param: Any, ctx: Any) -> str | None:
    """How ``--help`` names an option's value: nothing for a flag, TEXT, INTEGER, PATH,
    [a|b] for choices. None: leave it to typer (an argument, a metavar given, or a
    typer that already names types so)."""
    if getattr(param, "param_type_name", None) != "option" or param.metavar is not None:
        return None
    if getattr(param, "is_flag", False):
        return ""
    display_type = getattr(param, "display_type", None)
    if display_type is None:
        return None
    label = str(display_type(ctx)).removeprefix("<").removesuffix(">")
    listed = label.startswith("list[") and label.endswith("]")
    if listed:
        label = label[5:-1]
    if param.type_descriptor.is_choice:
        return f"[{label}]"
    return TYPE_NAMES.get(label, label.upper())


class CommandGroup(TyperGroup):
    """The ``jurist`` group: its commands' ``--help`` names value types (TEXT, INTEGER,
    PATH), shows flags as flags, not ``<bool>``, and never cuts an option's name
    (:mod:`jurist.cli.help_layout`)."""

    def get_params(self, ctx: Any) -> Any:
        return _name_types(super().get_params(ctx), ctx)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        from jurist.cli.help_layout import fit_help

        command = super().get_command(ctx, cmd_name)
        if command is not None:
            _name_types(command.get_params(ctx), ctx)
            fit_help(command, ctx)  # click's plain layout where rich would cut an option's name
        return command


def _name_types(params: Any, ctx: Any) -> Any:
    for param in params:
        metavar = help_metavar(param, ctx)
        if metavar is not None:
            param.metavar = metavar
    return params


def stdout_is_terminal() -> bool:
    """Whether stdout is a terminal (a person reading) rather than a pipe or a file (a program).
    Unlike rich's ``is_terminal``, FORCE_COLOR does not make a pipe a terminal."""
    isatty = getattr(sys.stdout, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # closed
        return False


DB_HELP = ("The store: a database URL (sqlite:///path.db, postgresql+psycopg://...) or a SQLite file's path "
           "(default: JURIST_DATABASE_URL, else jurist.db in JURIST_HOME, else in the user's data folder, "
           "~/.local/share/jurist on Linux).")
DbOpt = typer.Option(None, "--db", help=DB_HELP)
ConfigOpt = typer.Option(None, "--config", help="Settings file (default: ./jurist.yaml or JURIST_CONFIG).")
NoCacheOpt = typer.Option(False, "--no-cache", help="Always call the judge; do not answer from the call cache.")
# The report options of calibrate, compare and probe.
BOOTSTRAP_RESAMPLES = 2000  # jurist.analysis.agreement.BOOTSTRAP_RESAMPLES (a test keeps them equal; no scipy here)
ResamplesOpt = typer.Option(BOOTSTRAP_RESAMPLES, "--resamples", min=0,
                            help="Bootstrap resamples for the 95% intervals (0: none).")
JsonOpt = typer.Option(False, "--json", help="Print the report as JSON instead of tables.")
OutputOpt = typer.Option(None, "--output", "-o", help="Also write the report (JSON) here.")
SeedOpt = typer.Option(0, "--seed", help="Seed of the bootstrap.")


def show_report(data: Report, print_tables: Callable[[Report], None], *, as_json: bool,
                output: "Path | None") -> None:
    """A command's report: written to ``output`` (JSON) if given, then printed as JSON or as tables."""
    import json

    from jurist.jsonfiles import write_json

    if output:
        output.parent.mkdir(parents=True, exist_ok=True)
        write_json(output, data)
    if as_json:
        console.print_json(json.dumps(data))
        return
    print_tables(data)
    if output:
        console.print(escape(f"report written to {output}"), highlight=False)
OLD_STORE = ".jurist/jurist.db"  # where earlier versions kept the store: in the current folder


def load_settings(config: str | None = None, *, db: str | None = None, **explicit: Any) -> "Settings":
    """Settings from the flags given (``db``: the ``--db`` option, a URL or a SQLite file's path)."""
    from jurist.config import Settings, database_url_of

    if db is not None:
        explicit["database_url"] = database_url_of(db)
    return Settings.load(config, **explicit)


def print_store(settings: "Settings", out: Console | None = None) -> None:
    """Say which store the command uses (password hidden); and when a store of an earlier version
    sits in the current folder unused, how to use it."""
    from pathlib import Path

    from jurist.config import shown_url

    out = out or console
    out.print(escape(f"store: {shown_url(settings.database)}"), highlight=False, soft_wrap=True)
    old = Path(OLD_STORE).absolute()
    if old.is_file() and settings.database != f"sqlite:///{old}":
        out.print(escape(f"note: {OLD_STORE} here is not the store in use; to use it: --db {OLD_STORE}"),
                  style="yellow", highlight=False, soft_wrap=True)


def require_local_judge(ref: str) -> None:
    """Before any work: when ``ref`` is the offline judge and its extra is not
    installed, stop with the message that names it (ConfigError)."""
    if ref == LOCAL_JUDGE:
        from jurist.models.local import require_installed

        require_installed()


@contextmanager
def local_load_notice(show: Callable[[str | None], None]) -> Iterator[None]:
    """While inside, a load of the local judge's model calls ``show(LOADING_LOCAL)``
    before and ``show(None)`` after (the command's spinner or progress bar says so)."""
    from jurist.models import local

    @contextmanager
    def notice() -> Iterator[None]:
        show(LOADING_LOCAL)
        try:
            yield
        finally:
            show(None)

    previous = local.set_load_notice(notice)
    try:
        yield
    finally:
        local.set_load_notice(previous)


@contextmanager
def waiting(what: str) -> Iterator["Status"]:
    """A spinner on stderr saying what the command waits for; a load of the local
    judge's model on the way shows as such. Output printed meanwhile goes above it."""
    with err_console.status(what, spinner="dots") as status:
        with local_load_notice(lambda text: status.update(text or what)):
            yield status


def handle_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn jurist's typed errors into a clear message and an exit code."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except UsageError as exc:
            err_console.print(f"[bold red]error:[/] {escape(str(exc))}", markup=True, highlight=False)
            raise typer.Exit(EXIT_BAD_INPUT) from None
        except (ModelError, StoreError, JuristError) as exc:
            err_console.print(f"[bold red]error:[/] {type(exc).__name__}: {escape(str(exc))}", markup=True,
                              highlight=False)
            raise typer.Exit(EXIT_FAILURES) from None
        except KeyboardInterrupt:
            err_console.print("interrupted; finished results are kept, rerun to resume")
            raise typer.Exit(130) from None

    return wrapper


def print_access(settings: "Settings") -> None:
    """Say who may use the server: the token, the host names it answers to."""
    from jurist.server.auth import allowed_hosts

    hosts = ", ".join(sorted(allowed_hosts(settings)))
    token = ("writes, the proxy and the tutor socket need the API token" if settings.api_token
             else "no API token: loopback only, writes open to this machine")
    console.print(escape(f"access: {token}; answering to host names {hosts}"), highlight=False)
