"""Bad input, generated: JSON values with lone surrogates, NUL and control characters, numbers no
float holds (``1e400``, 5,000 digits), NaN and infinities, booleans where numbers go, deep nesting,
unknown fields, wrong types in every place of a valid example, invalid UTF-8 and random bytes.

:func:`dump` writes a value as JSON text the way a hostile file or client may (``json`` cannot:
it refuses a 5,000-digit number and writes no ``1e400``); what it writes is ASCII, a surrogate
as its ``\\ud800`` escape. Every strategy is bounded so that one example is cheap.
"""

from __future__ import annotations

import json
import random
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

#: The settings of every property here: reproducible (the same examples on every run, as CI needs),
#: no per-example deadline (a slow machine is not a failure), bounded in examples, and no shrinking (a
#: failure is reported as it was found: shrinking a deep or huge input costs minutes).
PROPERTY = settings(derandomize=True, deadline=None, database=None, max_examples=60,
                    phases=[Phase.explicit, Phase.reuse, Phase.generate],
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.data_too_large, HealthCheck.large_base_example])

DEEP = 100_000  # the fixed deep-nesting case: beyond any recursion limit


class Raw(str):
    """A JSON token written as it is (``1e400``, ``NaN``, a 5,000-digit number)."""


#: Numbers as a hostile writer spells them, and the values that stand where numbers go.
NUMBER_TOKENS = ["1e400", "-1e400", "1e-400", "NaN", "Infinity", "-Infinity", "-0", "1e308", "-1e308",
                 "9" * 400, "-" + "9" * 400, "9" * 5000, "0.1", "1.5", "-1", "0", "4", "5", "7", "1e2",
                 "123456789012345678901234567890"]

#: Every character, lone surrogates and NUL included.
characters = st.characters(codec=None, exclude_categories=())
#: Texts of them, now and then one of the spellings that break things.
texts = st.one_of(
    st.text(characters, max_size=30),
    st.sampled_from(["\ud800", "a\udcffb", "\x00", "a\x00b", "\u2028", "\x1b[2J", "", " ", "\ufeff",
                     "😀", "0", "1e400", "NaN", "true", "null", "[]", "{}", "../x", "%s%n", "{x}", "\\"]),
)
raw_numbers = st.sampled_from(NUMBER_TOKENS).map(Raw)
leaves = st.one_of(
    st.none(), st.booleans(), raw_numbers,
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    texts,
)
#: Any JSON value, a few levels deep.
json_values = st.recursive(
    leaves,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(texts, inner, max_size=4)),
    max_leaves=12,
)


def dump(value: Any) -> str:
    """``value`` as JSON text, ASCII only (a surrogate as its escape); :class:`Raw` tokens as they
    are, NaN and infinities as ``NaN`` / ``Infinity`` (what Python's json writes and reads)."""
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{dump(str(k))}: {dump(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(dump(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=True, allow_nan=True)


def nested(depth: int, inner: str = "1", *, objects: bool = False) -> str:
    """``inner`` inside ``depth`` arrays (or objects ``{"a": ...}``)."""
    if objects:
        return '{"a": ' * depth + inner + "}" * depth
    return "[" * depth + inner + "]" * depth


def places(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON value (the paths to each value inside it, the root's ``()`` first)."""
    out = [path]
    if isinstance(value, dict):
        for k, v in value.items():
            out += places(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += places(v, (*path, i))
    return out


def replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {k: (replaced(v, rest, new) if k == head else v) for k, v in value.items()}
    return [replaced(v, rest, new) if i == head else v for i, v in enumerate(value)]


def at(value: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        value = value[part]
    return value


@st.composite
def mutated(draw: st.DrawFn, example: Any) -> Any:
    """``example`` (a valid file's JSON value) with one to three changes: a value replaced by any
    other (a wrong type, a boolean or a huge number where a number goes, a surrogate in a text), an
    unknown field added, a field removed, or a value nested deep."""
    value = example
    for _ in range(draw(st.integers(1, 3))):
        spots = places(value)
        path = draw(st.sampled_from(spots))
        target = at(value, path)
        how = draw(st.sampled_from(["replace", "replace", "number", "unknown", "drop", "deep"]))
        if how == "unknown" and isinstance(target, dict):
            key = draw(st.one_of(texts, st.sampled_from(["scale", "weight", "id", "contnet", "__proto__"])))
            value = replaced(value, path, {**target, key: draw(json_values)})
        elif how == "drop" and isinstance(target, dict) and target:
            gone = draw(st.sampled_from(sorted(target)))
            value = replaced(value, path, {k: v for k, v in target.items() if k != gone})
        elif how == "number":
            value = replaced(value, path, draw(st.one_of(raw_numbers, st.booleans())))
        elif how == "deep":
            value = replaced(value, path, Raw(nested(draw(st.integers(10, 3000)), dump(target))))
        else:
            value = replaced(value, path, draw(json_values))
    return value


def splice_bytes(data: bytes, seed: int) -> bytes:
    """``data`` with a few bytes that are not UTF-8 (a lone continuation byte, an encoded surrogate,
    an overlong NUL, a truncated sequence) put in at places chosen by ``seed``."""
    rng = random.Random(seed)
    bad = [b"\x80", b"\xff", b"\xed\xa0\x80", b"\xc0\x80", b"\xe2\x82", b"\xf4\x90\x80\x80"]
    out = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        at = rng.randint(0, len(out))
        out[at:at] = rng.choice(bad)
    return bytes(out)


def json_file(example: Any) -> st.SearchStrategy[bytes]:
    """The bytes of a bad JSON file modelled on ``example``."""
    text = dump(example).encode()
    return st.one_of(
        mutated(example).map(lambda v: dump(v).encode()),
        mutated(example).map(lambda v: dump(v).encode()),
        json_values.map(lambda v: dump(v).encode()),
        st.binary(max_size=200),
        st.integers(0, 2**32).map(lambda seed: splice_bytes(text, seed)),
        st.tuples(st.integers(1, 5000), st.booleans()).map(lambda d: nested(d[0], objects=d[1]).encode()),
        st.integers(1, len(text)).map(lambda n: text[:n]),  # cut short
    )


def jsonl_file(lines: list[Any]) -> st.SearchStrategy[bytes]:
    """The bytes of a bad JSONL file modelled on ``lines`` (each line's JSON value): one line or
    two changed (or the whole file replaced by bytes)."""
    good = [dump(v) for v in lines]

    @st.composite
    def changed(draw: st.DrawFn) -> bytes:
        out = list(good)
        for _ in range(draw(st.integers(1, 2))):
            n = draw(st.integers(0, len(out) - 1))
            out[n] = draw(st.one_of(
                mutated(lines[n]).map(dump), json_values.map(dump),
                st.tuples(st.integers(1, 5000), st.booleans()).map(lambda d: nested(d[0], objects=d[1])),
                st.text(characters, max_size=40).map(lambda t: t.replace("\n", " ")),  # not JSON at all
            ))
        return "\n".join(out).encode("utf-8", "surrogatepass") + b"\n"

    text = "\n".join(good).encode() + b"\n"
    return st.one_of(changed(), changed(), st.binary(max_size=200),
                     st.integers(0, 2**32).map(lambda seed: splice_bytes(text, seed)))
