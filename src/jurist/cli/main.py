"""The `jurist` command."""

from __future__ import annotations

from typing import Optional

import typer

from jurist.cli import (calibrate, compare, datasets, demo, doctor, evaluate, experiment, logs, probe, prompts, proxy,
                        research, serve, tutor)
from jurist.cli.common import CommandGroup

app = typer.Typer(
    name="jurist",
    cls=CommandGroup,
    help="Judge LLM output with LLMs: rubric scoring, judge panels, research evaluation and checklist tutors, every call on record.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        from jurist.version import __version__

        typer.echo(f"jurist {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Optional[bool] = typer.Option(None, "--version", callback=_version, is_eager=True,
                                           help="Print jurist's version and exit."),
) -> None:
    """Judge LLM output with LLMs: rubric scoring, judge panels, research evaluation and checklist tutors, every call on record."""


evaluate.register(app)
logs.register(app)
demo.register(app)
research.register(app)
serve.register(app)
tutor.register(app)
proxy.register(app)
doctor.register(app)
calibrate.register(app)
compare.register(app)
probe.register(app)
prompts.register(app)
datasets.register(app)
experiment.register(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
