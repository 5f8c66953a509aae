"""Reading and writing the JSON files jurist takes and produces."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from pydantic_core import to_json

from jurist.errors import InputError
from jurist.ids import new_id

if TYPE_CHECKING:  # pragma: no cover
    from pydantic import ValidationError


def jsonl_objects(lines: Iterable[str], source: str, *, comments: bool = False,
                  max_line: int | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each JSONL line's object with its line number; blank lines (and ``#`` lines when
    ``comments``) skipped. A line over ``max_line`` characters, invalid JSON or a value that
    is not an object is an InputError naming ``source`` and the line."""
    for n, raw in enumerate(lines, start=1):
        if max_line is not None and len(raw) > max_line:
            raise InputError(f"line longer than {max_line} characters", file=source, line=n)
        text = raw.strip()
        if not text or (comments and text.startswith("#")):
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"not valid JSON: {exc.msg}", file=source, line=n) from None
        if not isinstance(obj, dict):
            raise InputError("each line must be a JSON object", file=source, line=n)
        yield n, obj


def line_problem(exc: ValidationError, fields: str, whole: str) -> str:
    """A JSONL line's first validation error in a sentence: an unknown field (naming ``fields``,
    the ones a line may have), a missing one, or a field and pydantic's message (``whole``: what
    a line is, for an error of the line itself)."""
    err = exc.errors()[0]
    name = ".".join(str(p) for p in err["loc"]) or whole
    if err["type"] == "extra_forbidden":
        return f"unknown field {name!r} (fields: {fields})"
    if err["type"] == "missing":
        return f"missing field {name!r}"
    return f"{name}: {err['msg']}"


def read_json(path: str | Path, what: str) -> Any:
    """Parse a JSON file; an unreadable or invalid one is an InputError naming
    the file (and the line), ``what`` saying what the file should hold."""
    p = Path(path)
    try:
        raw = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read {what}: {exc.strerror}", file=str(p)) from None
    except UnicodeDecodeError:
        raise InputError("the file is not UTF-8 text", file=str(p)) from None
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg} (column {exc.colno})", file=str(p), line=exc.lineno) from None


def json_bytes(data: Any) -> bytes:
    """The bytes :func:`write_json` writes."""
    return to_json(data, indent=2) + b"\n"


def temporary_name(path: Path) -> Path:
    """A hidden name next to ``path`` that no other writer uses: ``.<name>.<pid>.<random>.tmp``."""
    return path.with_name(f".{path.name}.{os.getpid()}.{new_id()[:8]}.tmp")


def write_json(path: Path, data: Any) -> None:
    """Write JSON atomically (a temporary file of its own, then rename): UTF-8, indented
    by two spaces, as ``json.dumps(data, indent=2, ensure_ascii=False)`` writes it, but
    serialised by pydantic's encoder, several times faster (a batch writes one file per
    session)."""
    tmp = temporary_name(path)
    try:
        tmp.write_bytes(json_bytes(data))
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
