"""ResearchEvaluation: the three stages of one research query, one record, on record.

::

    async with ResearchEvaluation.local() as ev:          # or ResearchEvaluation(config, settings=...)
        plan = (await ev.evaluate_plan(query, planner)).plan
        sources = await search(plan)
        await ev.evaluate_retrieval(query, plan, sources)
        answer = (await ev.evaluate_answer(query, sources, synthesiser)).answer
        record = await ev.save()                          # evaluations row kind "research", id = logId

The record's ``overallScore`` is the unweighted mean of the overall scores of
the stages that were scored (plan: the chosen attempt; answer: the final
answer); ``None`` when none was. ``evaluationSkipped`` is true when any stage
that ran was skipped, with the reasons joined in ``skipReason``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from jurist.config import Settings
from jurist.errors import InputError
from jurist.ids import new_id
from jurist.judges.panel import Panel, PanelResult, roles_for
from jurist.models.base import MeaningJudge
from jurist.research import stages as st
from jurist.research.answer import AnswerOutcome, Synthesiser, evaluate_answer
from jurist.research.config import ResearchConfig, load_research_config
from jurist.research.failsafe import logger
from jurist.research.plan import LLMPlanCritic, PlanCritic, PlanOutcome, Planner, evaluate_plan
from jurist.research.records import (
    AnswerEvaluation, EscalationResult, EvaluationRecord, IterationDecision, PlanAttempt, PlanEvaluation,
    RetrievalEvaluation, now,
)
from jurist.research.retrieval import evaluate_retrieval
from jurist.runtime import Runtime
from jurist.store import Store

KIND = "research"
Search = Callable[[str, Any], Awaitable[list[Any]]]


def query_id(query: str) -> str:
    """A stable id of a query (normalised whitespace and case), to compare runs of it."""
    return hashlib.sha256(" ".join(query.lower().split()).encode()).hexdigest()[:16]


class _LazyPanel:
    """A Panel built on first use, so a configuration or model error becomes an
    evaluator failure that the fail-safe rules handle."""

    def __init__(self, owner: "ResearchEvaluation", stage: str) -> None:
        self.owner, self.stage = owner, stage
        self.panel: Panel | None = None

    async def evaluate(self, subject: dict[str, str], *, task: str, trace_id: str | None = None) -> PanelResult:
        if self.panel is None:
            self.panel = self.owner._build_panel(self.stage)
        return await self.panel.evaluate(subject, task=task, trace_id=trace_id)

    async def aclose(self) -> None:
        if self.panel is not None:
            await self.panel.aclose()


class _LazyCritic:
    """The LLM plan critic, built on first use (a build error fails that critique only)."""

    def __init__(self, owner: "ResearchEvaluation") -> None:
        self.owner = owner
        self.critic: LLMPlanCritic | None = None

    def _get(self) -> LLMPlanCritic:
        if self.critic is None:
            self.critic = self.owner._build_critic()
        return self.critic

    async def critique(self, query: str, attempt: PlanAttempt, history: list[PlanAttempt], *,
                       trace_id: str | None = None) -> IterationDecision:
        return await self._get().critique(query, attempt, history, trace_id=trace_id)

    async def meta_review(self, query: str, best: PlanAttempt, attempts: list[PlanAttempt], *,
                          trace_id: str | None = None) -> EscalationResult | None:
        return await self._get().meta_review(query, best, attempts, trace_id=trace_id)

    async def aclose(self) -> None:
        if self.critic is not None:
            await self.critic.aclose()


@dataclass
class ResearchResult:
    """What :meth:`ResearchEvaluation.run` returns."""

    plan: Any
    sources: list[Any]
    answer: str
    record: EvaluationRecord


class ResearchEvaluation:
    """Evaluate one research query stage by stage and keep one record of it.

    ``evaluators`` maps a stage to any object with
    ``evaluate(subject, *, task, trace_id) -> PanelResult`` (a missing stage
    gets a :class:`~jurist.judges.panel.Panel` of the configured roles);
    ``critic`` gives the plan loop its feedback (default: an LLM critic on
    ``critic_model``, the meta-review on ``escalation_model``). Without
    ``store`` one is opened on ``settings.database`` when first needed.
    """

    def __init__(self, config: ResearchConfig | None = None, *, runtime: Runtime | None = None,
                 settings: Settings | None = None, store: Store | None = None, evaluators: dict[str, st.StageEvaluator] | None = None,
                 critic: PlanCritic | None = None, log_id: str | None = None, query_id: str | None = None,
                 trace_id: str | None = None) -> None:
        if log_id is not None and (not log_id or len(log_id) > 32 or not log_id.replace("-", "").isalnum()):
            raise InputError(f"log id {log_id!r} must be 1 to 32 letters, digits or '-' (e.g. uuid4().hex)")
        self._runtime_given, self._settings, self._store_given = runtime, settings, store
        self._runtime: Runtime | None = runtime
        self.config = config or load_research_config(settings=runtime.settings if runtime else settings)
        self.log_id = log_id or new_id()
        self.trace_id = trace_id or self.log_id
        self._query_id = query_id
        self.query: str | None = None
        self.timestamp = now()
        self.evaluators: dict[str, Any] = dict(evaluators or {})
        for stage in st.STAGE_NAMES:
            self.evaluators.setdefault(stage, _LazyPanel(self, stage))
        self.critic: PlanCritic = critic or _LazyCritic(self)
        self.plan: PlanEvaluation | None = None
        self.retrieval: RetrievalEvaluation | None = None
        self.answer: AnswerEvaluation | None = None

    @classmethod
    def local(cls, config: ResearchConfig | None = None, *, settings: Settings | None = None,
              store: Store | None = None, judge: MeaningJudge | None = None, **kw: Any) -> "ResearchEvaluation":
        """Offline: every stage on the local embedding judge, the local plan critic."""
        from jurist.research.local import LocalPlanCritic, LocalResearchEvaluator

        ev = cls(config, settings=settings, store=store, critic=LocalPlanCritic(judge), **kw)
        for stage in st.STAGE_NAMES:
            ev.evaluators[stage] = LocalResearchEvaluator(stage, judge=judge, config=ev.config, sink=ev.runtime.sink)
        return ev

    # -- wiring ----------------------------------------------------------------------
    @property
    def runtime(self) -> Runtime:
        """The runtime given, else one over the settings and store given (its store opened when
        first needed and closed by :meth:`aclose`)."""
        if self._runtime is None:
            self._runtime = Runtime.of(None, self._settings, self._store_given)
        return self._runtime

    @property
    def settings(self) -> Settings:
        return self.runtime.settings

    @property
    def store(self) -> Store:
        return self.runtime.store

    def _build_panel(self, stage: str) -> Panel:
        from jurist.research.vocabulary import DEFAULT_ROLES

        cfg, stage_cfg = self.config, self.config.stages.of(stage)
        roles = roles_for(list(stage_cfg.dimensions), DEFAULT_ROLES, models=cfg.role_models())
        return Panel(
            roles, stage_cfg.weights, runtime=self.runtime, model=cfg.model,
            escalation_model=cfg.escalation_model, pass_threshold=stage_cfg.pass_threshold,
            dimension_descriptions=st.descriptions(stage), low_confidence=cfg.escalation.low_confidence,
            disagreement=cfg.escalation.disagreement, borderline=cfg.escalation.borderline,
            role_timeout=cfg.role_timeout_seconds,
        )

    def _build_critic(self) -> LLMPlanCritic:
        rt, s = self.runtime, self.settings
        model = rt.model(rt.judge_ref(self.config.critic(), announce=False))
        esc = rt.model(self.config.escalation_model) if self.config.escalation_model else None
        return LLMPlanCritic(model, esc, dimensions=st.descriptions(st.PLAN), temperature=s.temperature,
                             seed=s.seed, max_tokens=s.max_tokens, prompts=rt.prompts)

    def _remember(self, query: str) -> None:
        if self.query is None:
            self.query = query

    # -- the stages ------------------------------------------------------------------
    async def evaluate_plan(self, query: str, planner: Planner) -> PlanOutcome:
        """Stage 1: plan and refine (see :func:`jurist.research.plan.evaluate_plan`)."""
        self._remember(query)
        out = await evaluate_plan(query, planner, evaluator=self.evaluators[st.PLAN], config=self.config,
                                  critic=self.critic, trace_id=self.trace_id)
        self.plan = out.evaluation
        return out

    async def evaluate_retrieval(self, query: str, plan: Any, sources: list[Any]) -> RetrievalEvaluation:
        """Stage 2: judge the sources (see :func:`jurist.research.retrieval.evaluate_retrieval`)."""
        self._remember(query)
        self.retrieval = await evaluate_retrieval(query, plan, sources, evaluator=self.evaluators[st.RETRIEVAL],
                                                  config=self.config, trace_id=self.trace_id)
        return self.retrieval

    async def evaluate_answer(self, query: str, sources: list[Any], synthesiser: Synthesiser, *,
                              answer: str | None = None) -> AnswerOutcome:
        """Stage 3: synthesise, judge, regenerate once (see :func:`jurist.research.answer.evaluate_answer`)."""
        self._remember(query)
        out = await evaluate_answer(query, sources, synthesiser, evaluator=self.evaluators[st.ANSWER],
                                    config=self.config, answer=answer, trace_id=self.trace_id)
        self.answer = out.evaluation
        return out

    async def run(self, query: str, planner: Planner, search: Search, synthesiser: Synthesiser) -> ResearchResult:
        """The whole pipeline: plan (evaluated), search, retrieval evaluation, answer; then save."""
        plan = (await self.evaluate_plan(query, planner)).plan
        sources = await search(query, plan)
        await self.evaluate_retrieval(query, plan, sources)
        answer = (await self.evaluate_answer(query, sources, synthesiser)).answer
        return ResearchResult(plan, sources, answer, await self.save())

    # -- the record ------------------------------------------------------------------
    def record(self) -> EvaluationRecord:
        """The evaluation so far as one :class:`EvaluationRecord`."""
        sections = {st.PLAN: self.plan, st.RETRIEVAL: self.retrieval, st.ANSWER: self.answer}
        present = {k: v for k, v in sections.items() if v is not None}
        overalls = [v.overall for v in present.values() if not v.evaluation_skipped and v.overall is not None]
        skipped = [f"{k}: {v.skip_reason}" for k, v in present.items() if v.evaluation_skipped]
        return EvaluationRecord(
            log_id=self.log_id, query_id=self._query_id or query_id(self.query or ""), user_query=self.query or "",
            timestamp=self.timestamp,
            trace_id=self.trace_id, plan_evaluation=self.plan, retrieval_evaluation=self.retrieval,
            answer_evaluation=self.answer, overall_score=round(sum(overalls) / len(overalls), 4) if overalls else None,
            evaluation_skipped=bool(skipped), skip_reason="; ".join(skipped) or None,
            warnings=[w for v in present.values() for w in v.warnings], config=self.config.snapshot(),
        )

    async def save(self, *, flush: bool = True) -> EvaluationRecord:
        """Persist the record (one ``evaluations`` row, ``scores`` per stage and
        dimension). A store failure is logged, never raised: evaluation is advisory."""
        from jurist.research.export import evaluation_row, score_rows

        rec = self.record()
        try:
            store = self.store
            store.save_evaluation(evaluation_row(rec), score_rows(rec, self.config))
            if flush:
                await store.aflush()
        except Exception as exc:  # "Persistence error: log error, continue"
            logger.error("could not persist research evaluation %s: %s", rec.log_id, exc)
        return rec

    async def aclose(self) -> None:
        """Close the panels, the critic's models and a store this object opened."""
        for ev in [*self.evaluators.values(), self.critic]:
            close = getattr(ev, "aclose", None)
            if close is not None:
                try:
                    await close()
                except Exception as exc:  # closing never fails the research
                    logger.info("closing %r failed: %s", ev, exc)
        if self._runtime_given is None and self._runtime is not None:
            runtime, self._runtime = self._runtime, None
            await runtime.aclose()

    async def __aenter__(self) -> "ResearchEvaluation":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()
