"""The JSON Schema subset a ``json_schema`` check supports: checked when the rubric is loaded,
applied to an answer parsed as JSON.

Supported keywords: ``type`` (a name or a list of names: ``object``, ``array``, ``string``,
``number``, ``integer``, ``boolean``, ``null``), ``properties``, ``required``,
``additionalProperties`` (true, false or a schema), ``items`` (one schema for every element),
``enum``, ``const``, ``minimum``, ``maximum``, ``exclusiveMinimum``, ``exclusiveMaximum``,
``minLength``, ``maxLength``, ``minItems``, ``maxItems``, ``uniqueItems``, ``anyOf``, ``allOf``,
``oneOf``, ``not``; the annotations ``title``, ``description``, ``$schema``, ``$id``,
``$comment``, ``examples`` and ``default`` are read and not applied. Any other keyword
(``pattern``, ``$ref``, ``format``, ``patternProperties`` ...) is refused when the rubric is
loaded, with the closest supported name: a keyword that is not applied would pass answers the
schema's author meant to fail.
"""

from __future__ import annotations

import json
import math
from typing import Any

from jurist.jsonfiles import unknown_name

TYPES = ("object", "array", "string", "number", "integer", "boolean", "null")
_SCHEMA_LISTS = ("anyOf", "allOf", "oneOf")
_COUNTS = ("minLength", "maxLength", "minItems", "maxItems")
_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
ANNOTATIONS = ("title", "description", "$schema", "$id", "$comment", "examples", "default")
KEYWORDS = ("type", "properties", "required", "additionalProperties", "items", "enum", "const", *_BOUNDS,
            *_COUNTS, "uniqueItems", *_SCHEMA_LISTS, "not", *ANNOTATIONS)
MAX_DEPTH = 32  # schemas nested deeper are refused (and answers are checked no deeper)


def _at(path: str, key: str | int) -> str:
    return f"{path}[{key}]" if isinstance(key, int) else (f"{path}.{key}" if path else key)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_schema(schema: Any, path: str = "", depth: int = 0) -> None:
    """Raise ValueError naming the place (``properties.age.minimum: ...``) when ``schema`` is not a
    schema of the supported subset."""
    where = path or "the schema"
    if depth > MAX_DEPTH:
        raise ValueError(f"{where}: nested more than {MAX_DEPTH} schemas deep")
    if isinstance(schema, bool):
        return  # true: anything; false: nothing
    if not isinstance(schema, dict):
        raise ValueError(f"{where}: a schema is an object (or true/false), not {type(schema).__name__}")
    for key, value in schema.items():
        at = _at(path, key)
        if key not in KEYWORDS:
            raise ValueError(f"{path + ': ' if path else ''}{unknown_name(key, KEYWORDS, 'schema keyword')}; "
                             "jurist supports only these keywords, and refuses the others rather than ignore them")
        if key == "type":
            names = value if isinstance(value, list) else [value]
            if not names or not all(isinstance(n, str) and n in TYPES for n in names):
                raise ValueError(f"{at}: a type is one of {', '.join(TYPES)} (or a list of them), not {value!r}")
        elif key == "properties":
            if not isinstance(value, dict):
                raise ValueError(f"{at}: an object mapping each property to its schema")
            for name, sub in value.items():
                check_schema(sub, _at(at, name), depth + 1)
        elif key == "required":
            if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
                raise ValueError(f"{at}: a list of property names")
        elif key in ("additionalProperties", "items", "not"):
            if key == "items" and isinstance(value, list):
                raise ValueError(f"{at}: one schema for every element (tuple forms are not supported)")
            check_schema(value, at, depth + 1)
        elif key == "enum":
            if not isinstance(value, list) or not value:
                raise ValueError(f"{at}: a non-empty list of values")
        elif key in _BOUNDS:
            if not _number(value):
                raise ValueError(f"{at}: a finite number")
        elif key in _COUNTS:
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{at}: a whole number, 0 or more")
        elif key == "uniqueItems":
            if not isinstance(value, bool):
                raise ValueError(f"{at}: true or false")
        elif key in _SCHEMA_LISTS:
            if not isinstance(value, list) or not value:
                raise ValueError(f"{at}: a non-empty list of schemas")
            for n, sub in enumerate(value):
                check_schema(sub, _at(at, n), depth + 1)


def _type_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _is(value: Any, name: str) -> bool:
    kind = _type_of(value)
    if name == "integer":
        return kind == "number" and float(value).is_integer()
    return kind == name


def _same(a: Any, b: Any) -> bool:
    """JSON equality: 1 == 1.0, but true is not 1."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True) if _type_of(a) == _type_of(b) else False


def problem(value: Any, schema: Any, path: str = "$", depth: int = 0) -> str | None:
    """Why ``value`` does not validate against ``schema`` (the first problem, with its place such
    as ``$.items[2].name``), or None when it does."""
    if schema is True:
        return None
    if schema is False:
        return f"{path}: no value is allowed here"
    if depth > MAX_DEPTH:
        return f"{path}: nested more than {MAX_DEPTH} levels deep"
    s: dict[str, Any] = schema
    if "type" in s:
        names = s["type"] if isinstance(s["type"], list) else [s["type"]]
        if not any(_is(value, n) for n in names):
            return f"{path}: expected {' or '.join(names)}, got {_type_of(value)}"
    if "const" in s and not _same(value, s["const"]):
        return f"{path}: must be {json.dumps(s['const'])}"
    if "enum" in s and not any(_same(value, e) for e in s["enum"]):
        return f"{path}: must be one of {', '.join(json.dumps(e) for e in s['enum'])}"
    kind = _type_of(value)
    if kind == "number":
        for key, fails, word in (("minimum", lambda b: value < b, "at least"),
                                 ("maximum", lambda b: value > b, "at most"),
                                 ("exclusiveMinimum", lambda b: value <= b, "more than"),
                                 ("exclusiveMaximum", lambda b: value >= b, "less than")):
            if key in s and fails(s[key]):
                return f"{path}: must be {word} {s[key]:g}, got {value:g}"
    if kind == "string":
        if "minLength" in s and len(value) < s["minLength"]:
            return f"{path}: at least {s['minLength']} characters, got {len(value)}"
        if "maxLength" in s and len(value) > s["maxLength"]:
            return f"{path}: at most {s['maxLength']} characters, got {len(value)}"
    if kind == "array":
        if "minItems" in s and len(value) < s["minItems"]:
            return f"{path}: at least {s['minItems']} elements, got {len(value)}"
        if "maxItems" in s and len(value) > s["maxItems"]:
            return f"{path}: at most {s['maxItems']} elements, got {len(value)}"
        if s.get("uniqueItems") and len({json.dumps(v, sort_keys=True) for v in value}) < len(value):
            return f"{path}: the elements must be unique"
        if "items" in s:
            for n, element in enumerate(value):
                if (p := problem(element, s["items"], f"{path}[{n}]", depth + 1)) is not None:
                    return p
    if kind == "object":
        for name in s.get("required", []):
            if name not in value:
                return f"{path}: missing property {name!r}"
        properties = s.get("properties", {})
        for name, sub in value.items():
            at = f"{path}.{name}"
            if name in properties:
                p = problem(sub, properties[name], at, depth + 1)
            elif "additionalProperties" in s:
                extra = s["additionalProperties"]
                p = f"{path}: property {name!r} is not allowed" if extra is False else problem(sub, extra, at, depth + 1)
            else:
                p = None
            if p is not None:
                return p
    for sub in s.get("allOf", []):
        if (p := problem(value, sub, path, depth + 1)) is not None:
            return p
    if "anyOf" in s:
        found = [problem(value, sub, path, depth + 1) for sub in s["anyOf"]]
        if all(p is not None for p in found):
            return f"{path}: matches none of anyOf ({'; '.join(p for p in found if p)})"
    if "oneOf" in s:
        passed = sum(problem(value, sub, path, depth + 1) is None for sub in s["oneOf"])
        if passed != 1:
            return f"{path}: matches {passed} of oneOf's schemas, not exactly one"
    if "not" in s and problem(value, s["not"], path, depth + 1) is None:
        return f"{path}: matches the schema under \"not\""
    return None
