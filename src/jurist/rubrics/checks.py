"""Checks that need no model: a rubric with ``check`` instead of criteria or items.

A check looks at the session's answer (its last assistant turn) and passes or fails:

* ``{"equals": "Paris"}``: the answer, trimmed of surrounding white space, is that text (a list:
  any one of them);
* ``{"contains": "Paris"}`` / ``{"not_contains": ["I cannot", "As an AI"]}``: the answer holds
  the text (a list: every one of them) / holds none of them;
* ``{"regex": "^\\d{4}-\\d{2}-\\d{2}$"}``: ``re.search`` finds the pattern in the answer;
* ``{"json_schema": {...}}``: the answer (trimmed) parses as JSON and validates against the
  schema (:mod:`jurist.rubrics.schema_subset`: the keywords supported; others are refused);
* ``{"python": "module:function"}``: the user's own check, called as
  ``function(answer, input, expected)`` (``input``: the last user turn, ``""`` when there is
  none; ``expected``: the session's expected answers, a tuple, empty when there are none); it
  returns ``True``/``False``, ``(bool, reason)``, or a score on the rubric's scale (``(score,
  reason)`` too); a coroutine function is awaited, a plain one runs in a worker thread.

``case_sensitive`` (default true) applies to ``equals``, ``contains``, ``not_contains`` and
``regex``. The text ``{expected}`` in place of an ``equals``/``contains``/``not_contains`` text
stands for the session's expected answers (any one of them); a session without one is the
rubric's ``evaluation_failed`` with reason "no expected answer".

Everything is checked when the rubric is loaded: an unknown kind (with the closest known one),
two kinds in one check, a pattern that does not compile or is longer than
:data:`MAX_PATTERN_CHARS`, a schema keyword outside the subset, a ``python`` check that cannot be
imported. A check scores the rubric's scale maximum when it passes, its minimum when it fails,
with the reason; its ``judge_model`` is ``check``. A check that cannot decide (no assistant turn,
a ``python`` check that raises or returns something else, a regex that runs out of time, an
answer too long for a regex) is ``evaluation_failed`` with the reason, never a score.

Time: a regex is matched in a worker process stopped after
:data:`~jurist.rubrics.regex_worker.REGEX_TIMEOUT` seconds (:mod:`jurist.rubrics.regex_worker`),
on at most :data:`~jurist.rubrics.regex_worker.MAX_REGEX_TEXT` characters; a ``python`` check
is bounded by the rubric's time-out (``rubric_timeout``) like a judge call.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import math
import os
import re
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

from jurist.jsonfiles import MAX_JSON_DEPTH, unknown_name
from jurist.rubrics.regex_worker import MAX_REGEX_TEXT, RegexRunner, RegexTimeout
from jurist.rubrics.schema_subset import check_schema, problem

CHECK_MODEL = "check"  # the judge_model of a check's score
KINDS = ("equals", "contains", "not_contains", "regex", "json_schema", "python")
TEXT_KINDS = ("equals", "contains", "not_contains")
OPTIONS = ("case_sensitive",)
EXPECTED = "{expected}"  # in place of a text: the session's expected answers
MAX_PATTERN_CHARS = 1_000
NO_EXPECTED = "no expected answer"
_TARGET = re.compile(r"^(?P<module>[A-Za-z_][\w.]*):(?P<function>[A-Za-z_][\w.]*)$")
_SHOWN = 80  # characters of a text a reason quotes


@dataclass(frozen=True)
class Check:
    """A check as loaded: its kind and what it needs, compiled."""

    kind: str
    texts: tuple[str, ...] = ()
    case_sensitive: bool = True
    pattern: str = ""
    schema: Any = None
    target: str = ""
    function: Callable[..., Any] | None = None

    @property
    def uses_expected(self) -> bool:
        return EXPECTED in self.texts

    @property
    def flags(self) -> int:
        return 0 if self.case_sensitive else re.IGNORECASE


@dataclass(frozen=True)
class CheckResult:
    """A check's outcome: ``score`` (None: it could not decide) and the reason."""

    score: float | None
    reason: str


def _texts(kind: str, value: Any) -> tuple[str, ...]:
    texts = [value] if isinstance(value, str) else value
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        raise ValueError(f"{kind}: give a text or a non-empty list of texts, not {json.dumps(value)[:_SHOWN]}")
    if kind != "equals" and any(not t for t in texts):
        raise ValueError(f"{kind}: an empty text is in every answer; give the text to look for")
    return tuple(texts)


def import_target(target: Any) -> Callable[..., Any]:
    """The function ``module:function`` names, imported now; ValueError saying why not. A module
    that is not on Python's path is looked up in the working folder too."""
    match = _TARGET.match(target) if isinstance(target, str) else None
    if match is None:
        raise ValueError(f"python: give \"module:function\" (such as \"my_checks:is_polite\"), "
                         f"not {json.dumps(target)[:_SHOWN]}")
    module_name, function_name = match["module"], match["function"]
    try:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            here = os.getcwd()
            if exc.name != module_name.split(".")[0] or here in sys.path:
                raise
            sys.path.insert(0, here)  # for this import only: a module of the working folder
            try:
                module = importlib.import_module(module_name)
            finally:
                sys.path.remove(here)
    except ModuleNotFoundError as exc:
        raise ValueError(f"python: cannot import {module_name!r} ({exc}); it is looked up on Python's "
                         "path and in the working folder") from None
    except Exception as exc:  # the user's module failed while importing
        raise ValueError(f"python: importing {module_name!r} raised {type(exc).__name__}: {exc}") from None
    found: Any = module
    for part in function_name.split("."):
        if not hasattr(found, part):
            raise ValueError(f"python: module {module_name!r} has no {function_name!r}")
        found = getattr(found, part)
    if not callable(found):
        raise ValueError(f"python: {target!r} is not a function")
    return found  # type: ignore[no-any-return]


def parse_check(data: Any) -> Check:
    """A rubric's ``check`` validated and compiled; ValueError saying what is wrong."""
    if not isinstance(data, dict):
        raise ValueError(f"a check is an object such as {{\"contains\": \"Paris\"}}, not {type(data).__name__}")
    for key in data:
        if key not in KINDS and key not in OPTIONS:
            raise ValueError(unknown_name(str(key), (*KINDS, *OPTIONS), "check kind"))
    kinds = [k for k in data if k in KINDS]
    if not kinds:
        raise ValueError(f"the check names no kind: give one of {', '.join(KINDS)}")
    if len(kinds) > 1:
        raise ValueError(f"one kind per check, not {' and '.join(kinds)}: give each its own rubric")
    kind, value = kinds[0], data[kinds[0]]
    case_sensitive = data.get("case_sensitive", True)
    if not isinstance(case_sensitive, bool):
        raise ValueError("case_sensitive: true or false")
    if "case_sensitive" in data and kind in ("json_schema", "python"):
        raise ValueError(f"case_sensitive applies to {', '.join(KINDS[:4])}, not {kind}")
    if kind in TEXT_KINDS:
        return Check(kind, texts=_texts(kind, value), case_sensitive=case_sensitive)
    if kind == "regex":
        if not isinstance(value, str) or not value:
            raise ValueError("regex: give the pattern as text")
        if len(value) > MAX_PATTERN_CHARS:
            raise ValueError(f"regex: the pattern has {len(value):,} characters; at most {MAX_PATTERN_CHARS:,}")
        try:
            re.compile(value, 0 if case_sensitive else re.IGNORECASE)
        except re.error as exc:
            raise ValueError(f"regex: not a valid pattern: {exc}") from None
        return Check(kind, pattern=value, case_sensitive=case_sensitive)
    if kind == "json_schema":
        try:
            check_schema(value)
        except ValueError as exc:
            raise ValueError(f"json_schema: {exc}") from None
        return Check(kind, schema=value)
    return Check(kind, target=value, function=import_target(value))


def answer_of(messages: list[tuple[str, str]], role: str) -> str | None:
    """The last turn of ``role`` (``(role, content)`` pairs), None when there is none."""
    return next((content for r, content in reversed(messages) if r == role), None)


def _shown(text: str) -> str:
    return json.dumps(text if len(text) <= _SHOWN else text[:_SHOWN] + "…", ensure_ascii=False)


def _expand(text: str, expected: tuple[str, ...]) -> tuple[str, ...]:
    """A check's text: itself, or for ``{expected}`` the session's expected answers."""
    return expected if text == EXPECTED else (text,)


def _texts_for(check: Check, expected: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(t for x in check.texts for t in _expand(x, expected))


def _scored(passed: bool, reason: str, scale: tuple[float, float]) -> CheckResult:
    return CheckResult(scale[1] if passed else scale[0], ("passed: " if passed else "failed: ") + reason)


def _text_check(check: Check, answer: str, expected: tuple[str, ...], scale: tuple[float, float]) -> CheckResult:
    fold = (lambda s: s) if check.case_sensitive else str.casefold
    got = fold(answer.strip() if check.kind == "equals" else answer)
    if check.kind == "equals":
        wanted = _texts_for(check, expected)
        hit = next((t for t in wanted if fold(t.strip()) == got), None)
        if hit is not None:
            return _scored(True, f"the answer equals {_shown(hit)}", scale)
        return _scored(False, f"the answer {_shown(answer.strip())} equals none of "
                              f"{', '.join(_shown(t) for t in wanted)}", scale)
    if check.kind == "contains":
        # a text given as {expected} is found when any one expected answer is
        hits = {t: next((x for x in _expand(t, expected) if fold(x) in got), None) for t in check.texts}
        missing = [t for t, hit in hits.items() if hit is None]
        if not missing:
            return _scored(True, "the answer contains " + ", ".join(_shown(h) for h in hits.values() if h), scale)
        shown = ", ".join("an expected answer" if t == EXPECTED else _shown(t) for t in missing)
        return _scored(False, f"the answer does not contain {shown}", scale)
    found = [t for t in _texts_for(check, expected) if fold(t) in got]
    if found:
        return _scored(False, f"the answer contains {', '.join(_shown(t) for t in found)}", scale)
    return _scored(True, "the answer contains none of " + ", ".join(_shown(t) for t in _texts_for(check, expected)),
                   scale)


def _schema_check(check: Check, answer: str, scale: tuple[float, float]) -> CheckResult:
    try:
        value = json.loads(answer.strip())
    except json.JSONDecodeError as exc:
        return _scored(False, f"the answer is not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})", scale)
    except RecursionError:
        return _scored(False, f"the answer's JSON is nested too deep (more than {MAX_JSON_DEPTH} levels)", scale)
    found = problem(value, check.schema)
    if found is None:
        return _scored(True, "the answer is JSON that validates against the schema", scale)
    return _scored(False, f"the answer's JSON does not validate: {found}", scale)


def _user_result(value: Any, scale: tuple[float, float], target: str) -> CheckResult:
    """What a ``python`` check returned, as a result (an unusable value: no score, and why)."""
    reason: Any = None
    if isinstance(value, tuple) and len(value) == 2:
        value, reason = value
        if not isinstance(reason, str):
            return CheckResult(None, f"{target} returned a reason that is not text ({type(reason).__name__})")
    if isinstance(value, bool):
        return _scored(value, reason or f"{target} returned {value}", scale)
    if isinstance(value, (int, float)) and math.isfinite(value):
        lo, hi = scale
        if not lo <= value <= hi:
            return CheckResult(None, f"{target} returned the score {value:g}, outside the scale {lo:g}..{hi:g}")
        return CheckResult(float(value), reason or f"{target} scored {value:g}")
    return CheckResult(None, f"{target} returned {type(value).__name__}: a check returns true/false, "
                             "(true/false, reason) or a score on the rubric's scale")


async def _user_check(check: Check, answer: str, question: str, expected: tuple[str, ...],
                      scale: tuple[float, float], timeout: float) -> CheckResult:
    fn = check.function
    assert fn is not None
    try:
        if inspect.iscoroutinefunction(fn):
            value = await asyncio.wait_for(fn(answer, question, expected), timeout)
        else:
            value = await asyncio.wait_for(asyncio.to_thread(fn, answer, question, expected), timeout)
    except asyncio.TimeoutError:
        return CheckResult(None, f"{check.target} took longer than {timeout:g} s")
    except Exception as exc:  # the user's check failed: this rubric's failure, with the reason
        return CheckResult(None, f"{check.target} raised {type(exc).__name__}: {exc}")
    return _user_result(value, scale, check.target)


async def run_check(check: Check, messages: list[tuple[str, str]], expected: tuple[str, ...],
                    scale: tuple[float, float], *, regex: RegexRunner, timeout: float) -> tuple[CheckResult, float]:
    """A check's result on a session (its turns as ``(role, content)`` pairs) and the milliseconds
    it took."""
    started = time.perf_counter()
    result = await _run(check, messages, expected, scale, regex, timeout)
    return result, round((time.perf_counter() - started) * 1000.0, 3)


async def _run(check: Check, messages: list[tuple[str, str]], expected: tuple[str, ...],
               scale: tuple[float, float], regex: RegexRunner, timeout: float) -> CheckResult:
    answer = answer_of(messages, "assistant")
    if answer is None:
        return CheckResult(None, "the session has no assistant turn to check")
    if check.uses_expected and not expected:
        return CheckResult(None, NO_EXPECTED)
    if check.kind in TEXT_KINDS:
        return _text_check(check, answer, expected, scale)
    if check.kind == "json_schema":
        return _schema_check(check, answer, scale)
    if check.kind == "python":
        return await _user_check(check, answer, answer_of(messages, "user") or "", expected, scale, timeout)
    if len(answer) > MAX_REGEX_TEXT:
        return CheckResult(None, f"the answer has {len(answer):,} characters; a regex check reads at most "
                                 f"{MAX_REGEX_TEXT:,}")
    try:
        found = await asyncio.to_thread(regex.search, check.pattern, check.flags, answer)
    except RegexTimeout as exc:
        return CheckResult(None, str(exc))
    except RuntimeError as exc:
        return CheckResult(None, f"the regex could not be matched: {exc}")
    return _scored(found, f"the pattern {_shown(check.pattern)} {'matches' if found else 'does not match'} "
                          "the answer", scale)
