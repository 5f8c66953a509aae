"""Offline research evaluation with the local embedding judge (``local/minilm``).

:class:`LocalResearchEvaluator` has the panel's shape
(``evaluate(subject, *, task, trace_id) -> PanelResult``) and scores only what
meaning-matching can judge, as one role ``local_judge``:

* plan: ``query_coverage`` = share of the query's parts covered by the plan's
  search queries; ``intent_alignment`` = relevance of the plan to the query;
* retrieval: ``context_precision`` = mean relevance of the sources to the query;
  ``context_recall`` = share of the query's parts covered by the sources;
* answer: ``faithfulness`` = share of the answer's sentences the sources
  support; ``relevance`` and ``completeness`` = share of the query's parts the
  answer covers.

The other dimensions stay unscored; the overall is the weighted mean of the
scored ones, weights renormalised (the record says so). Parts or sentences the
judge cannot decide (:class:`~jurist.errors.Uncertain`) are scored both ways: when
the stage passes (or fails) either way, that is its verdict, with the scores of
the end that decides and the undecided parts named; otherwise the stage is
skipped with the judge's reason. The query's parts come
from :func:`~jurist.models.texts.split_question`. :class:`LocalPlanCritic`
turns uncovered parts into specific issues, so the plan loop runs offline.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from pydantic import JsonValue

from jurist.errors import Uncertain
from jurist.judges.panel import SCORED, SKIPPED, PanelResult, RoleResult
from jurist.models.base import CoverageResult, MeaningJudge, ScoreRange, SupportResult
from jurist.models.limiter import Limiter
from jurist.models.model import CallSink, MeaningBackend, Model
from jurist.models.texts import split_question
from jurist.research import stages as st
from jurist.research.config import ResearchConfig
from jurist.research.failsafe import describe
from jurist.research.plan import GivenPlan, feedback_text, plan_queries
from jurist.research.records import EscalationResult, IterationDecision, Issue, PlanAttempt
from jurist.research.retrieval import normalise_sources

ROLE = "local_judge"
MODEL = "local/minilm"
PURPOSE = "research_local_{stage}"


def _judge(judge: MeaningJudge | None) -> MeaningJudge:
    if judge is not None:
        return judge
    from jurist.models.local import get_local_judge

    return get_local_judge()


def _load(text: str) -> Any:
    """A subject field back as data: JSON when it parses, else the text."""
    try:
        return json.loads(text)
    except (ValueError, TypeError):
        return text


def plan_prose(plan: Any) -> str:
    """What the plan says it will look for: its stated intent and its queries."""
    head = GivenPlan.model_validate(plan).intents() if isinstance(plan, dict) else []
    return "\n".join(head + plan_queries(plan)) or (plan if isinstance(plan, str) else json.dumps(plan))


def _share(covered: int, total: int) -> float:
    return covered / total if total else 0.0


def _mean(values: list[float], default: float = 0.5) -> float:
    return sum(values) / len(values) if values else default


@dataclass
class Decided:
    """A coverage or support answer as the stage scores it: the parts (or sentences) found yes and
    no, their confidence, and those the judge could not decide (``uncertain``: its reason)."""

    yes: list[str]
    no: list[str]
    confidence: dict[str, float]
    undecided: list[str] = field(default_factory=list)
    uncertain: Uncertain | None = None

    def verdict(self, name: str) -> bool | None:
        """Yes, no, or None for a part the judge could not decide."""
        return None if name in self.undecided else name in self.yes

    def split(self, lean: bool) -> tuple[list[str], list[str]]:
        """(yes, no) with the undecided ones counted as yes (``lean``) or as no."""
        return (self.yes + self.undecided, self.no) if lean else (self.yes, self.no + self.undecided)


async def _decided(ask: Callable[[], Awaitable[CoverageResult | SupportResult]]) -> Decided:
    """The judge's answer, or what it decided of it when it could not decide every part."""
    try:
        result = await ask()
        undecided, uncertain = [], None
    except Uncertain as exc:
        if not isinstance(exc.decided, (CoverageResult, SupportResult)):
            raise
        result, undecided, uncertain = exc.decided, list(exc.undecided), exc
    if isinstance(result, CoverageResult):
        return Decided(list(result.covered), list(result.uncovered), dict(result.confidence), undecided, uncertain)
    return Decided(list(result.supported), list(result.unsupported), dict(result.confidence), undecided, uncertain)


async def plan_coverage(judge: MeaningJudge, query: str, plan: Any) -> tuple[list[str], Decided]:
    """(parts, coverage) of the query against the plan's search queries."""
    parts = split_question(query)
    queries = plan_queries(plan)
    if not queries:
        return parts, Decided([], list(parts), {p: 1.0 for p in parts})
    return parts, await _decided(lambda: judge.coverage(query, "\n".join(queries), parts))


Scored = tuple[dict[str, float], float, str, dict[str, JsonValue]]  # scores, confidence, critique, details


@dataclass
class StageAnswers:
    """What the judge answered for a stage, scored with the undecided parts counted against
    (``score(False)``) or for (``score(True)``) the subject."""

    score: Callable[[bool], Scored]
    decided: list[Decided]

    @property
    def undecided(self) -> list[str]:
        return [u for d in self.decided for u in d.undecided]

    @property
    def uncertain(self) -> Uncertain | None:
        return next((d.uncertain for d in self.decided if d.uncertain is not None), None)


class LocalResearchEvaluator:
    """One stage's evaluator on a :class:`~jurist.models.base.MeaningJudge`
    (default: the shared local MiniLM judge); calls go on record when ``sink`` is given."""

    def __init__(self, stage: str, *, judge: MeaningJudge | None = None, config: ResearchConfig | None = None,
                 sink: CallSink | None = None) -> None:
        if stage not in st.STAGE_NAMES:
            raise ValueError(f"unknown stage {stage!r}; one of {', '.join(st.STAGE_NAMES)}")
        self.stage = stage
        self._judge = judge
        self.config = config or ResearchConfig()
        self.sink = sink
        self._as_model: Model | None = None

    @property
    def judge(self) -> MeaningJudge:
        self._judge = _judge(self._judge)
        return self._judge

    def _model(self) -> Model:
        """The judge behind :class:`Model` (made once): the stage's questions are one recorded call."""
        if self._as_model is None:
            backend = MeaningBackend(self.judge)
            self._as_model = Model(backend, Limiter(), sink=self.sink, cache=False)  # in-process: a bound of its own
        return self._as_model

    async def evaluate(self, subject: dict[str, str], *, task: str = "", trace_id: str | None = None) -> PanelResult:
        """Score the stage's meaning-matching dimensions; a judge failure is a
        skipped result (like a panel with no surviving role), never a crash."""
        started = time.perf_counter()
        stage = getattr(self, f"_{self.stage}")

        async def settled(_judge: Any) -> tuple[Scored, float]:
            return self._settle(await stage(subject))

        try:
            ((scores, conf, critique, details), overall), _ = await self._model().ask(
                f"{self.stage} evaluation", dict(subject), settled,
                purpose=PURPOSE.format(stage=self.stage), trace_id=trace_id)
        except Exception as exc:  # e.g. the local extra missing: ConfigError with the fix
            latency = round((time.perf_counter() - started) * 1000.0, 3)
            role = RoleResult(role=ROLE, model=self._name(), dimensions=[], scores={}, confidence=0.0, critique="",
                              raw_response="", latency_ms=latency, tokens_used=0, status="failed",
                              error=describe(exc))
            return PanelResult(status=SKIPPED, scores={}, overall=None, confidence=0.0, passed=None,
                               panel_scores={}, panel_overall=None, role_results=[role],
                               skip_reason=f"the local judge failed: {describe(exc)}")
        latency = round((time.perf_counter() - started) * 1000.0, 3)
        raw = json.dumps(details, ensure_ascii=False)
        role = RoleResult(role=ROLE, model=self._name(), dimensions=list(scores), scores=scores, confidence=conf,
                          critique=critique, raw_response=raw, latency_ms=latency, tokens_used=0)
        passed = overall >= self.config.stages.of(self.stage).pass_threshold
        return PanelResult(status=SCORED, scores=dict(scores), overall=overall, confidence=conf, passed=passed,
                           panel_scores=dict(scores), panel_overall=overall, role_results=[role])

    def _overall(self, scores: dict[str, float]) -> float:
        """The weighted mean of the scored dimensions (weights renormalised)."""
        weights = self.config.stages.of(self.stage).weights
        used = {k: weights.get(k, 0.0) for k in scores}
        total = sum(used.values())
        overall = sum(scores[k] * w for k, w in used.items()) / total if total else _mean(list(scores.values()), 0.0)
        return round(overall, 4)

    def _settle(self, answers: StageAnswers) -> tuple[Scored, float]:
        """The stage's scores and overall; with undecided parts, those of the end of the range that
        decides (the lower one for a pass, the higher one for a fail), the range in the details, or
        the judge's Uncertain when the undecided parts could turn the verdict."""
        low = answers.score(False)
        if answers.uncertain is None:
            return low, self._overall(low[0])
        high = answers.score(True)
        span = ScoreRange(self._overall(low[0]), self._overall(high[0]))
        threshold = self.config.stages.of(self.stage).pass_threshold
        passed = span.verdict(threshold)
        if passed is None:
            raise answers.uncertain
        scores, conf, critique, details = low if passed else high
        note = f"could not decide: {'; '.join(answers.undecided)}; {span.describe('the overall', threshold)}"
        details = {**details, "undecided": list[JsonValue](answers.undecided), "overall_range": [span.low, span.high]}
        return (scores, conf, f"{critique} ({note})", details), span.deciding_end(passed)

    def _name(self) -> str:
        return getattr(self._judge, "name", None) or MODEL

    async def _plan(self, subject: dict[str, str]) -> StageAnswers:
        query, plan = subject["query"], _load(subject["plan"])
        parts, cov = await plan_coverage(self.judge, query, plan)
        [rel] = await self.judge.relevance(query, [plan_prose(plan)])

        def score(lean: bool) -> Scored:
            covered, _ = cov.split(lean)
            scores = {"intent_alignment": round(rel.score, 4),
                      "query_coverage": round(_share(len(covered), len(parts)), 4)}
            critique = (f"no search query covers: {'; '.join(cov.no)}" if cov.no
                        else "every part of the query has a search query" if not cov.undecided
                        else "every part the judge decided has a search query")
            details: dict[str, JsonValue] = {
                "parts": [{"part": p, "covered": cov.verdict(p), "confidence": round(cov.confidence.get(p, 0.5), 4)}
                          for p in parts],
                "queries": list[JsonValue](plan_queries(plan)), "intent_alignment": rel.score}
            return scores, round(_mean(list(cov.confidence.values())), 4), critique, details

        return StageAnswers(score, [cov])

    async def _retrieval(self, subject: dict[str, str]) -> StageAnswers:
        query = subject["query"]
        sources = normalise_sources(_load(subject["sources"]) or [])
        texts = [s.content or (s.title or "") for s in sources]
        parts = split_question(query)
        rel = await self.judge.relevance(query, texts) if texts else []
        cov = (await _decided(lambda: self.judge.coverage(query, "\n\n".join(texts), parts)) if texts
               else Decided([], list(parts), {}))

        def score(lean: bool) -> Scored:
            covered, _ = cov.split(lean)
            scores = {"context_recall": round(_share(len(covered), len(parts)), 4),
                      "context_precision": round(_mean([r.score for r in rel], 0.0), 4)}
            critique = (f"no source covers: {'; '.join(cov.no)}" if cov.no else "the sources cover every part"
                        if not cov.undecided else "the sources cover every part the judge decided")
            details: dict[str, JsonValue] = {"parts": [{"part": p, "covered": cov.verdict(p)} for p in parts],
                       "sources": [{"id": s.id, "relevance": round(r.score, 4)} for s, r in zip(sources, rel)]}
            return scores, round(_mean(list(cov.confidence.values())) if texts else 1.0, 4), critique, details

        return StageAnswers(score, [cov])

    async def _answer(self, subject: dict[str, str]) -> StageAnswers:
        query, answer = subject["query"], subject["answer"]
        texts = [s.content or (s.title or "") for s in normalise_sources(_load(subject["sources"]) or [])]
        parts = split_question(query)
        sup = await _decided(lambda: self.judge.support(answer, texts))
        cov = await _decided(lambda: self.judge.coverage(query, answer, parts))

        def score(lean: bool) -> Scored:
            supported, unsupported = sup.split(lean)
            covered, _ = cov.split(lean)
            sentences = len(supported) + len(unsupported)
            coverage = round(_share(len(covered), len(parts)), 4)
            scores = {"faithfulness": round(_share(len(supported), sentences), 4),
                      "relevance": coverage, "completeness": coverage}
            notes = []
            if sup.no:
                notes.append(f"not supported by the sources: {'; '.join(sup.no)}")
            if cov.no:
                notes.append(f"the answer does not cover: {'; '.join(cov.no)}")
            details: dict[str, JsonValue] = {"unsupported": list[JsonValue](sup.no),
                                             "supported": list[JsonValue](sup.yes),
                                             "parts": [{"part": p, "covered": cov.verdict(p)} for p in parts]}
            conf = _mean(list(sup.confidence.values()) + list(cov.confidence.values()))
            return scores, round(conf, 4), " ".join(notes) or "grounded and complete", details

        return StageAnswers(score, [sup, cov])


class LocalPlanCritic:
    """The plan critic offline: one issue per query part no search query covers."""

    def __init__(self, judge: MeaningJudge | None = None) -> None:
        self._judge = judge
        self.name = MODEL

    async def critique(self, query: str, attempt: PlanAttempt, history: list[PlanAttempt], *,
                       trace_id: str | None = None) -> IterationDecision:
        started = time.perf_counter()
        self._judge = _judge(self._judge)
        _, cov = await plan_coverage(self._judge, query, attempt.plan)
        issues = [Issue(issue=f"no search query covers: {p}", fix=f"add a query about {p}") for p in cov.no]
        issues += [Issue(issue=f"the judge could not decide whether a search query covers: {p}",
                         fix=f"add a query about {p}") for p in cov.undecided]
        if issues:
            mode, failure, critique = st.TARGETED_FIX, "missing_coverage", (
                f"{len(issues)} part(s) of the query have no search query.")
        else:
            mode, failure = st.FULL_REGENERATION, "intent_misalignment"
            critique = "every part has a query, but the plan as a whole does not match the query closely enough."
            issues = [Issue(issue=r, fix="reword the search queries closer to the query") for r in attempt.failed_rules]
        return IterationDecision(
            mode=mode, recommended_mode=mode, specific_issues=issues, failure_type=failure,
            critique=critique, feedback_to_planner=feedback_text(attempt, critique, issues, mode),
            critic_model=self._judge.name, latency=round((time.perf_counter() - started) * 1000.0, 3))

    async def meta_review(self, query: str, best: PlanAttempt, attempts: list[PlanAttempt], *,
                          trace_id: str | None = None) -> EscalationResult | None:
        """No escalation model offline: nothing to review with."""
        return None
