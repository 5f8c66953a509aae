"""Turning a judge's reply into a verdict, or saying exactly why not.

Accepted: a JSON object (bare, in a code fence, or with prose around it) and
the ``SCORE: n`` / ``REASONING: ...`` format. Every rejection raises
:class:`JudgeParseError` with a message the re-ask shows to the model.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from collections.abc import Mapping
from typing import Any

from pydantic import JsonValue

from jurist.errors import JudgeParseError

#: The JSON schema of a number from 0 to 1 (a confidence), in hundredths: as an enum,
#: every constrained decoder holds a reply to the range (llama.cpp's grammars do not
#: hold a number to minimum and maximum).
UNIT_INTERVAL: dict[str, JsonValue] = {"type": "number", "minimum": 0, "maximum": 1,
                                 "enum": [i / 100 for i in range(101)]}

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)
_SCORE = re.compile(r"^[\s*#_>-]*score[\s*_]*[:=][\s*_]*(-?\d+(?:\.\d+)?)", re.IGNORECASE | re.MULTILINE)
_JSON_SCORE = re.compile(r'"score"\s*:\s*"?(-?\d+(?:\.\d+)?)', re.IGNORECASE)
_REASONING = re.compile(r"^[\s*#_>-]*reasoning[\s*_]*[:=][\s*_]*(.*)", re.IGNORECASE | re.MULTILINE | re.DOTALL)


def extract_json(text: str) -> dict[str, JsonValue]:
    """The first JSON object in ``text``: fenced, bare, or surrounded by prose."""
    if not text or not text.strip():
        raise JudgeParseError("the reply was empty", raw=text)
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    decoder = json.JSONDecoder(strict=False)  # a raw line break inside a string is still the string
    for chunk in candidates:
        for i, ch in enumerate(chunk):
            if ch != "{":
                continue
            try:
                obj, _ = decoder.raw_decode(chunk, i)
            except json.JSONDecodeError:
                continue
            if isinstance(obj, dict):
                return obj
    raise JudgeParseError("the reply holds no complete JSON object", raw=text)


def _lower_keys(obj: Mapping[str, object]) -> dict[str, object]:
    return {str(k).lower(): v for k, v in obj.items()}


def _number(value: Any, what: str, raw: str) -> float:
    if isinstance(value, bool):
        raise JudgeParseError(f"{what} must be a number, got {value!r}", raw=raw)
    if isinstance(value, (int, float)):
        out = float(value)
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
    """A score on ``scale`` (inclusive) and its reasoning."""
    lo, hi = scale
    score: float | None = None
    reasoning = ""
    try:
        obj = _lower_keys(extract_json(text))
    except JudgeParseError:
        obj = None
    if obj is not None and "score" in obj:
        score = _number(obj["score"], "score", text)
        reasoning = str(obj.get("reasoning") or obj.get("reason") or obj.get("explanation") or "").strip()
    else:
        m = _SCORE.search(text or "")
        if m is None:
            if not text or not text.strip():
                raise JudgeParseError("the reply was empty", raw=text)
            raise JudgeParseError(
                'found neither a JSON object with "score" nor a line "SCORE: <number>"', raw=text
            )
        score = float(m.group(1))
        r = _REASONING.search(text)
        reasoning = r.group(1).strip() if r else ""
    if not lo <= score <= hi:
        raise JudgeParseError(f"score {score:g} is outside the scale {lo:g}-{hi:g}", raw=text)
    return ScoreReply(score=score, reasoning=reasoning)


def score_span(text: str) -> tuple[int, int] | None:
    """Where the score's number is in ``text`` (start, end), found as :func:`parse_score`
    reads it: a JSON ``"score": n`` first, else a ``SCORE: n`` line."""
    m = _JSON_SCORE.search(text) or _SCORE.search(text)
    return m.span(1) if m else None


@dataclass
class ItemReply:
    met: bool
    reasoning: str
    confidence: float | None = None  # from a meaning match (the local judge), with its evidence
    evidence: str | None = None


_TRUE = {"true", "yes", "met", "y", "1"}
_FALSE = {"false", "no", "not met", "unmet", "n", "0"}


def parse_items(text: str, item_ids: list[str]) -> dict[str, ItemReply]:
    """Per-item ``met`` decisions; every id must be answered."""
    obj = _lower_keys(extract_json(text))
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
_WINNER_LINE = re.compile(r"^[\s*#_>-]*winner[\s*_]*[:=][\s*_\"']*([^\n\"'*]*)", re.IGNORECASE | re.MULTILINE)
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
    try:
        obj: dict[str, object] | None = _lower_keys(extract_json(text))
    except JudgeParseError:
        obj = None
    if obj is not None and "winner" in obj:
        raw, reasoning = obj["winner"], str(obj.get("reasoning") or obj.get("reason") or "").strip()
    else:
        m = _WINNER_LINE.search(text or "")
        if m is None:
            if not text or not text.strip():
                raise JudgeParseError("the reply was empty", raw=text)
            raise JudgeParseError('found neither a JSON object with "winner" nor a line "WINNER: A|B|tie"', raw=text)
        raw = m.group(1)
        r = _REASONING.search(text)
        reasoning = r.group(1).strip() if r else ""
    winner = _WINNERS.get(" ".join(str(raw).split()).lower().strip(".")) if isinstance(raw, str) else None
    if winner is None:
        raise JudgeParseError(f'"winner" must be "A", "B" or "tie", got {str(raw)[:40]!r}', raw=text)
    return PreferenceReply(winner=winner, reasoning=reasoning)
