"""`jurist datasets`: add, list, show and export versioned datasets of test inputs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer
from rich.markup import escape

from jurist.cli.common import (ConfigOpt, DbOpt, CommandGroup, console, err_console, handle_errors, json_text,
                               load_settings, print_store)

if TYPE_CHECKING:  # pragma: no cover
    from jurist.experiments.records import DatasetVersion
    from jurist.store import Store

datasets_app = typer.Typer(name="datasets", cls=CommandGroup, no_args_is_help=True, add_completion=False,
                           help="Datasets of test inputs with their expected answers, versioned by content.")

VersionOpt = typer.Option(None, "--version", help="A version: its hash or its number (default: the latest).")
CELL_CHARS = 80  # the most of an input or an expected answer a table shows


def _store(config: str | None, db: str | None) -> "Store":
    from jurist.store import Store

    settings = load_settings(config, db=db)
    print_store(settings, err_console)
    return Store(settings.database)


def _version(store: "Store", name: str, version: str | None) -> "DatasetVersion":
    from jurist.errors import NotFound
    from jurist.experiments.datasets import check_name

    check_name(name, "dataset")
    found = store.dataset_version(name, version)
    if found is None:
        if version is None:
            raise NotFound(f"no dataset {name!r}; add one with jurist datasets add {name} FILE")
        raise NotFound(f"dataset {name!r} has no version {version!r}; jurist datasets show {name} lists them")
    return found


def _cut(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= CELL_CHARS else flat[:CELL_CHARS - 1] + "…"


def register(app: typer.Typer) -> None:
    app.add_typer(datasets_app)


@datasets_app.command("add")
@handle_errors
def add_cmd(
    name: str = typer.Argument(..., help="The dataset's name (letters, digits, '.', '_', '-')."),
    file: Path = typer.Argument(..., help="A .jsonl file (id, input, expected, metadata a line) or a .csv file "
                                          "(columns id, input, expected, metadata)."),
    config: Optional[str] = ConfigOpt,
    db: Optional[str] = DbOpt,
) -> None:
    """Add a dataset file as a version of NAME: the same content is the same version; a change is a new one."""
    from jurist.experiments.datasets import check_name, read_dataset

    check_name(name, "dataset")
    dataset = read_dataset(file)  # checked whole before anything is stored
    with _store(config, db) as store:
        version, new = store.add_dataset_version(name, dataset.version, dataset.items, str(file))
    what = "added as" if new else "unchanged: the same content as"
    console.print(escape(f"dataset {name}: {len(dataset.items)} items, {what} version {version.number} "
                         f"({version.dataset_version})"), highlight=False, soft_wrap=True)


@datasets_app.command("list")
@handle_errors
def list_cmd(
    as_json: bool = typer.Option(False, "--json", help="One JSON object per version, a line."),
    config: Optional[str] = ConfigOpt,
    db: Optional[str] = DbOpt,
) -> None:
    """List the datasets: each one's latest version, its items and how many versions it has."""
    from rich.table import Table

    with _store(config, db) as store:
        versions = store.dataset_versions()
    if as_json:
        for v in versions:
            typer.echo(json_text(v.model_dump(mode="json")))
        return
    if not versions:
        console.print("no datasets; add one with jurist datasets add NAME FILE")
        return
    latest: dict[str, DatasetVersion] = {}
    counts: dict[str, int] = {}
    for v in versions:
        latest[v.dataset] = v
        counts[v.dataset] = counts.get(v.dataset, 0) + 1
    table = Table(title="datasets", title_justify="left")
    for col in ("name", "items", "latest version", "versions", "added"):
        table.add_column(col)
    for name, v in latest.items():
        table.add_row(escape(name), str(v.items), f"{v.number} ({v.dataset_version})", str(counts[name]),
                      v.created_at)
    console.print(table)


@datasets_app.command("show")
@handle_errors
def show_cmd(
    name: str = typer.Argument(..., help="The dataset's name."),
    version: Optional[str] = VersionOpt,
    limit: int = typer.Option(20, "-n", "--limit", min=0, help="Items shown (0: none; export gives them all)."),
    as_json: bool = typer.Option(False, "--json", help="The version and its items as one JSON object."),
    config: Optional[str] = ConfigOpt,
    db: Optional[str] = DbOpt,
) -> None:
    """Show a dataset's versions and the items of one (default: the latest)."""
    from rich.table import Table

    with _store(config, db) as store:
        chosen = _version(store, name, version)
        versions = store.dataset_versions(name)
        items = store.dataset_items(name, chosen.dataset_version)
    if as_json:
        typer.echo(json_text({"version": chosen.model_dump(mode="json"),
                              "versions": [v.model_dump(mode="json") for v in versions],
                              "items": [i.model_dump(mode="json", exclude_none=True) for i in items[:limit]]}))
        return
    table = Table(title=escape(f"dataset {name}: versions"), title_justify="left")
    for col in ("version", "hash", "items", "added", "from"):
        table.add_column(col)
    for v in versions:
        mark = " *" if v.dataset_version == chosen.dataset_version else ""
        table.add_row(f"{v.number}{mark}", v.dataset_version, str(v.items), v.created_at, escape(v.source or ""))
    console.print(table)
    if not limit:
        return
    shown = Table(title=escape(f"version {chosen.number}: {len(items)} items"
                               + (f", the first {limit}" if len(items) > limit else "")), title_justify="left")
    for col in ("id", "input", "expected"):
        shown.add_column(col, overflow="fold")
    for item in items[:limit]:
        text = item.input if isinstance(item.input, str) else f"[{len(item.input)} messages] " + str(
            item.input[-1].get("content", ""))
        expected = " | ".join(item.expected_answers) if item.expected is not None else "—"
        shown.add_row(escape(item.id), escape(_cut(text)), escape(_cut(expected)))
    console.print(shown)


@datasets_app.command("export")
@handle_errors
def export_cmd(
    name: str = typer.Argument(..., help="The dataset's name."),
    version: Optional[str] = VersionOpt,
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the JSONL here (default: stdout)."),
    config: Optional[str] = ConfigOpt,
    db: Optional[str] = DbOpt,
) -> None:
    """Write a dataset version as JSONL (what `jurist datasets add` reads back as the same version)."""
    from jurist.experiments.datasets import items_jsonl

    with _store(config, db) as store:
        chosen = _version(store, name, version)
        items = store.dataset_items(name, chosen.dataset_version)
    lines = items_jsonl(items)
    if output is None:
        for line in lines:
            sys.stdout.write(line)
        sys.stdout.flush()
        return
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(f".{output.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.writelines(lines)
    tmp.replace(output)
    err_console.print(escape(f"dataset {name} version {chosen.number} ({chosen.dataset_version}): {len(items)} "
                             f"items written to {output}"), highlight=False, soft_wrap=True)
