"""The meaning questions answered by an LLM: :class:`LLMMeaningJudge`.

The same four questions as the offline embedding judge
(:class:`~jurist.models.local.LocalJudge`), with the same result types, so a
capability takes any :class:`~jurist.models.base.MeaningJudge`:

* ``expresses(text, statements)``: does the text express each statement?
* ``coverage(question, answer, parts=None)``: which parts of the question the
  answer covers (the model splits the question when ``parts`` is None);
* ``relevance(query, passages)``: a 0..1 score per passage;
* ``support(answer, sources)``: which sentences of the answer (split by the
  model) the sources support.

One judge call per question, never one per statement. Each goes through a
:class:`~jurist.judges.judge.Judge` (JSON-schema output, one re-ask showing the
parse error, every call on record under the purpose tags below). Untrusted text
is quoted between tags (``<text>``, ``<passage id="p1">`` ...) by
:mod:`jurist.judges.prompting`, which escapes any delimiter tag in it
(``</text>`` becomes ``</text_>``). A reply that still does
not validate after the re-ask raises :class:`~jurist.errors.JudgeParseError`; a
failed model call raises its :class:`~jurist.errors.ModelError`. Nothing is
invented on failure: the caller decides the policy.
"""

from __future__ import annotations

from dataclasses import dataclass

from jurist.errors import JudgeParseError
from jurist.judges.judge import Judge
from jurist.judges.parsing import extract_json
from jurist.judges.prompting import escape as escape_data
from jurist.judges.prompting import quote, quote_all
from jurist.judges.templates import PromptSource, PromptTemplate, builtin
from jurist.models.base import CoverageResult, RelevanceScore, StatementCheck, SupportResult
from jurist.models.model import Model

__all__ = [
    "PURPOSE_COVERAGE",
    "PURPOSE_EXPRESSES",
    "PURPOSE_RELEVANCE",
    "PURPOSE_SUPPORT",
    "Decision",
    "LLMMeaningJudge",
    "escape_data",
    "parse_coverage",
    "parse_expresses",
    "parse_relevance",
    "parse_support",
    "quote",
]

PURPOSE_EXPRESSES = "meaning_expresses"
PURPOSE_COVERAGE = "meaning_coverage"
PURPOSE_RELEVANCE = "meaning_relevance"
PURPOSE_SUPPORT = "meaning_support"

def _ids(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(1, n + 1)]


# --- output schemas and re-ask hints ---------------------------------------------

_UNIT = {"type": "number", "minimum": 0, "maximum": 1}


def _schema(key: str, fields: dict[str, object]) -> dict[str, object]:
    entry = {"type": "object", "properties": fields, "required": list(fields), "additionalProperties": False}
    return {
        "type": "object",
        "properties": {key: {"type": "array", "items": entry}},
        "required": [key],
        "additionalProperties": False,
    }


EXPRESSES_SCHEMA = _schema(
    "results",
    {"id": {"type": "string"}, "expressed": {"type": "boolean"}, "confidence": _UNIT, "evidence": {"type": "string"}},
)
COVERAGE_SCHEMA = _schema(
    "parts", {"id": {"type": "string"}, "part": {"type": "string"}, "covered": {"type": "boolean"}, "confidence": _UNIT}
)
RELEVANCE_SCHEMA = _schema("scores", {"id": {"type": "string"}, "score": _UNIT})
SUPPORT_SCHEMA = _schema(
    "sentences", {"sentence": {"type": "string"}, "supported": {"type": "boolean"}, "confidence": _UNIT}
)

_EXPRESSES_HINT = (
    '{"results": [{"id": "<statement id>", "expressed": true or false, '
    '"confidence": <number from 0 to 1>, "evidence": "<exact quote from the text, or empty>"}]}\n'
    "with one entry for every statement id."
)
_COVERAGE_HINT = (
    '{"parts": [{"id": "<part id, or empty when you split the question>", "part": "<the part>", '
    '"covered": true or false, "confidence": <number from 0 to 1>}]}\n'
    "with one entry for every listed part id, or for every part of the question when none are listed."
)
_RELEVANCE_HINT = (
    '{"scores": [{"id": "<passage id>", "score": <number from 0 to 1>}]}\nwith one entry for every passage id.'
)
_SUPPORT_HINT = (
    '{"sentences": [{"sentence": "<exact sentence from the answer>", "supported": true or false, '
    '"confidence": <number from 0 to 1>}]}\nwith one entry for every sentence of the answer, in order.'
)

# --- parsing -----------------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    """One yes/no of the judge, its confidence (0..1) and, for ``expresses``, the quote."""

    yes: bool
    confidence: float
    evidence: str | None = None


_TRUE = {"true", "yes"}
_FALSE = {"false", "no"}


#: One entry of the judge's JSON answer, its field names lower-cased; each field is checked as it is read.
Entry = dict[str, object]


def _entries(raw: str, key: str) -> list[Entry]:
    obj = {str(k).lower(): v for k, v in extract_json(raw).items()}
    entries = obj.get(key)
    if not isinstance(entries, list):
        raise JudgeParseError(f'the JSON object needs a "{key}" list', raw=raw)
    out: list[Entry] = []
    for entry in entries:
        if not isinstance(entry, dict):
            raise JudgeParseError(f'each entry of "{key}" must be a JSON object, got {entry!r}', raw=raw)
        out.append({str(k).lower(): v for k, v in entry.items()})
    return out


def _flag(entry: Entry, field: str, where: str, raw: str) -> bool:
    value = entry.get(field)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    if not isinstance(value, bool):
        raise JudgeParseError(f'{where}: "{field}" must be true or false, got {value!r}', raw=raw)
    return value


def _unit(entry: Entry, field: str, where: str, raw: str) -> float:
    value = entry.get(field)
    number: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = None
    if number is None or number != number:
        raise JudgeParseError(f'{where}: "{field}" must be a number from 0 to 1, got {value!r}', raw=raw)
    if not 0.0 <= number <= 1.0:
        raise JudgeParseError(f'{where}: "{field}" is {number:g}, outside 0 to 1', raw=raw)
    return number


def _text(entry: Entry, field: str, where: str, raw: str) -> str:
    value = entry.get(field)
    if not isinstance(value, str) or not value.strip():
        raise JudgeParseError(f'{where}: "{field}" must be a non-empty string, got {value!r}', raw=raw)
    return value.strip()


def _by_id(entries: list[Entry], ids: list[str], what: str, raw: str) -> dict[str, Entry]:
    """Entries keyed by the ids asked for; invented ids are ignored, missing or repeated ones rejected."""
    wanted = set(ids)
    out: dict[str, Entry] = {}
    for entry in entries:
        item_id = str(entry.get("id", "")).strip()
        if item_id not in wanted:
            continue  # an id the judge invented
        if item_id in out:
            raise JudgeParseError(f"{what} {item_id} is answered twice; answer each id once", raw=raw)
        out[item_id] = entry
    missing = [i for i in ids if i not in out]
    if missing:
        raise JudgeParseError(f"no answer for {what}(s) {', '.join(missing)}; answer every id", raw=raw)
    return out


def parse_expresses(raw: str, ids: list[str]) -> dict[str, Decision]:
    """``{"results": [{"id", "expressed", "confidence", "evidence"}]}`` -> a decision per id."""
    out: dict[str, Decision] = {}
    for item_id, e in _by_id(_entries(raw, "results"), ids, "statement", raw).items():
        where = f"statement {item_id}"
        evidence = e.get("evidence")
        if evidence is not None and not isinstance(evidence, str):
            raise JudgeParseError(f'{where}: "evidence" must be a string, got {evidence!r}', raw=raw)
        out[item_id] = Decision(
            _flag(e, "expressed", where, raw), _unit(e, "confidence", where, raw), (evidence or "").strip() or None
        )
    return out


def parse_coverage(raw: str, ids: list[str] | None) -> list[tuple[str, Decision]]:
    """``{"parts": [{"id", "part", "covered", "confidence"}]}`` -> ``(key, decision)`` pairs.

    With ``ids`` (parts were given) the key is the part id and every id must be
    answered; without, the key is the part as the judge split it out (at least one).
    """
    entries = _entries(raw, "parts")
    if ids is not None:
        by_id = _by_id(entries, ids, "part", raw)
        return [
            (i, Decision(_flag(by_id[i], "covered", f"part {i}", raw), _unit(by_id[i], "confidence", f"part {i}", raw)))
            for i in ids
        ]
    out: list[tuple[str, Decision]] = []
    for n, e in enumerate(entries, start=1):
        where = f"entry {n} of \"parts\""
        part = _text(e, "part", where, raw)
        if any(part == p for p, _ in out):
            raise JudgeParseError(f"the part {part!r} is listed twice; list each part once", raw=raw)
        out.append((part, Decision(_flag(e, "covered", where, raw), _unit(e, "confidence", where, raw))))
    if not out:
        raise JudgeParseError('"parts" is empty; list every part of the question (at least one)', raw=raw)
    return out


def parse_relevance(raw: str, ids: list[str]) -> dict[str, float]:
    """``{"scores": [{"id", "score"}]}`` -> a 0..1 score per passage id."""
    by_id = _by_id(_entries(raw, "scores"), ids, "passage", raw)
    return {i: _unit(by_id[i], "score", f"passage {i}", raw) for i in ids}


def parse_support(raw: str) -> list[tuple[str, Decision]]:
    """``{"sentences": [{"sentence", "supported", "confidence"}]}`` -> ``(sentence, decision)``
    pairs, at least one; a sentence repeated word for word keeps its first decision."""
    out: list[tuple[str, Decision]] = []
    for n, e in enumerate(_entries(raw, "sentences"), start=1):
        where = f"entry {n} of \"sentences\""
        sentence = _text(e, "sentence", where, raw)
        decision = Decision(_flag(e, "supported", where, raw), _unit(e, "confidence", where, raw))
        if all(sentence != s for s, _ in out):
            out.append((sentence, decision))
    if not out:
        raise JudgeParseError('"sentences" is empty; list every sentence of the answer', raw=raw)
    return out


# --- the judge ---------------------------------------------------------------------


def _template(name: str, placeholders: set[str]) -> PromptTemplate:
    return builtin(name).check(frozenset(placeholders), required=placeholders)


class LLMMeaningJudge:
    """:class:`~jurist.models.base.MeaningJudge` on a chat model; ``name`` is the model's.

    Every method takes an optional ``trace_id`` for the call record, raises
    :class:`~jurist.errors.JudgeParseError` when the reply is still invalid after
    the re-ask, and lets a :class:`~jurist.errors.ModelError` propagate.
    """

    def __init__(self, model: Model, *, temperature: float = 0.0, seed: int | None = 0, max_tokens: int = 1024,
                 prompts: PromptSource | None = None) -> None:
        self.model = model
        self.prompts = prompts  # the prompt lab's routes (a Runtime's ``prompts``)
        self.name: str = model.name
        self.temperature = temperature
        self.seed = seed
        self.max_tokens = max_tokens
        self._expresses = self._judge(PURPOSE_EXPRESSES, {"statements", "text"}, EXPRESSES_SCHEMA, _EXPRESSES_HINT)
        self._coverage = self._judge(PURPOSE_COVERAGE, {"question", "parts", "answer"}, COVERAGE_SCHEMA, _COVERAGE_HINT)
        self._relevance = self._judge(PURPOSE_RELEVANCE, {"query", "passages"}, RELEVANCE_SCHEMA, _RELEVANCE_HINT)
        self._support = self._judge(PURPOSE_SUPPORT, {"sources", "answer"}, SUPPORT_SCHEMA, _SUPPORT_HINT)

    def _judge(self, purpose: str, placeholders: set[str], schema: dict[str, object], hint: str) -> Judge:
        # Each purpose has its template of the same name.
        return Judge(
            self.model,
            _template(purpose, placeholders),
            purpose=purpose,
            format_hint=hint,
            schema=schema,
            schema_name=purpose,
            temperature=self.temperature,
            seed=self.seed,
            max_tokens=self.max_tokens,
            prompts=self.prompts,
        )

    async def expresses(
        self, text: str, statements: list[str], *, trace_id: str | None = None
    ) -> list[StatementCheck]:
        """Whether ``text`` expresses each statement, in the statements' order."""
        if not statements:
            return []
        ids = _ids("s", len(statements))
        variables = {"statements": quote_all("statement", statements, ids), "text": quote("text", text)}
        decided, _ = await self._expresses.run(variables, lambda raw: parse_expresses(raw, ids), trace_id=trace_id)
        return [
            StatementCheck(
                statement=s,
                expressed=decided[i].yes,
                confidence=decided[i].confidence,
                judge_model=self.name,
                evidence=decided[i].evidence,
            )
            for s, i in zip(statements, ids)
        ]

    async def coverage(
        self, question: str, answer: str, parts: list[str] | None = None, *, trace_id: str | None = None
    ) -> CoverageResult:
        """Which parts of ``question`` the answer covers; the model splits the
        question into parts when ``parts`` is None."""
        if (parts is not None and not parts) or (parts is None and not question.strip()):
            return CoverageResult(covered=[], uncovered=[], confidence={}, judge_model=self.name)
        ids: list[str] | None = None
        listed = "(none listed: split the question into its parts yourself)"
        if parts is not None:
            ids = _ids("q", len(parts))
            listed = quote_all("part", parts, ids)
        variables = {"question": quote("question", question), "parts": listed, "answer": quote("answer", answer)}
        pairs, _ = await self._coverage.run(variables, lambda raw: parse_coverage(raw, ids), trace_id=trace_id)
        if parts is not None and ids is not None:
            names = dict(zip(ids, parts))
            pairs = [(names[key], d) for key, d in pairs]
        return CoverageResult(
            covered=[p for p, d in pairs if d.yes],
            uncovered=[p for p, d in pairs if not d.yes],
            confidence={p: d.confidence for p, d in pairs},
            judge_model=self.name,
        )

    async def relevance(
        self, query: str, passages: list[str], *, trace_id: str | None = None
    ) -> list[RelevanceScore]:
        """A 0..1 relevance score for each passage, in the passages' order."""
        if not passages:
            return []
        ids = _ids("p", len(passages))
        variables = {"query": quote("query", query), "passages": quote_all("passage", passages, ids)}
        scores, _ = await self._relevance.run(variables, lambda raw: parse_relevance(raw, ids), trace_id=trace_id)
        return [RelevanceScore(passage=p, score=scores[i], judge_model=self.name) for p, i in zip(passages, ids)]

    async def support(self, answer: str, sources: list[str], *, trace_id: str | None = None) -> SupportResult:
        """Which sentences of ``answer`` (as the model splits it) the sources support."""
        if not answer.strip():
            return SupportResult(supported=[], unsupported=[], confidence={}, judge_model=self.name)
        listed = quote_all("source", sources, _ids("s", len(sources))) if sources else "(no sources)"
        variables = {"sources": listed, "answer": quote("answer", answer)}
        pairs, _ = await self._support.run(variables, parse_support, trace_id=trace_id)
        return SupportResult(
            supported=[s for s, d in pairs if d.yes],
            unsupported=[s for s, d in pairs if not d.yes],
            confidence={s: d.confidence for s, d in pairs},
            judge_model=self.name,
        )
