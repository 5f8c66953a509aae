"""Putting a statistical finding into words.

Without an LLM the text comes from the statistics alone (writer
``"statistics"``). With one, a judge call per pattern (template
``pattern_writer``) reads the statistics and a few example texts, quoted
between tags as data (:mod:`jurist.judges.prompting`), and answers with JSON ``{title, description,
suggested_fix}``; a reply that cannot be parsed or a failed call falls back to
the statistics' text for that pattern.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Mapping

from jurist.analysis.stats import TEST_NAME, Finding
from jurist.errors import JudgeParseError
from jurist.judges import Judge, builtin, extract_json
from jurist.judges.prompting import escape, join, quote
from jurist.judges.templates import PromptSource
from jurist.models.model import Model

log = logging.getLogger("jurist.analysis")

STATISTICS = "statistics"
MAX_WRITTEN = 10  # patterns put into words by the LLM per run; the rest keep the statistics' text
MAX_EXAMPLE_CHARS = 1000
FORMAT_HINT = '{"title": "...", "description": "...", "suggested_fix": "..." or null}'


@dataclass
class Text:
    title: str
    description: str
    suggested_fix: str | None
    writer: str


_SIZE = {"high": "large", "medium": "medium", "low": "small"}


def _p(p: float) -> str:
    return "p < 0.0001" if p < 0.0001 else f"p = {p:.2g}"


def subject_of(f: Finding) -> str:
    """'Evaluations containing "latest"' and the like (a finding of several terms: '"breakthroughs" and
    "latest"', each of its subjects contains all of them)."""
    return {
        "term": "Evaluations containing " + " and ".join(f'"{t}"' for t in f.feature.split(", ")),
        "length": f"Evaluations with texts {f.feature}",
        "judge_model": f"Evaluations judged by {f.feature}",
        "prompt_version": f"Evaluations scored with prompt {f.feature}",
    }.get(f.feature_type, f"Evaluations with {f.feature_type} {f.feature}")


def statistics_text(f: Finding, tested: int | None = None) -> Text:
    """The pattern in words, from the numbers alone."""
    on = "" if f.dimension == "overall" else f" on {f.dimension}"
    title = (f"{subject_of(f)} score lower{on} (mean {f.mean_affected:.2f} vs {f.mean_rest:.2f}, "
             f"Cliff's delta {f.effect_size:.2f}, {_p(f.p_value)}, n = {f.affected_count})")
    among = f" over {tested} candidate features" if tested else ""
    also = f" The same feature also scores lower on {', '.join(f.also_lower_on)}." if f.also_lower_on else ""
    description = (
        f"{_subjects(f)} share this feature; their mean {f.dimension} score (0-1) is "
        f"{f.mean_affected:.2f} against {f.mean_rest:.2f} for the other {f.rest_count}. A one-sided Mann-Whitney U "
        f"test gives {_p(f.p_value)} after Benjamini-Hochberg adjustment{among}; Cliff's delta "
        f"{f.effect_size:.2f} is a {_SIZE[f.impact]} effect.{also}"
    )
    return Text(title, description, None, STATISTICS)


def _subjects(f: Finding) -> str:
    """'12 subjects (30 evaluations)': each subject counted once, however often it was scored."""
    n, evaluations = f.affected_count, len(f.evaluation_ids)
    counted = f"{n} subject{'s' if n != 1 else ''}"
    return counted if evaluations <= n else f"{counted} ({evaluations} evaluations, each subject counted once)"


def prompt_variables(f: Finding) -> dict[str, str]:
    stats_lines = [
        f"feature type: {f.feature_type}",
        f"feature: {f.feature}",
        f"score compared: {f.dimension} (0 to 1, higher is better)",
        f"affected subjects (sessions, queries or requests; each counted once, its score the mean of its "
        f"evaluations): {f.affected_count}",
        f"their evaluations: {len(f.evaluation_ids)}",
        f"other subjects compared against: {f.rest_count}",
        f"mean score of the affected: {f.mean_affected:.3f}",
        f"mean score of the rest: {f.mean_rest:.3f}",
        f"Cliff's delta: {f.effect_size:.3f} ({f.impact} impact)",
        f"test: {TEST_NAME}, adjusted p = {f.p_value:.3g}",
    ]
    if f.also_lower_on:
        stats_lines.append(f"also lower on: {', '.join(f.also_lower_on)}")
    examples = join(quote("example", t[:MAX_EXAMPLE_CHARS]) for t in f.examples)
    return {"statistics": escape("\n".join(stats_lines)), "examples": examples or "(no example texts)"}


def _field(obj: Mapping[str, object], name: str, raw: str, limit: int) -> str | None:
    """A text field of the writer's JSON reply (None: absent or blank); anything but a string is an error."""
    value = obj.get(name)
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        raise JudgeParseError(f'"{name}" must be a string', raw=raw)
    return value.strip()[:limit]


def _required(obj: Mapping[str, object], name: str, raw: str, limit: int) -> str:
    value = _field(obj, name, raw, limit)
    if value is None:
        raise JudgeParseError(f'the JSON object has no "{name}" text', raw=raw)
    return value


def parse_written(text: str) -> tuple[str, str, str | None]:
    obj = extract_json(text)
    return (_required(obj, "title", text, 300), _required(obj, "description", text, 4000),
            _field(obj, "suggested_fix", text, 4000))


async def _write_one(judge: Judge, f: Finding, fallback: Text, timeout: float) -> Text:
    try:
        v = await judge.verdict(prompt_variables(f), parse_written, timeout=timeout)
    except Exception as exc:  # the writer is a nicety: never lose the run over it
        log.warning("pattern writer failed: %s", exc)
        return fallback
    if not v.ok or v.value is None:
        log.info("pattern writer reply not used: %s", v.reason)
        return fallback
    title, description, fix = v.value
    return Text(title, description, fix, judge.model.name)


async def write_patterns(findings: list[Finding], model: Model | None, *, tested: int | None = None,
                         timeout: float = 120.0, prompts: PromptSource | None = None) -> list[Text]:
    """Text for every finding: the LLM's for the first :data:`MAX_WRITTEN`, when there is a model
    (its prompt routed by ``prompts``, the prompt lab's routes)."""
    texts = [statistics_text(f, tested) for f in findings]
    if model is None or not findings:
        return texts
    judge = Judge(model, builtin("pattern_writer"), purpose="pattern_writer", format_hint=FORMAT_HINT,
                  max_tokens=800, prompts=prompts)
    head = await asyncio.gather(*(_write_one(judge, f, t, timeout)
                                  for f, t in zip(findings[:MAX_WRITTEN], texts[:MAX_WRITTEN])))
    return list(head) + texts[MAX_WRITTEN:]
