"""Every command's --help: value options name their type (TEXT, INTEGER, PATH), flags are flags."""

from __future__ import annotations

import re

import pytest
import typer
from typer.testing import CliRunner

from jurist.cli.main import app

from tests.conftest import REPO

TYPE_LABEL = re.compile(r"<(?:bool|str|int|float|path|file|dir|int range|float range|list\[[^\]]*\])>")


def command_names() -> list[str]:
    group = typer.main.get_command(app)
    with group.make_context("jurist", [], resilient_parsing=True) as ctx:
        return list(group.list_commands(ctx))


def help_of(*args: str, width: int = 100) -> str:
    result = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": str(width)}, prog_name="jurist")
    assert result.exit_code == 0, result.output
    return result.output


def test_every_command_is_checked():
    assert {"evaluate", "evaluate-batch", "logs", "demo", "tutor", "serve", "proxy", "doctor"} <= set(command_names())


@pytest.mark.parametrize("command", ["", *command_names()])
def test_no_option_shows_bool_or_a_python_type(command):
    out = help_of(*([command] if command else []))
    assert "<bool>" not in out
    options = out.split("Options", 1)[1]  # an argument's own panel may keep typer's label
    assert not TYPE_LABEL.search(options), TYPE_LABEL.search(options)
    assert "BOOLEAN" not in options  # a flag takes no value


def option_row(out: str, option: str) -> str:
    """The help row of ``option`` (its first line)."""
    return next(line for line in out.splitlines() if re.match(rf"│\s+(\*\s+)?{re.escape(option)}\s", line))


def test_value_options_name_their_type_and_flags_none():
    out = help_of("evaluate", width=200)
    assert "PATH" in option_row(out, "--rubrics") and "PATH" in option_row(out, "--output")
    assert "TEXT" in option_row(out, "--judge") and "FLOAT" in option_row(out, "--timeout")
    assert "[plain|logprobs]" in option_row(out, "--score-mode")
    row = option_row(out, "--no-cache")
    assert not re.search(r"\b(TEXT|BOOLEAN|INTEGER|PATH)\b", row)
    batch = help_of("evaluate-batch", width=200)
    assert "INTEGER" in option_row(batch, "--parallel") and "[local|ray]" in option_row(batch, "--engine")
    assert "--no-retry-failed" in option_row(batch, "--retry-failed")


def test_tutor_help_and_docs_name_the_same_tutor_aliases():
    """`jurist tutor --tutor` falls back on aliases; --help and docs/checklist.md say which, in order,
    as jurist.checklist.tutor_ref resolves them."""
    from jurist.checklist import tutor_ref
    from jurist.config import Settings

    out = " ".join(help_of("tutor", width=250).split())  # each option's help on one line
    in_help = re.findall(r"alias '(\w+)'", out.split("--tutor", 1)[1].split("--judge", 1)[0])
    docs = (REPO / "docs" / "checklist.md").read_text(encoding="utf-8")
    paragraph = docs.split("**Tutor model**", 1)[1].split("\n\n", 1)[0]
    in_docs = re.findall(r"alias `(\w+)`", paragraph)
    assert in_help == in_docs == ["tutor", "strong"]
    both = Settings(judge="openai/j", aliases={"tutor": "openai/t", "strong": "openai/s"})
    assert tutor_ref(both) == "openai/t"
    assert tutor_ref(Settings(judge="openai/j", aliases={"strong": "openai/s"})) == "openai/s"
    assert tutor_ref(Settings(judge="openai/j")) == "openai/j"
    serve = " ".join(help_of("serve", width=250).split())
    assert re.findall(r"alias '(\w+)'", serve.split("--tutor ", 1)[1].split("--judge", 1)[0]) == in_help


def command_paths(command=None, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command and subcommand, as the words that name it (``()``: jurist itself)."""
    command = command or typer.main.get_command(app)
    found = [path]
    if hasattr(command, "list_commands"):
        with command.make_context("jurist", [], resilient_parsing=True) as ctx:
            for name in command.list_commands(ctx):
                found += command_paths(command.get_command(ctx, name), (*path, name))
    return found


def option_names(path: tuple[str, ...]) -> list[str]:
    command = typer.main.get_command(app)
    for name in path:
        with command.make_context("jurist", [], resilient_parsing=True) as ctx:
            command = command.get_command(ctx, name)
    return [o for p in command.params for o in (*p.opts, *p.secondary_opts) if o.startswith("--")]


@pytest.mark.parametrize("width", [80, 100])
@pytest.mark.parametrize("path", command_paths(), ids=lambda p: " ".join(p) or "jurist")
def test_help_shows_every_option_name_whole(path, width):
    """At 80 columns rich's table cut long names (`--max-concurre…`): where it would, the plain layout."""
    out = help_of(*path, width=width)
    assert not re.search(r"--[\w-]*…", out), out
    shown = set(re.findall(r"(?<![\w-])--[\w-]+", out))
    assert set(option_names(path)) <= shown, out
