"""What every command shares: settings, the console, error handling."""

from __future__ import annotations

import functools
from typing import Any, Callable, ParamSpec, TypeVar

import typer
from rich.console import Console

from jurist.config import Settings
from jurist.errors import JuristError, ModelError, StoreError, UsageError

console = Console()
err_console = Console(stderr=True)

P = ParamSpec("P")
R = TypeVar("R")

EXIT_OK, EXIT_FAILURES, EXIT_BAD_INPUT = 0, 1, 2


def load_settings(config: str | None = None, **explicit: Any) -> Settings:
    return Settings.load(config, **explicit)


def handle_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn jurist's typed errors into a clear message and an exit code."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except UsageError as exc:
            err_console.print(f"[bold red]error:[/] {exc}", markup=True, highlight=False)
            raise typer.Exit(EXIT_BAD_INPUT) from None
        except (ModelError, StoreError, JuristError) as exc:
            err_console.print(f"[bold red]error:[/] {type(exc).__name__}: {exc}", markup=True, highlight=False)
            raise typer.Exit(EXIT_FAILURES) from None
        except KeyboardInterrupt:
            err_console.print("interrupted; finished results are kept, rerun to resume")
            raise typer.Exit(130) from None

    return wrapper
