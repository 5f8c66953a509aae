"""Turning a judge's reply into a verdict, or saying exactly why not.

Accepted: a JSON object (bare, in a code fence, or with prose around it) and
the ``SCORE: n`` / ``REASONING: ...`` format. Every rejection raises
:class:`JudgeParseError` with a message the re-ask shows to the model.

A judge often quotes the transcript before its verdict, and a transcript can
hold a verdict of its own (``SCORE: 5``). So the verdict is read from what the
judge states, never from the first thing that looks like one:

* text the judge quotes is not its statement: lines quoted markdown-style
  (``> SCORE: 5``) and blocks between a prompt's delimiter tags
  (``<chat_session>`` ... ``</chat_session>``);
* a reply that is one JSON object (bare or fenced) is the verdict, whatever its
  strings hold; JSON nested in another object is part of that object;
* otherwise every verdict the reply states (a JSON object with the field, or a
  ``SCORE:`` line) counts: when they agree, the last one is the verdict, its
  reasoning the one in the same object or after the same line; when they differ,
  the reply is a parse failure (the judge is asked again), never the first one.
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass
from collections.abc import Mapping
from typing import Any

from pydantic import JsonValue

from jurist.errors import JudgeParseError
from jurist.judges.prompting import DELIMITERS

#: The JSON schema of a number from 0 to 1 (a confidence), in hundredths: as an enum,
#: every constrained decoder holds a reply to the range (llama.cpp's grammars do not
#: hold a number to minimum and maximum).
UNIT_INTERVAL: dict[str, JsonValue] = {"type": "number", "minimum": 0, "maximum": 1,
                                 "enum": [i / 100 for i in range(101)]}

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)
# (A line's lead-in is matched within the line: "^\s*" would run on over every blank line below
# it, again from each, in a reply of many blank lines.)
_SCORE = re.compile(r"^[ \t*#_>-]*score[\s*_]*[:=][\s*_]*(-?\d+(?:\.\d+)?)", re.IGNORECASE | re.MULTILINE)
_JSON_SCORE = re.compile(r'"score"\s*:\s*"?(-?\d+(?:\.\d+)?)', re.IGNORECASE)
_REASONING_LABEL = re.compile(r"^[ \t*#_-]*reasoning[\s*_]*[:=][\s*_]*", re.IGNORECASE | re.MULTILINE)


def extract_json(text: str) -> dict[str, JsonValue]:
    """The JSON object the judge states: fenced, bare, or surrounded by prose, outside the text
    it quotes (see the module's notes). Two top-level objects that differ are a parse failure
    (the judge is asked again), never the first one; the same object repeated is that object."""
    if not text or not text.strip():
        raise JudgeParseError("the reply was empty", raw=text)
    objects = [obj for _, _, obj in _json_objects(text, _blank(text, _quoted(text)))]
    if not objects:
        if _quoted(text) and _json_objects(text, text):
            raise JudgeParseError(_ONLY_QUOTED.format("a JSON object"), raw=text)
        raise JudgeParseError("the reply holds no complete JSON object", raw=text)
    objects = [obj for obj in objects if obj] or objects  # a "{}" in the prose is not a verdict
    if any(obj != objects[-1] for obj in objects):
        raise JudgeParseError("the reply states different JSON objects; give one JSON object, once", raw=text)
    return objects[-1]


_QUOTED_LINE = re.compile(r"^[ \t]*>.*$", re.MULTILINE)
_NAMES = "|".join(sorted(map(re.escape, DELIMITERS), key=len, reverse=True))
_OPENING = re.compile(rf"<[ \t]*({_NAMES})(?![\w-])[^<>\n]{{0,200}}>", re.IGNORECASE)
_CLOSING = re.compile(rf"<[ \t]*/[ \t]*({_NAMES})[ \t]*>", re.IGNORECASE)
_OBJECT_START = re.compile(r'\{\s*["}]')  # where a JSON object can start: a key, or its end


def _quoted(text: str) -> list[tuple[int, int]]:
    """The spans of ``text`` the judge quotes: lines starting with ``>``, and blocks from a
    delimiter's opening tag to its closing one (each opening tag matched with the first closing
    tag of its name after it, found by bisection: linear in the reply, however many tags)."""
    spans = [m.span() for m in _QUOTED_LINE.finditer(text)]
    closings: dict[str, list[tuple[int, int]]] = {}
    for m in _CLOSING.finditer(text):
        closings.setdefault(m.group(1).lower(), []).append(m.span())
    if not closings:
        return spans
    after = 0
    for m in _OPENING.finditer(text):
        ends = closings.get(m.group(1).lower(), [])
        i = bisect.bisect_left(ends, (m.end(), 0))
        if m.start() >= after and i < len(ends):
            spans.append((m.start(), ends[i][1]))
            after = ends[i][1]
    return spans


_ONLY_QUOTED = ("the reply states {} only inside text it quotes (a line starting with '>', or between "
                "delimiter tags such as <chat_session>); state your own verdict outside quoted text")


def _blank(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with the spans put out of sight: every character but a line break is a space,
    so offsets and lines stay where they were."""
    chars = list(text)
    for start, end in spans:
        for i in range(start, end):
            if chars[i] != "\n":
                chars[i] = " "
    return "".join(chars)


@dataclass
class _Statement:
    """A verdict the judge states: a JSON object with the field, or a line ``FIELD: value``."""

    start: int
    end: int
    value: object
    span: tuple[int, int] | None  # where its value is written (of a JSON object: found in score_span)
    obj: dict[str, object] | None = None  # the JSON object it is in (keys in lower case)


def _statements(text: str, key: str, line: re.Pattern[str] | None,
                *, quoted_too: bool = False) -> tuple[list[_Statement], str, bool]:
    """Every verdict ``text`` states outside the text it quotes (``quoted_too``: in it as well),
    in order: the top-level JSON objects holding ``key`` and the lines ``line`` matches. Also the
    text with the quoted parts and the JSON objects blanked (where a ``REASONING:`` label is
    looked for), and whether the reply holds any JSON object at all."""
    quoted = [] if quoted_too else _quoted(text)
    masked = _blank(text, quoted)
    found: list[_Statement] = []
    objects: list[tuple[int, int]] = []
    for at, end, obj in _json_objects(text, masked):
        objects.append((at, end))
        low = _lower_keys(obj)
        if key in low:
            found.append(_Statement(at, end, low[key], None, low))
    masked = _blank(masked, objects)
    if line is not None:
        found += [_Statement(masked.rfind("\n", 0, m.start(1)) + 1, m.end(), m.group(1), m.span(1))
                  for m in line.finditer(masked)]
    return sorted(found, key=lambda s: s.start), masked, bool(objects)


def _json_objects(text: str, masked: str) -> list[tuple[int, int, dict[str, JsonValue]]]:
    """The top-level JSON objects of ``text`` (start, end, object) that start where ``masked``
    (the text with its quoted parts blanked) still has a ``{``; nested ones are part of theirs."""
    decoder = json.JSONDecoder(strict=False)  # a raw line break inside a string is still the string
    out: list[tuple[int, int, dict[str, JsonValue]]] = []
    at = masked.find("{")
    while at >= 0:
        if not _OBJECT_START.match(text, at):
            at = masked.find("{", at + 1)
            continue
        try:
            obj, end = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            at = masked.find("{", at + 1)
            continue
        except RecursionError:
            raise JudgeParseError("the reply's JSON is nested too deep to read; give one flat JSON object",
                                  raw=text) from None
        except ValueError:  # an integer of more digits than Python reads (4,300)
            raise JudgeParseError("the reply's JSON holds a number too long to read", raw=text) from None
        if isinstance(obj, dict):
            out.append((at, end, obj))
            at = masked.find("{", end)
        else:
            at = masked.find("{", at + 1)
    return out


def _only_quoted(text: str, key: str, line: re.Pattern[str] | None) -> bool:
    """Whether ``text``, which states no verdict of its own, holds one in the text it quotes."""
    return bool(_quoted(text)) and bool(_statements(text, key, line, quoted_too=True)[0])


def _stated(text: str, key: str, line: re.Pattern[str], what: str, as_line: str) -> tuple[list[_Statement], str]:
    """The verdicts ``text`` states of ``key`` and its masked text (as :func:`_statements`), or the
    parse failure that says why there is none: an empty reply, one stated only in quoted text,
    or neither a JSON object with ``key`` nor ``as_line``."""
    found, masked, _ = _statements(text or "", key, line)
    if not found:
        if not text or not text.strip():
            raise JudgeParseError("the reply was empty", raw=text)
        if _only_quoted(text, key, line):
            raise JudgeParseError(_ONLY_QUOTED.format(what), raw=text)
        raise JudgeParseError(f'found neither a JSON object with "{key}" nor {as_line}', raw=text)
    return found, masked


def _line_reasoning(text: str, masked: str, chosen: _Statement, before: int) -> str:
    """The reasoning that goes with the verdict line ``chosen``: after it, else just before it
    (after ``before``, where the judge's previous statement ended)."""
    after = _REASONING_LABEL.search(masked, chosen.end)
    if after is not None:
        return text[after.end():].strip()
    labels = list(_REASONING_LABEL.finditer(masked, before, chosen.start))
    return text[labels[-1].end():chosen.start].strip() if labels else ""


def _lower_keys(obj: Mapping[str, object]) -> dict[str, object]:
    return {str(k).lower(): v for k, v in obj.items()}


def _number(value: Any, what: str, raw: str) -> float:
    if isinstance(value, bool):
        raise JudgeParseError(f"{what} must be a number, got {value!r}", raw=raw)
    if isinstance(value, (int, float)):
        try:
            out = float(value)
        except OverflowError:  # an integer beyond any float
            raise JudgeParseError(f"{what} must be a finite number", raw=raw) from None
    elif isinstance(value, str) and re.fullmatch(r"\s*-?\d+(\.\d+)?\s*", value):
        out = float(value)
    else:
        raise JudgeParseError(f"{what} must be a number, got {value!r}", raw=raw)
    if out != out or out in (float("inf"), float("-inf")):
        raise JudgeParseError(f"{what} must be a finite number", raw=raw)
    return out


@dataclass
class ScoreReply:
    score: float
    reasoning: str


def parse_score(text: str, scale: tuple[float, float]) -> ScoreReply:
    """A score on ``scale`` (inclusive) and its reasoning: the score the judge states (see the
    module's notes); two different scores are a parse failure."""
    lo, hi = scale
    found, masked = _stated(text, "score", _SCORE, "a score", 'a line "SCORE: <number>"')
    scores = [_number(s.value, "score", text) for s in found]
    if len(set(scores)) > 1:
        listed = ", ".join(f"{v:g}" for v in dict.fromkeys(scores))
        raise JudgeParseError(
            f"the reply states different scores ({listed}); give one score, once, as the format asks", raw=text)
    chosen, score = found[-1], scores[-1]
    if chosen.obj is not None:
        obj = chosen.obj
        reasoning = str(obj.get("reasoning") or obj.get("reason") or obj.get("explanation") or "").strip()
    else:
        reasoning = _line_reasoning(text, masked, chosen, found[-2].end if len(found) > 1 else 0)
    if not lo <= score <= hi:
        raise JudgeParseError(f"score {score:g} is outside the scale {lo:g}-{hi:g}", raw=text)
    return ScoreReply(score=score, reasoning=reasoning)


def score_span(text: str) -> tuple[int, int] | None:
    """Where the score's number is in ``text`` (start, end), found as :func:`parse_score`
    reads it: the last score the reply states, in a JSON ``"score": n`` or a ``SCORE: n`` line."""
    found, _, _ = _statements(text, "score", _SCORE)
    if not found:
        return None
    chosen = found[-1]
    if chosen.obj is None:
        return chosen.span
    spans = [m for m in _JSON_SCORE.finditer(text, chosen.start, chosen.end)]
    same = [m for m in spans if str(chosen.value).strip() == m.group(1)
            or isinstance(chosen.value, (int, float)) and float(m.group(1)) == chosen.value]
    return (same or spans)[0].span(1) if spans else None


@dataclass
class ItemReply:
    met: bool
    reasoning: str
    confidence: float | None = None  # from a meaning match (the local judge), with its evidence
    evidence: str | None = None


@dataclass(frozen=True)
class DecidedReplies:
    """What an undecided item-based rubric did decide (``Uncertain.decided``): a reply per item, in
    the rubric's order, None for an item left undecided."""

    replies: tuple[ItemReply | None, ...]


_TRUE = {"true", "yes", "met", "y", "1"}
_FALSE = {"false", "no", "not met", "unmet", "n", "0"}


def parse_items(text: str, item_ids: list[str]) -> dict[str, ItemReply]:
    """Per-item ``met`` decisions; every id must be answered. The decisions are the JSON
    object the judge states (see the module's notes); two objects that decide an item
    differently are a parse failure."""
    found, _, any_json = _statements(text or "", "items", None)
    if not found:
        if any_json:
            raise JudgeParseError('the JSON object needs an "items" list', raw=text)
        if _only_quoted(text, "items", None):
            raise JudgeParseError(_ONLY_QUOTED.format("its decisions"), raw=text)
        if not text or not text.strip():
            raise JudgeParseError("the reply was empty", raw=text)
        raise JudgeParseError("the reply holds no complete JSON object", raw=text)
    decisions = [_items(s.obj or {}, item_ids, text) for s in found]
    if any({k: v.met for k, v in d.items()} != {k: v.met for k, v in decisions[-1].items()} for d in decisions):
        raise JudgeParseError("the reply states different decisions for the same items; give one JSON object",
                              raw=text)
    return decisions[-1]


def _items(obj: Mapping[str, object], item_ids: list[str], text: str) -> dict[str, ItemReply]:
    items = obj.get("items")
    if not isinstance(items, list):
        raise JudgeParseError('the JSON object needs an "items" list', raw=text)
    out: dict[str, ItemReply] = {}
    for entry in items:
        if not isinstance(entry, dict):
            raise JudgeParseError('each entry of "items" must be an object with "id" and "met"', raw=text)
        entry = _lower_keys(entry)
        item_id = str(entry.get("id", "")).strip()
        if item_id not in item_ids:
            continue  # an id the judge invented is ignored
        met = entry.get("met")
        if isinstance(met, str):
            low = met.strip().lower()
            met = True if low in _TRUE else False if low in _FALSE else None
        if not isinstance(met, bool):
            raise JudgeParseError(f'item {item_id!r}: "met" must be true or false', raw=text)
        out[item_id] = ItemReply(met=met, reasoning=str(entry.get("reasoning") or "").strip())
    missing = [i for i in item_ids if i not in out]
    if missing:
        raise JudgeParseError(f"no decision for item(s) {', '.join(missing)}", raw=text)
    return out


#: A pairwise judge's answers: answer A (shown first), answer B (shown second), or neither.
PREFER_A, PREFER_B, PREFER_NEITHER = "A", "B", "tie"
_WINNER_LINE = re.compile(r"^[ \t*#_>-]*winner[\s*_]*[:=][\s*_\"']*([^\n\"'*]*)", re.IGNORECASE | re.MULTILINE)
_WINNERS = {"a": PREFER_A, "answer a": PREFER_A, "[[a]]": PREFER_A, "b": PREFER_B, "answer b": PREFER_B,
            "[[b]]": PREFER_B, "tie": PREFER_NEITHER, "neither": PREFER_NEITHER, "[[c]]": PREFER_NEITHER,
            "equal": PREFER_NEITHER}


@dataclass
class PreferenceReply:
    winner: str  # PREFER_A, PREFER_B or PREFER_NEITHER
    reasoning: str


def parse_preference(text: str) -> PreferenceReply:
    """A pairwise verdict: a JSON object with ``"winner": "A" | "B" | "tie"`` (and its
    ``reasoning``), or a line ``WINNER: A``."""
    found, masked = _stated(text, "winner", _WINNER_LINE, "a winner", 'a line "WINNER: A|B|tie"')
    winners = []
    for s in found:
        raw = s.value
        winner = _WINNERS.get(" ".join(raw.split()).lower().strip(".")) if isinstance(raw, str) else None
        if winner is None:
            raise JudgeParseError(f'"winner" must be "A", "B" or "tie", got {str(raw)[:40]!r}', raw=text)
        winners.append(winner)
    if len(set(winners)) > 1:
        raise JudgeParseError("the reply names different winners; name one, once, as the format asks", raw=text)
    chosen = found[-1]
    if chosen.obj is not None:
        reasoning = str(chosen.obj.get("reasoning") or chosen.obj.get("reason") or "").strip()
    else:
        reasoning = _line_reasoning(text, masked, chosen, found[-2].end if len(found) > 1 else 0)
    return PreferenceReply(winner=winners[-1], reasoning=reasoning)
