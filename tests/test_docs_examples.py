"""Every Python example in the README and ``docs/`` runs as written.

Each fenced ```` ```python ```` block is a whole program, run as a newcomer would
run it from a checkout: its own process, a fresh working folder that sees the
repository's ``examples/`` folder, a fresh per-user data folder, no judge
configured and no API key. A block that is a sketch of an API rather than a
program, or that needs an LLM provider, says so on the line before its fence::

    <!-- not run: REASON -->

and is listed as skipped with that reason. Such a block must still parse.
A block followed by a paragraph that is only ``prints`` and a fenced block must
print exactly that block (trailing spaces aside): a documented output that the
code no longer prints is caught here, not by a reader.
Whatever a block leaves in the working folder besides ``examples`` fails it: the
docs promise that their examples clean up after themselves. So does anything it
writes to the per-user data folder: an example uses a temporary store, never the
reader's own.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from itertools import islice
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
NOT_RUN = re.compile(r"<!--\s*not run:\s*(?P<reason>.+?)\s*-->")
FENCE = re.compile(r"^```python\s*$")
TIMEOUT_S = 120


def _fenced(lines: list[str], i: int) -> tuple[list[str], int]:
    """The body of the fenced block opening at line ``i`` and the index of its closing fence."""
    body = []
    i += 1
    while i < len(lines) and not lines[i].startswith("```"):
        body.append(lines[i])
        i += 1
    return body, i


def _printed(lines: list[str], i: int) -> list[str] | None:
    """The documented output after the block closing at line ``i``: a paragraph that is only
    ``prints``, then a fenced block; None where there is none."""
    rest = list(islice((k for k in range(i + 1, len(lines)) if lines[k].strip()), 2))
    if len(rest) < 2 or lines[rest[0]].strip() != "prints" or not lines[rest[1]].startswith("```"):
        return None
    return _fenced(lines, rest[1])[0]


def python_blocks(page: Path) -> list[tuple[int, str, str | None, list[str] | None]]:
    """(line, source, reason not run or None, the output it is documented to print or None) for
    each ```python block of ``page``."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks: list[tuple[int, str, str | None, list[str] | None]] = []
    i = 0
    while i < len(lines):
        if FENCE.match(lines[i]):
            start = i + 1
            body, i = _fenced(lines, i)
            before = next((lines[j] for j in range(start - 2, -1, -1) if lines[j].strip()), "")
            marker = NOT_RUN.search(before)
            blocks.append((start, "\n".join(body) + "\n", marker.group("reason") if marker else None,
                           _printed(lines, i)))
        i += 1
    return blocks


CASES = [pytest.param(page, line, source, reason, prints, id=f"{page.relative_to(REPO)}:{line}")
         for page in PAGES for line, source, reason, prints in python_blocks(page)]


def test_the_docs_have_examples() -> None:
    assert sum(1 for case in CASES if case.values[3] is None) >= 10
    assert sum(1 for case in CASES if case.values[3] is None and case.values[4] is not None) >= 5


def test_a_documented_output_is_read_from_the_prints_block(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```python\nprint(1)\n```\n\nprints\n\n```\n1\n```\n\n```python\nprint(2)\n```\n\n"
                    "It printed:\n\n```\n2\n```\n", encoding="utf-8")
    assert [(line, prints) for line, _, _, prints in python_blocks(page)] == [(1, ["1"]), (11, None)]


@pytest.mark.parametrize(("page", "line", "source", "reason", "prints"), CASES)
def test_python_example_runs(page: Path, line: int, source: str, reason: str | None, prints: list[str] | None,
                             tmp_path: Path) -> None:
    # Every block parses, the sketches too (top-level await is allowed in a sketch).
    ast.parse(source, filename=f"{page.name}:{line}")
    if reason is not None:
        pytest.skip(f"{page.relative_to(REPO)}:{line} not run: {reason}")
    work = tmp_path / "work"
    work.mkdir()
    (work / "examples").symlink_to(REPO / "examples")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("JURIST_", "OPENAI_", "ANTHROPIC_"))}
    env.update(HOME=str(tmp_path / "home"), XDG_DATA_HOME=str(tmp_path / "data"),
               PYTHONPATH=str(REPO / "src"))
    script = tmp_path / "example.py"
    script.write_text(source, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], cwd=work, env=env, capture_output=True,
                          text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, (f"{page.relative_to(REPO)}:{line} exited {done.returncode}\n"
                                  f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}")
    if prints is not None:
        got = [row.rstrip() for row in done.stdout.rstrip("\n").splitlines()]
        assert got == [row.rstrip() for row in prints], (
            f"{page.relative_to(REPO)}:{line} no longer prints what the page says it prints:\n{done.stdout[-3000:]}")
    left = sorted(p.name for p in work.iterdir() if p.name != "examples")
    assert left == [], f"{page.relative_to(REPO)}:{line} left {left} in the working folder"
    # nor in the reader's own store: the per-user data folder (and the old ~/.jurist) stay untouched
    mine = sorted(str(p.relative_to(tmp_path)) for folder in (tmp_path / "data", tmp_path / "home")
                  if folder.exists() for p in folder.rglob("*jurist*"))
    assert mine == [], f"{page.relative_to(REPO)}:{line} wrote {mine} in the per-user data folder"
