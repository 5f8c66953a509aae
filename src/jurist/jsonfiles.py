"""Reading and writing the JSON files jurist takes and produces."""

from __future__ import annotations

import difflib
import json
import os
import re
import types
import typing
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Union

from pydantic import BaseModel, BeforeValidator, ValidationError
from pydantic_core import ErrorDetails, to_json

from jurist.errors import InputError
from jurist.ids import new_id


#: The deepest nesting of arrays and objects a JSON input may have.
MAX_JSON_DEPTH = 100

# What may be a lone surrogate: an escape of one (``\ud800``), or one as a character.
_MAYBE_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]|[\ud800-\udfff]")
# A surrogate's escape without its other half, in JSON text.
_LONE_ESCAPE = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
                          r"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def loads(text: str, source: str, line: int | None = None) -> Any:
    """JSON text's value, as ``json.loads`` reads it, within bounds: nested at most
    :data:`MAX_JSON_DEPTH` arrays and objects deep, and every string Unicode text (a lone
    surrogate, ``"\\ud800"`` without its pair, cannot be written as UTF-8 and is refused).
    Either, or a number of more digits than Python reads, is an InputError naming ``source`` and
    the line (``line``: the text's own, for a JSONL line); invalid JSON raises
    ``json.JSONDecodeError`` for the caller to word."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise InputError(f"nested more than {MAX_JSON_DEPTH} arrays or objects deep", file=source,
                         line=line) from None
    except json.JSONDecodeError:
        raise
    except ValueError:  # an integer of more digits than Python reads (4,300)
        raise InputError("a number too long to read (over 4,300 digits)", file=source, line=line) from None
    deep = text.count("[") + text.count("{") > MAX_JSON_DEPTH  # else it cannot be too deep
    if deep or _MAYBE_SURROGATE.search(text):
        problem = value_problem(value)
        if problem is not None:
            lone = _LONE_ESCAPE.search(text) if problem.startswith("a lone") else None
            if line is None and lone is not None:
                line = text.count("\n", 0, lone.start()) + 1
            raise InputError(problem, file=source, line=line)
    return value


def value_problem(value: Any) -> str | None:
    """Why a parsed JSON (or YAML) value is out of bounds (too deep, a lone surrogate), or None.
    A list or object met again (a YAML alias) is not walked again: aliases of aliases repeat one
    value a billion times."""
    todo: list[tuple[Any, int]] = [(value, 0)]
    seen: set[int] = set()
    while todo:
        item, depth = todo.pop()
        if isinstance(item, (dict, list)):
            if id(item) in seen:
                continue
            seen.add(id(item))
        if isinstance(item, str):
            found = _SURROGATE.search(item)
            if found is not None:
                return (f"a lone surrogate (\\u{ord(found[0]):04x}) in a string: it is half of a character, "
                        "not text; write the character itself or both halves of its escape")
        elif isinstance(item, (dict, list)):
            if depth >= MAX_JSON_DEPTH:
                return f"nested more than {MAX_JSON_DEPTH} arrays or objects deep"
            children = [*item, *item.values()] if isinstance(item, dict) else item
            todo.extend((child, depth + 1) for child in children)
    return None


def jsonl_objects(lines: Iterable[str], source: str, *, comments: bool = False,
                  max_line: int | None = None) -> Iterator[tuple[int, dict[str, object]]]:
    """Each JSONL line's object with its line number; blank lines (and ``#`` lines when
    ``comments``) skipped. A line over ``max_line`` characters, invalid JSON, a value that
    is not an object or one out of :func:`loads`' bounds is an InputError naming ``source``
    and the line."""
    for n, raw in enumerate(lines, start=1):
        if max_line is not None and len(raw) > max_line:
            raise InputError(f"line longer than {max_line} characters", file=source, line=n)
        text = raw.strip()
        if not text or (comments and text.startswith("#")):
            continue
        try:
            obj = loads(text, source, n)
        except json.JSONDecodeError as exc:
            raise InputError(f"not valid JSON: {exc.msg}", file=source, line=n) from None
        if not isinstance(obj, dict):
            raise InputError("each line must be a JSON object", file=source, line=n)
        yield n, obj


def _not_a_bool(value: object) -> object:
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {str(value).lower()} (booleans are not numbers)")
    return value


#: A number field that refuses ``true`` and ``false`` (pydantic would read them as 1 and 0);
#: numbers written as text (``"2"``, an environment variable) are still read.
Number = Annotated[float, BeforeValidator(_not_a_bool)]
#: A whole-number field that refuses ``true`` and ``false``.
Whole = Annotated[int, BeforeValidator(_not_a_bool)]


def did_you_mean(name: str, known: Iterable[str]) -> str | None:
    """The known name closest to ``name`` (a typo's intended name: difflib's closest match, else
    the one known name that holds it, ``intent`` for ``intent_alignment``), or None when none is."""
    names = list(known)
    matches = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    if matches:
        return matches[0]
    holding = [n for n in names if len(name) >= 3 and name.lower() in n.lower()]
    return holding[0] if len(holding) == 1 else None


def unknown_name(name: str, known: Iterable[str], what: str = "field", shown: str = "{}") -> str:
    """``unknown field 'contnet' (did you mean 'content'?)``; without a close name, the known ones
    listed (``(fields: role, content)``). ``shown`` formats a name (``"{{{}}}"``: a placeholder)."""
    names = list(dict.fromkeys(known))
    show = (lambda n: shown.format(n)) if shown != "{}" else repr
    match = did_you_mean(name, names)
    if match is not None:
        return f"unknown {what} {show(name)} (did you mean {show(match)}?)"
    if not names:
        return f"unknown {what} {show(name)}"
    return f"unknown {what} {show(name)} ({what}s: {', '.join(shown.format(n) for n in names)})"


def _unwrapped(tp: Any) -> list[Any]:
    """The types a value of annotation ``tp`` may have: Optional, unions and Annotated opened."""
    origin = typing.get_origin(tp)
    if origin is Annotated:
        return _unwrapped(typing.get_args(tp)[0])
    if origin is Union or origin is types.UnionType:
        return [t for arg in typing.get_args(tp) if arg is not type(None) for t in _unwrapped(arg)]
    return [tp]


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _field_names(model: type[BaseModel]) -> dict[str, object]:
    """A model's field names as a file writes them (the alias, where one is set) -> annotation."""
    out: dict[str, object] = {}
    for name, info in model.model_fields.items():
        alias = info.validation_alias if isinstance(info.validation_alias, str) else info.alias
        out[alias or name] = info.annotation
    return out


def _step(tp: Any, part: int | str) -> Any:
    """The annotation one step into ``tp`` along a pydantic error location (None: lost the way)."""
    for t in _unwrapped(tp):
        if _is_model(t) and isinstance(part, str):
            if t.__name__ == part:  # a union member's tag
                return t
            fields = _field_names(t)
            by_name = t.model_fields.get(part)
            if part in fields or by_name is not None:
                return fields.get(part, by_name.annotation if by_name is not None else None)
        origin, args = typing.get_origin(t), typing.get_args(t)
        if origin in (list, tuple, set, frozenset, Sequence) and isinstance(part, int) and args:
            return args[0]
        if origin in (dict, Mapping) and isinstance(part, str) and len(args) == 2:
            return args[1]
    return None


def known_fields(model: Any, loc: Sequence[int | str]) -> list[str]:
    """The field names allowed at ``loc`` (a pydantic error location) inside ``model`` (a
    model class or an annotation holding one): those of the model the location leads to."""
    tp: Any = model
    for part in loc:
        tp = _step(tp, part)
        if tp is None:
            return []
    return [name for t in _unwrapped(tp) if _is_model(t) for name in _field_names(t)]


def where(loc: Sequence[int | str]) -> str:
    """An error location as a path: ``points[2].id``."""
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")


def unknown_field(err: ErrorDetails, model: Any, skip: int = 0) -> str:
    """An unknown field's error (``extra_forbidden``) in words: ``unknown field 'contnet' (did you
    mean 'content'?)``, the names compared with being those of the model at the error's place in
    ``model`` (``skip``: leading location parts that are not fields, FastAPI's ``body``)."""
    loc = list(err["loc"])
    return unknown_name(str(loc[-1]), known_fields(model, loc[skip:-1]))


def error_problem(err: ErrorDetails, model: Any, loc: Sequence[int | str] | None = None) -> str:
    """One pydantic error in a sentence: ``unknown field 'contnet' (did you mean 'content'?)``,
    ``missing field 'role'``, ``weight: expected a number, ...``; a nested field is named with
    its path (``providers.local: unknown field 'bse_url' (did you mean 'base_url'?)``). ``model``:
    the model class (or annotation) validated, for the names an unknown field is compared with;
    ``loc``: the location to show (default the error's own)."""
    shown = list(err["loc"] if loc is None else loc)
    if err["type"] == "extra_forbidden" and shown:
        problem = unknown_field(err, model)
        return f"{where(shown[:-1])}: {problem}" if len(shown) > 1 else problem
    if err["type"] == "missing" and shown:
        problem = f"missing field {str(shown[-1])!r}"
        return f"{where(shown[:-1])}: {problem}" if len(shown) > 1 else problem
    msg = err["msg"].removeprefix("Value error, ")
    return f"{where(shown)}: {msg}" if shown else msg


def reported_errors(errors: Sequence[ErrorDetails], model: Any, skip: int = 0) -> list[ErrorDetails]:
    """The errors to report, unknown fields first, less each missing field that an unknown one is
    a typo of (``txt`` for ``text``: the typo is the one problem). ``skip``: as for
    :func:`unknown_field`."""
    extras = [e for e in errors if e["type"] == "extra_forbidden" and len(e["loc"]) > skip]
    meant = {(*e["loc"][:-1], did_you_mean(str(e["loc"][-1]), known_fields(model, list(e["loc"])[skip:-1])))
             for e in extras}
    rest = [e for e in errors if e["type"] != "extra_forbidden" and not (e["type"] == "missing" and e["loc"]
                                                                          and tuple(e["loc"]) in meant)]
    return [*extras, *rest]


def validation_problems(exc: ValidationError, model: Any, prefix: Sequence[int | str] = ()) -> list[str]:
    """Every error of a pydantic ValidationError to report (:func:`reported_errors`) as
    :func:`error_problem` words it, each location after ``prefix`` (the place of the data
    validated)."""
    return [error_problem(e, model, [*prefix, *e["loc"]]) for e in reported_errors(exc.errors(), model)]


def first_error(exc: ValidationError) -> ErrorDetails:
    """The error to report first: an unknown field (a typo, which may also be why a field is
    missing), else the first."""
    errors = exc.errors()
    return next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])


def line_problem(exc: ValidationError, model: type[BaseModel], whole: str) -> str:
    """A JSONL line's first validation error (:func:`first_error`) in a sentence
    (:func:`error_problem`); ``whole``: what a line is, for an error of the line itself."""
    err = first_error(exc)
    problem = error_problem(err, model)
    return problem if err["loc"] else f"{whole}: {problem}"


def key_line(text: str, key: str) -> int | None:
    """The line of a JSON or YAML file's text where ``key`` is written as a key (``"key":``,
    ``key:``), when it is written so exactly once (None otherwise): where an unknown field is."""
    pattern = re.compile(r"(?<![\w\\\"'-])[\"']?" + re.escape(key) + r"[\"']?[ \t]*:")
    found = [m.start() for m in pattern.finditer(text)]
    return text.count("\n", 0, found[0]) + 1 if len(found) == 1 else None


def read_text(path: str | Path, what: str) -> str:
    """A UTF-8 text file's text; an unreadable one is an InputError naming the file, ``what``
    saying what it should hold."""
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read {what}: {exc.strerror}", file=str(p)) from None
    except UnicodeDecodeError:
        raise InputError("the file is not UTF-8 text", file=str(p)) from None


def parse_json(text: str, source: str) -> Any:
    """JSON text's value (within :func:`loads`' bounds); invalid JSON is an InputError naming
    ``source`` and the line."""
    try:
        return loads(text, source)
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg} (column {exc.colno})", file=source, line=exc.lineno) from None


def read_json(path: str | Path, what: str) -> Any:
    """Parse a JSON file; an unreadable or invalid one is an InputError naming
    the file (and the line), ``what`` saying what the file should hold."""
    return parse_json(read_text(path, what), str(Path(path)))


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
