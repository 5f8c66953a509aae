"""Probing a judge: how far its verdicts move for reasons other than the answer.

:func:`probe` measures, on the answers given (one or more systems' answer files):

* **position**: with two or more systems, every shared prompt judged pairwise in
  both orders (:mod:`jurist.analysis.pairwise`): the share of pairs whose verdict
  changed with the order, and the share of decisive verdicts that chose the
  answer shown first (50% for a judge without position bias);
* **verbosity**: with rubrics, each answer scored as it is and padded with
  neutral filler (:func:`jurist.analysis.bias.pad`): the mean score shift per
  rubric (padded − as given);
* **self-preference**: which answers were written by a model of the judge's own
  family (:func:`jurist.analysis.bias.family`), known from each answer's
  ``model`` field or, failing that, from the store's call records (the model of
  a recorded call whose reply is the answer): a warning, not a measurement;
* **variance**: with rubrics, ``samples`` judge samples per answer and rubric at
  the configured temperature: each answer's spread and the 95% t interval of its
  mean, and per rubric the repeatability standard deviation (the root mean of the
  answers' sample variances, ISO 5725's within-item spread).

Intervals over answers are percentile bootstrap intervals
(:func:`jurist.analysis.agreement.bootstrap_items`). Sample ``i`` of a judgement
is a request of its own (its index in the call cache's key, and its seed plus
``i``), so ``k`` samples are ``k`` calls and a rerun answers them from the cache.
Every judge call is recorded like any other; the probe stores no evaluation.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
from pydantic import BaseModel, ConfigDict
from scipy import stats

from jurist.analysis.agreement import BOOTSTRAP_RESAMPLES, CONFIDENCE, Estimate, bootstrap_items
from jurist.analysis.answers import Answer, AnswerSet
from jurist.analysis.bias import PAD_FACTOR, family, pad
from jurist.analysis.pairwise import (PositionStats, build_pairwise_judge, judge_matchups, matchups,
                                     position_stats)
from jurist.ids import new_id
from jurist.rubrics.api import build_judge
from jurist.judges.outcome import OK
from jurist.rubrics.judging import RubricJudge
from jurist.rubrics.results import RubricScore
from jurist.rubrics.models import RubricSet
from jurist.rubrics.sessions import format_session
from jurist.runtime import Runtime
from jurist.store import queries
from jurist.sync import gather_bounded

DEFAULT_SAMPLES = 3
LISTED = 10  # answers listed per rubric (the most variable) and failures shown


@dataclass
class ProbeItem:
    """One system's answer to one prompt."""

    system: str
    answer: Answer

    @property
    def label(self) -> str:
        return f"{self.answer.id} ({self.system})"


class _Figures(BaseModel):
    """A section's figures, written after its heading fields in this order."""

    model_config = ConfigDict(frozen=True)

    def to_json(self) -> dict[str, object]:
        return self.model_dump(mode="json")


class Spread(_Figures):
    """One answer's samples: their count, mean, standard deviation, range, and the 95% t interval of the mean."""

    n: int
    mean: float | None
    sd: float | None
    min: float | None
    max: float | None
    low: float | None
    high: float | None


class AnswerSpread(_Figures):
    """One answer's spread, with which answer and system it is."""

    item: str
    system: str
    n: int
    mean: float | None
    sd: float | None
    min: float | None
    max: float | None
    low: float | None
    high: float | None


class VarianceRubric(_Figures):
    rubric: str
    name: str
    scale: str
    items: int
    varying: int
    repeatability_sd: Estimate
    mean_range: float | None
    answers: list[AnswerSpread]


class VarianceFigures(_Figures):
    samples: int
    rubrics: list[VarianceRubric]
    failures: list[str]


class VerbosityRubric(_Figures):
    rubric: str
    name: str
    scale: str
    items: int
    mean_shift: Estimate
    up: int
    same: int
    down: int
    mean_chars: tuple[float | None, float | None] | None  # as given, padded


class VerbosityFigures(_Figures):
    padding: float
    rubrics: list[VerbosityRubric]


class SelfPreferenceFigures(_Figures):
    judge_family: str
    by_family: dict[str, int]
    unknown: int
    same_family: int
    same_family_answers: list[str]
    warning: str | None


@dataclass(frozen=True)
class PositionFigures:
    """The position probe's statistics, how many pairs failed, and the first failures' reasons."""

    stats: PositionStats
    failed: int = 0
    failures: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {**self.stats.to_json(), "failed": self.failed, "failures": list(self.failures)}


Figures = PositionFigures | VerbosityFigures | SelfPreferenceFigures | VarianceFigures


@dataclass
class Section:
    """One measurement: what it measured, on how many answers, its figures (or why it was not made)."""

    name: str
    measured: str
    items: int = 0
    skipped: str | None = None
    figures: Figures | None = None
    unit: str = "answers"  # what ``items`` counts

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "measured": self.measured, "items": self.items, "unit": self.unit,
                "skipped": self.skipped, **(self.figures.to_json() if self.figures is not None else {})}


@dataclass(frozen=True)
class SystemInfo:
    """One system probed: its name, where its answers came from, how many there are."""

    name: str
    source: str
    answers: int


@dataclass
class ProbeReport:
    judge: str
    judge_family: str
    systems: list[SystemInfo]
    samples: int
    resamples: int
    sections: list[Section]

    def to_json(self) -> dict[str, object]:
        return {"kind": "judge_probe", "judge": self.judge, "judge_family": self.judge_family,
                "systems": [{"name": s.name, "source": s.source, "answers": s.answers} for s in self.systems],
                "samples": self.samples, "bootstrap_resamples": self.resamples,
                "sections": [s.to_json() for s in self.sections]}


# -- scoring ---------------------------------------------------------------------------

Scores = dict[tuple[int, str], list[float | None]]  # (item, rubric id) -> one score per sample (None: failed)


@dataclass
class Scoring:
    """The rubric judge's scores of every item: ``samples`` of each as given, one padded."""

    samples: Scores
    padded: Scores
    failures: list[str]  # reasons, the first LISTED


async def _score_one(rj: RubricJudge, rubric_set: RubricSet, item: ProbeItem, text: str | None, *, budget: int,
                     timeout: float, sample: int) -> list[RubricScore]:
    session = item.answer.session(text)
    formatted = format_session(session, budget)
    trace = new_id()
    return list(await asyncio.gather(*(
        rj.score(r, rubric_set.scale_of(r), session, formatted, trace_id=trace, timeout=timeout, sample=sample)
        for r in rubric_set.rubrics)))


async def score_items(rj: RubricJudge, rubric_set: RubricSet, items: list[ProbeItem], *, samples: int,
                      padding: float | None, budget: int, timeout: float, parallel: int = 4,
                      on_progress: Callable[[], None] | None = None) -> Scoring:
    """Every item scored ``samples`` times as given, and once padded (``padding``: None for none)."""
    out = Scoring({}, {}, [])
    Job = tuple[int, "str | None", int, Scores]  # item, the text scored instead (padded), sample, where it goes

    async def one(job: Job) -> None:
        k, text, sample, into = job
        outcomes = await _score_one(rj, rubric_set, items[k], text, budget=budget, timeout=timeout, sample=sample)
        for o in outcomes:
            ok = o.status == OK and o.final_score is not None
            into.setdefault((k, o.rubric_id), []).append(o.final_score if ok else None)
            if not ok and len(out.failures) < LISTED:
                out.failures.append(f"{items[k].label}, {o.rubric_id}: {o.reasoning}")
        if on_progress:
            on_progress()

    samples_first: list[Job] = [(k, None, s, out.samples) for s in range(samples) for k in range(len(items))]
    await gather_bounded(one, samples_first, parallel)  # samples first: the padded answers' calls follow
    if padding is not None:
        padded: list[Job] = [(k, pad(it.answer.answer, padding), 0, out.padded) for k, it in enumerate(items)]
        await gather_bounded(one, padded, parallel)
    return out


# -- figures ---------------------------------------------------------------------------


def _r(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else round(float(x), 4)


def item_spread(scores: list[float]) -> Spread:
    """One answer's samples: their mean, standard deviation, range, and the 95% t interval of the mean."""
    x = np.asarray(scores, float)
    n, mean = len(x), float(x.mean())
    sd = float(x.std(ddof=1)) if n > 1 else 0.0
    half = float(stats.t.ppf((1 + CONFIDENCE) / 2, n - 1)) * sd / math.sqrt(n) if n > 1 else float("nan")
    return Spread(n=n, mean=_r(mean), sd=_r(sd), min=_r(float(x.min())), max=_r(float(x.max())),
                  low=_r(mean - half), high=_r(mean + half))


def variance_section(rubric_set: RubricSet, items: list[ProbeItem], scoring: Scoring, samples: int, *,
                     resamples: int, seed: int) -> Section:
    measured = (f"{samples} judge samples per answer and rubric at the configured temperature: each answer's "
                "spread, the 95% t interval of its mean, and per rubric the repeatability SD (root mean of the "
                "answers' sample variances)")
    section = Section("variance", measured)
    if samples < 2:
        section.skipped = "needs --samples 2 or more"
        return section
    rubrics = []
    measured_items: set[int] = set()
    for rubric in rubric_set.rubrics:
        entries: list[AnswerSpread] = []
        for k, item in enumerate(items):
            got = [s for s in scoring.samples.get((k, rubric.id), []) if s is not None]
            if len(got) >= 2:
                entries.append(AnswerSpread(item=item.answer.id, system=item.system, **item_spread(got).model_dump()))
                measured_items.add(k)
        variances = np.array([(e.sd or 0.0) ** 2 for e in entries], float)
        repeat = bootstrap_items(lambda idx: math.sqrt(float(np.mean(variances[idx]))) if len(idx) else float("nan"),
                                 len(entries), resamples=resamples, seed=seed)
        lo, hi = rubric_set.scale_of(rubric)
        ranges = [(e.max or 0.0) - (e.min or 0.0) for e in entries]  # both known: every entry has 2+ samples
        rubrics.append(VarianceRubric(
            rubric=rubric.id, name=rubric.name, scale=f"{lo:g}-{hi:g}", items=len(entries),
            varying=sum(1 for e in entries if (e.sd or 0) > 0), repeatability_sd=repeat,
            mean_range=_r(float(np.mean(ranges))) if entries else None,
            answers=sorted(entries, key=lambda e: (-(e.sd or 0), e.item, e.system))))
    section.items = len(measured_items)
    section.figures = VarianceFigures(samples=samples, rubrics=rubrics, failures=scoring.failures)
    if not measured_items:
        section.skipped = "no answer got two scores of one rubric; see the failures"
    return section


def verbosity_section(rubric_set: RubricSet, items: list[ProbeItem], scoring: Scoring, padding: float, *,
                      resamples: int, seed: int) -> Section:
    section = Section("verbosity", f"each answer scored as given and padded with neutral filler to at least "
                                   f"{padding:g}× its length: the score shift (padded − as given) per rubric")
    rubrics = []
    measured: set[int] = set()
    for rubric in rubric_set.rubrics:
        before, after, lengths = [], [], []
        for k, item in enumerate(items):
            first = (scoring.samples.get((k, rubric.id)) or [None])[0]
            padded = (scoring.padded.get((k, rubric.id)) or [None])[0]
            if first is not None and padded is not None:
                before.append(first)
                after.append(padded)
                lengths.append((len(item.answer.answer), len(pad(item.answer.answer, padding))))
                measured.add(k)
        shift = np.asarray(after, float) - np.asarray(before, float)
        estimate = bootstrap_items(lambda idx: float(np.mean(shift[idx])) if len(idx) else float("nan"), len(shift),
                                   resamples=resamples, seed=seed)
        lo, hi = rubric_set.scale_of(rubric)
        rubrics.append(VerbosityRubric(
            rubric=rubric.id, name=rubric.name, scale=f"{lo:g}-{hi:g}", items=len(shift),
            mean_shift=estimate, up=int((shift > 0).sum()), same=int((shift == 0).sum()),
            down=int((shift < 0).sum()),
            mean_chars=(_r(float(np.mean([a for a, _ in lengths]))), _r(float(np.mean([b for _, b in lengths]))))
            if lengths else None))
    section.items = len(measured)
    section.figures = VerbosityFigures(padding=padding, rubrics=rubrics)
    if not measured:
        section.skipped = "no answer was scored both as given and padded; see the variance section's failures"
    return section


def self_preference_section(judge: str, items: list[ProbeItem], recorded: dict[str, str]) -> Section:
    mine = family(judge)
    section = Section("self_preference", f"which answers were written by a model of the judge's family "
                                         f"({mine}): from the answers' model field, else the store's call records")
    by_family: dict[str, int] = {}
    same: list[str] = []
    unknown = 0
    for item in items:
        model = item.answer.model or recorded.get(item.answer.answer)
        if model is None:
            unknown += 1
            continue
        fam = family(model)
        by_family[fam] = by_family.get(fam, 0) + 1
        if fam == mine:
            same.append(item.label)
    section.items = len(items)
    warning = None
    if same:
        warning = (f"{len(same)} of {len(items)} answers were written by the judge's own family ({mine}); judges "
                   "tend to favour their own family's answers: prefer a judge of another family for these")
    section.figures = SelfPreferenceFigures(judge_family=mine, by_family=dict(sorted(by_family.items())),
                                            unknown=unknown, same_family=len(same),
                                            same_family_answers=same[:LISTED], warning=warning)
    return section


async def position_section(systems: list[AnswerSet], runtime: Runtime, *, judge: str | None, criteria: str | None,
                           cache: bool | None, parallel: int, resamples: int, seed: int,
                           on_progress: Callable[[], None] | None = None) -> Section:
    section = Section("position", "every prompt two systems both answered, judged pairwise in both orders: the "
                                  "share of pairs whose verdict changed with the order, and the share of decisive "
                                  "verdicts that chose the answer shown first (50% without position bias)",
                      unit="pairs")
    if len(systems) < 2:
        section.skipped = "needs two or more systems' answers"
        return section
    pairs = matchups(systems)
    pj = await asyncio.to_thread(build_pairwise_judge, runtime, judge=judge, criteria=criteria, cache=cache)
    try:
        judged = await judge_matchups(pairs, pj, parallel=parallel,
                                      on_progress=(lambda _: on_progress()) if on_progress else None)
    finally:
        await pj.model.aclose()
    stats_ = await asyncio.to_thread(position_stats, judged, resamples=resamples, seed=seed)
    failed = [f"{p.item} ({p.first} vs {p.second}): {p.reason}" for p in judged if not p.ok]
    section.items = stats_.pairs
    section.figures = PositionFigures(stats_, failed=len(failed), failures=tuple(failed[:LISTED]))
    if stats_.pairs == 0:
        section.skipped = "no pair got a verdict in both orders; see the failures"
    return section


async def probe(systems: list[AnswerSet], runtime: Runtime, *, rubric_set: RubricSet | None = None,
                judge: str | None = None, template: str | Path | None = None, criteria: str | None = None,
                samples: int = DEFAULT_SAMPLES, padding: float = PAD_FACTOR, cache: bool | None = None,
                parallel: int = 4, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0,
                on_progress: Callable[[], None] | None = None) -> ProbeReport:
    """Position, verbosity, self-preference and variance of the judge on these answers."""
    if len(systems) >= 2:
        matchups(systems)  # the prompts checked before any call
    items = [ProbeItem(s.name, a) for s in systems for a in s.answers.values()]
    store = await runtime.astore()
    named = runtime.judge(judge, cache=cache)
    judge_name = named.name
    await named.aclose()
    sections: list[Section] = [await position_section(
        systems, runtime, judge=judge, criteria=criteria, cache=cache, parallel=parallel, resamples=resamples,
        seed=seed, on_progress=on_progress)]
    if rubric_set is None:
        sections.append(Section("verbosity", "the rubric score shift of answers padded with neutral filler",
                                skipped="needs --rubrics"))
    else:
        from jurist.rubrics.api import load_template

        loaded = await asyncio.to_thread(load_template, template, store)
        rj = build_judge(runtime, judge=judge, template=loaded, cache=cache)
        cfg = runtime.settings
        try:
            scoring = await score_items(rj, rubric_set, items, samples=max(1, samples), padding=padding,
                                        budget=cfg.session_char_budget, timeout=cfg.rubric_timeout,
                                        parallel=parallel, on_progress=on_progress)
        finally:
            await rj.aclose()
        sections.append(await asyncio.to_thread(verbosity_section, rubric_set, items, scoring, padding,
                                                resamples=resamples, seed=seed))
    unknown = [it.answer.answer for it in items if it.answer.model is None]
    await runtime.aflush()
    recorded = await store.aread(queries.models_by_response, unknown) if unknown else {}
    sections.append(self_preference_section(judge_name, items, recorded))
    if rubric_set is None:
        sections.append(Section("variance", "the spread of repeated judge samples", skipped="needs --rubrics"))
    else:
        sections.append(await asyncio.to_thread(variance_section, rubric_set, items, scoring, samples,
                                                resamples=resamples, seed=seed))
    await runtime.aflush()
    return ProbeReport(judge=judge_name, judge_family=family(judge_name),
                       systems=[SystemInfo(s.name, s.source, len(s)) for s in systems],
                       samples=samples, resamples=resamples, sections=sections)
