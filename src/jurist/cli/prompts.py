"""`jurist prompts`: the prompt lab from the terminal (versions, the active one, A/B tests).

The same functions as the lab's API and pages (:mod:`jurist.analysis.prompts`,
:mod:`jurist.analysis.prompt_tests`), on the store every command uses.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Awaitable, Callable, Optional, TypeVar

import typer
from rich.markup import escape
from rich.table import Table

from jurist.cli.common import (CommandGroup, ConfigOpt, DbOpt, console, handle_errors, load_settings, printable,
                               stdout_is_terminal)

if TYPE_CHECKING:  # pragma: no cover
    from jurist.analysis.prompt_tests import PromptTest
    from jurist.store import Store

T = TypeVar("T")

app = typer.Typer(cls=CommandGroup, no_args_is_help=True, add_completion=False,
                  help="The prompt lab: every prompt jurist ships, your versions of it, which one is used, "
                       "and A/B tests between two versions (docs/analysis.md).")


def on_store(config: str | None, db: str | None, work: Callable[["Store"], Awaitable[T]]) -> T:
    """Run ``work`` on the store the settings name (opened, migrated, closed after)."""
    import asyncio

    from jurist.store import Store

    settings = load_settings(config, db=db)

    async def run() -> T:
        store = Store(settings.database)
        try:
            return await work(store)
        finally:
            store.close()

    return asyncio.run(run())


def read_text(path: str) -> str:
    """The text of ``path`` (``-``: standard input), at most the lab's limit."""
    from jurist.analysis.prompts import MAX_PROMPT_CHARS
    from jurist.errors import InputError

    try:
        if path == "-":
            text = sys.stdin.read(MAX_PROMPT_CHARS)
        else:
            with open(Path(path), encoding="utf-8") as f:
                text = f.read(MAX_PROMPT_CHARS)
    except OSError as exc:
        raise InputError(f"cannot read the prompt text: {exc.strerror}", file=path) from None
    except UnicodeDecodeError:
        raise InputError("the prompt text is not UTF-8", file=path) from None
    return text  # create_prompt_version refuses an empty text or one at the limit


def show_test(test: "PromptTest") -> None:
    state = "running" if test.running else f"ended: {test.ended_because}"
    ends = ", ".join(x for x in (f"{test.calls:,} calls per version" if test.calls else "",
                                 f"significance at {test.alpha:g}" if test.alpha else "") if x)
    console.print(escape(f"A/B test {test.id} of {test.prompt}: version {test.a} (A) against {test.b} (B), "
                         f"{test.share:.0%} of calls to B; ends at {ends}; {state}"), highlight=False)
    if test.calls_a is not None:
        console.print(f"calls since it started: A {test.calls_a:,}, B {test.calls_b or 0:,}", highlight=False)
    if test.calls_by_judge:
        console.print(escape("by judge: " + "; ".join(f"{j.judge_model} A {j.calls_a:,}, B {j.calls_b:,}"
                                                     for j in test.calls_by_judge)), highlight=False)
    if test.comparison is not None:
        console.print(escape(f"comparison: {test.comparison.verdict}"), highlight=False)
        pools = [f"{j.judge_model or 'not recorded'} (A {j.n_a}, B {j.n_b}{', compared' if j.compared else ''})"
                 for j in test.comparison.judges]
        if pools:
            console.print(escape("verdicts by judge: " + "; ".join(pools)), highlight=False)
    elif test.comparison_notice:
        console.print(escape(test.comparison_notice), style="yellow", highlight=False)


@app.command("list")
@handle_errors
def list_cmd(config: Optional[str] = ConfigOpt, db: Optional[str] = DbOpt) -> None:
    """Every prompt: its versions, the one in use, and a running A/B test (its id: jurist prompts tests)."""
    from jurist.analysis.prompt_tests import active_routes
    from jurist.analysis.prompts import PromptInfo, list_prompts
    from jurist.store import prompt_routes as q

    async def work(store: "Store") -> tuple[list[PromptInfo], dict[str, q.Route]]:
        return await list_prompts(store), await active_routes(store)

    prompts, routes = on_store(config, db, work)
    table = Table("prompt", "versions", "in use")
    for p in prompts:
        route = routes.get(p.name)
        if route is None:
            use = "1 (shipped)"
        elif isinstance(route, q.VersionRoute):
            use = str(route.version)
        else:
            use = f"A/B test: {route.a} vs {route.b}"
        table.add_row(escape(p.name), ", ".join(str(v.version) for v in p.versions), escape(use))
    console.print(table)


@app.command("show")
@handle_errors
def show_cmd(
    name: str = typer.Argument(..., help="The prompt's name (jurist prompts list)."),
    version: int = typer.Argument(1, min=1, help="Its version (1: the text jurist ships)."),
    config: Optional[str] = ConfigOpt,
    db: Optional[str] = DbOpt,
) -> None:
    """Print one version's text (nothing else, so it can be saved and edited)."""
    from jurist.analysis.prompts import prompt_version

    found = on_store(config, db, lambda store: prompt_version(store, name, version))
    sys.stdout.write(printable(found.text) if stdout_is_terminal() else found.text)  # a file gets it as stored


@app.command("add")
@handle_errors
def add_cmd(
    name: str = typer.Argument(..., help="The prompt's name (jurist prompts list)."),
    file: str = typer.Argument(..., help="The new text ('-': standard input); the same placeholders as version 1."),
    note: Optional[str] = typer.Option(None, "--note", help="What changed, for the lab's list."),
    config: Optional[str] = ConfigOpt,
    db: Optional[str] = DbOpt,
) -> None:
    """Store a new version of a prompt (it is not used until activated or A/B tested)."""
    from jurist.analysis.prompts import create_prompt_version

    text = read_text(file)
    made = on_store(config, db, lambda store: create_prompt_version(store, name, text, note))
    console.print(escape(f"stored {name} version {made.version} (hash {made.hash}); use it with "
                         f"`jurist prompts activate {name} {made.version}` or test it with "
                         f"`jurist prompts ab {name} 1 {made.version} --calls 200`"), highlight=False)


@app.command("activate")
@handle_errors
def activate_cmd(
    name: str = typer.Argument(..., help="The prompt's name."),
    version: int = typer.Argument(..., min=1, help="The version every call of it uses from now on (1: shipped)."),
    config: Optional[str] = ConfigOpt,
    db: Optional[str] = DbOpt,
) -> None:
    """Make one version the one every call uses (ends a running A/B test of that prompt)."""
    from jurist.analysis.prompt_tests import activate_version

    on_store(config, db, lambda store: activate_version(store, name, version))
    console.print(escape(f"{name}: version {version} is in use"), highlight=False)


@app.command("ab")
@handle_errors
def ab_cmd(
    name: str = typer.Argument(..., help="The prompt's name."),
    a: int = typer.Argument(..., min=1, help="Version A, the control."),
    b: int = typer.Argument(..., min=1, help="Version B."),
    share: float = typer.Option(0.5, "--share", help="The share of calls routed to B (between 0 and 1)."),
    calls: Optional[int] = typer.Option(None, "--calls", min=1, help="End when each version has had this many calls."),
    alpha: Optional[float] = typer.Option(None, "--alpha", help="End when the comparison is significant at this level "
                                                                "(the better version is then activated)."),
    better: str = typer.Option("higher", "--better", help="Which mean score wins: higher or lower."),
    config: Optional[str] = ConfigOpt,
    db: Optional[str] = DbOpt,
) -> None:
    """Start an A/B test: a share of the prompt's calls go to version B until the end condition."""
    from jurist.analysis.prompt_tests import start_test

    test = on_store(config, db, lambda store: start_test(store, name, a, b, share, calls=calls, alpha=alpha,
                                                         better=better))
    show_test(test)


@app.command("tests")
@handle_errors
def tests_cmd(
    name: Optional[str] = typer.Argument(None, help="Only the tests of this prompt."),
    config: Optional[str] = ConfigOpt,
    db: Optional[str] = DbOpt,
) -> None:
    """The A/B tests, newest first, each with its running comparison."""
    from jurist.analysis.prompt_tests import ab_report, list_tests

    async def work(store: "Store") -> list["PromptTest"]:
        return [await ab_report(store, t.id) for t in await list_tests(store, name)]

    tests = on_store(config, db, work)
    if not tests:
        console.print("no A/B tests" + (f" of {escape(name)}" if name else ""), highlight=False)
    for test in tests:
        show_test(test)


@app.command("stop")
@handle_errors
def stop_cmd(
    test_id: str = typer.Argument(..., help="The test's id (jurist prompts tests)."),
    keep: Optional[int] = typer.Option(None, "--keep", min=1, help="The version to use from now on (default: A)."),
    config: Optional[str] = ConfigOpt,
    db: Optional[str] = DbOpt,
) -> None:
    """End a running A/B test now, keeping version A (or --keep)."""
    from jurist.analysis.prompt_tests import stop_test

    show_test(on_store(config, db, lambda store: stop_test(store, test_id, keep)))


def register(parent: typer.Typer) -> None:
    parent.add_typer(app, name="prompts")
