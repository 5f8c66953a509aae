"""The `jurist` command."""

from __future__ import annotations

import typer

from jurist.cli import calibrate, demo, doctor, evaluate, logs, proxy, research, serve, tutor

app = typer.Typer(
    name="jurist",
    help="Judge LLM output with LLMs: rubric scoring, judge panels, research evaluation and checklist tutors, every call on record.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
evaluate.register(app)
logs.register(app)
demo.register(app)
research.register(app)
serve.register(app)
tutor.register(app)
proxy.register(app)
doctor.register(app)
calibrate.register(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
