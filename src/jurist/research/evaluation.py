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

Live: ``events=`` gets every stage event as it happens (see
:mod:`jurist.research.events`; the server's live page is one such sink), and
:meth:`ResearchEvaluation.decision` asks the user to proceed or retry the
search after a severe retrieval flag, the default answering after a time-out
(``run`` asks when ``decision_timeout`` is set).
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import re
import shlex
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Mapping

from jurist.config import Settings
from jurist.errors import ConfigError, InputError
from jurist.ids import new_id
from jurist.jsonfiles import unknown_name
from jurist.judges.calibration import LABELS_PLACEHOLDER, require_calibrated
from jurist.judges.panel import Panel, PanelResult, roles_for
from jurist.models.base import MeaningJudge
from jurist.research import stages as st
from jurist.research.answer import AnswerOutcome, Synthesiser, evaluate_answer
from jurist.research.config import ResearchConfig, load_research_config
from jurist.research.events import (
    CHOICES, Choice, Decided, DecisionRequested, Done, EventSink, Failed, PendingDecision, Stage, Started,
)
from jurist.research.failsafe import StageOptions, logger
from jurist.research.plan import LLMPlanCritic, PlanCritic, PlanOutcome, Planner, evaluate_plan
from jurist.research.records import (
    AnswerEvaluation, Decision, EscalationResult, EvaluationRecord, IterationDecision, PlanAttempt, PlanEvaluation,
    RetrievalEvaluation, now,
)
from jurist.research.retrieval import evaluate_retrieval
from jurist.runtime import Runtime, runtime_for
from jurist.store import Store

KIND = "research"
PROMPT_PREFIX = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")
ITEMS_PLACEHOLDER = "ITEMS.jsonl"
Search = Callable[[str, Any], Awaitable[list[Any]]]
MAX_SEARCH_RETRIES = 2  # run(): searches made again after a severe retrieval flag, at most


def query_id(query: str) -> str:
    """A stable id of a query (normalised whitespace and case), to compare runs of it."""
    return hashlib.sha256(" ".join(query.lower().split()).encode()).hexdigest()[:16]


def calibrate_stage_command(stage: str, config_file: str | None) -> str:
    """The ``jurist calibrate`` command that calibrates a research stage's panel."""
    args = ["jurist", "calibrate", "--research", stage]
    if config_file:
        args += ["--config", str(config_file)]
    return shlex.join(args + ["--items", ITEMS_PLACEHOLDER, "--labels", LABELS_PLACEHOLDER])


class _LazyPanel:
    """A Panel built on first use, so a configuration or model error becomes an
    evaluator failure that the fail-safe rules handle."""

    def __init__(self, owner: "ResearchEvaluation", stage: str) -> None:
        self.owner, self.stage = owner, stage
        self.panel: Panel | None = None

    def get(self) -> Panel:
        if self.panel is None:
            self.panel = self.owner.build_panel(self.stage)
        return self.panel

    async def evaluate(self, subject: dict[str, str], *, task: str, trace_id: str | None = None) -> PanelResult:
        return await self.get().evaluate(subject, task=task, trace_id=trace_id)


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


def _takes_prompt(callback: Any) -> bool:
    """Whether ``callback`` can be called with a ``prompt=`` keyword."""
    try:
        params = inspect.signature(callback).parameters.values()
    except (TypeError, ValueError):  # no signature to read (a builtin): assume it can
        return True
    return any(p.kind == p.VAR_KEYWORD or (p.name == "prompt" and p.kind != p.POSITIONAL_ONLY) for p in params)


@dataclass
class ResearchPipeline:
    """A research application's three callbacks, for whoever starts runs of it (the server's
    ``POST /api/research/evaluate`` and ``POST /api/research/query``). ``evaluation`` builds each
    run's :class:`ResearchEvaluation` from ``config`` and keyword arguments (``runtime``, ``events``,
    ``decision_timeout``, ...): ``ResearchEvaluation`` (panels on the configured models),
    ``ResearchEvaluation.local``, or your own factory.

    ``prompts`` are the pipeline's own prompts, by what uses them: ``planner`` (Stage 1),
    ``retrieval`` (the search, Stage 2) and ``synthesis`` (the synthesiser, Stage 3). Each run
    registers them with the prompt lab as ``<prompt_prefix>.<name>`` (``research.planner``), where
    they are versioned and A/B tested like jurist's own prompts, and calls the callback that
    uses one with ``prompt=`` the text the lab routes this run to (the active version, or an
    A/B test's arm; the text given when nothing is routed)."""

    planner: Planner
    search: Search
    synthesiser: Synthesiser
    config: ResearchConfig | None = None
    evaluation: Callable[..., "ResearchEvaluation"] | None = None
    prompts: Mapping[str, str] | None = None
    prompt_prefix: str = "research"

    def __post_init__(self) -> None:
        for name, text in (self.prompts or {}).items():
            if name not in st.PIPELINE_PROMPTS:
                raise InputError(f"research pipeline prompts: {unknown_name(name, list(st.PIPELINE_PROMPTS), 'prompt')}")
            if not isinstance(text, str) or not text.strip():
                raise InputError(f"research pipeline prompts: the {name} prompt is empty")
            callback = {st.PLANNER_PROMPT: self.planner, st.RETRIEVAL_PROMPT: self.search,
                        st.SYNTHESIS_PROMPT: self.synthesiser}[name]
            if not _takes_prompt(callback):
                raise InputError(f"research pipeline prompts: the {name} prompt is given, so its callback "
                                 f"{getattr(callback, '__name__', type(callback).__name__)} must take a 'prompt' "
                                 "keyword (the text the prompt lab routes the run to)")
        if not PROMPT_PREFIX.match(self.prompt_prefix):
            raise InputError(f"prompt_prefix {self.prompt_prefix!r} must be 1 to 100 letters, digits, '_', '.' or '-'")

    def prompt_names(self) -> dict[str, tuple[str, str]]:
        """Each prompt given: its use -> (its name in the prompt lab, the text given)."""
        return {use: (f"{self.prompt_prefix}.{use}", text) for use, text in (self.prompts or {}).items()}

    async def register_prompts(self, store: Store) -> list[str]:
        """Put the pipeline's prompts in the prompt lab of ``store`` now (each run registers them too,
        so a text changed in code becomes a new version); returns their names in the lab."""
        from jurist.analysis.prompts import register_prompt

        return [(await register_prompt(store, name, text, owner="the research pipeline")).name
                for name, text in self.prompt_names().values()]

    def start(self, **kw: Any) -> "ResearchEvaluation":
        make = self.evaluation or ResearchEvaluation
        evaluation = make(self.config, **kw)
        evaluation.pipeline_prompts = self.prompt_names()
        return evaluation


class ResearchEvaluation:
    """Evaluate one research query stage by stage and keep one record of it.

    ``evaluators`` maps a stage to any object with
    ``evaluate(subject, *, task, trace_id) -> PanelResult`` (a missing stage
    gets a :class:`~jurist.judges.panel.Panel` of the configured roles);
    ``critic`` gives the plan loop its feedback (default: an LLM critic on
    ``critic_model``, the meta-review on ``escalation_model``). Without
    ``store`` one is opened on ``settings.database`` when first needed.

    ``events`` is called with every event of the run (:mod:`jurist.research.events`),
    numbered and carrying the log id; a sink that raises is logged and ignored.
    ``decision_timeout`` (seconds) makes :meth:`run` ask, after a severe retrieval
    flag, whether to proceed or search again (``decision_default`` after the time-out).
    """

    def __init__(self, config: ResearchConfig | None = None, *, runtime: Runtime | None = None,
                 settings: Settings | None = None, store: Store | None = None, evaluators: dict[str, st.StageEvaluator] | None = None,
                 critic: PlanCritic | None = None, log_id: str | None = None, query_id: str | None = None,
                 trace_id: str | None = None, events: EventSink | None = None, decision_timeout: float | None = None,
                 decision_default: Choice = "proceed") -> None:
        if log_id is not None and (not log_id or len(log_id) > 32 or not log_id.replace("-", "").isalnum()):
            raise InputError(f"log id {log_id!r} must be 1 to 32 letters, digits or '-' (e.g. uuid4().hex)")
        if decision_timeout is not None and not 0 < decision_timeout <= 86_400:
            raise InputError(f"decision_timeout must be more than 0 and at most 86400 seconds, not {decision_timeout!r}")
        if decision_default not in CHOICES:
            raise InputError(f"decision_default must be one of {', '.join(CHOICES)}, not {decision_default!r}")
        self.events = events
        self.decision_timeout, self.decision_default = decision_timeout, decision_default
        self.decisions: list[Decision] = []
        self._seq = 0
        self._searches = 0  # retrieval evaluations made (a search made again after a severe flag)
        self._pending: PendingDecision | None = None
        self._finished = False  # done or error was emitted
        self._runtime_given, self._store_given = runtime, store
        self._runtime: Runtime | None = runtime_for(runtime, settings, store)  # settings resolved once, here
        self._settings = self._runtime.settings
        self.config = config or load_research_config(settings=self._settings)
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
        self.pipeline_prompts: dict[str, tuple[str, str]] = {}  # use -> (prompt lab name, text): ResearchPipeline
        self.prompts_used: dict[str, str] = {}  # prompt lab name -> the hash of the text this run used
        self._notes: list[str] = []  # the record's warnings that belong to no stage

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
            self._runtime = runtime_for(None, self._settings, self._store_given)
        return self._runtime

    @property
    def settings(self) -> Settings:
        return self.runtime.settings

    @property
    def store(self) -> Store:
        return self.runtime.store

    def build_panel(self, stage: str) -> Panel:
        """The panel of the configured roles that judges ``stage`` (built anew on each call)."""
        from jurist.research.vocabulary import DEFAULT_ROLES

        cfg, stage_cfg = self.config, self.config.stages.of(stage)
        roles = roles_for(list(stage_cfg.dimensions), DEFAULT_ROLES, models=cfg.role_models())
        return Panel(
            roles, stage_cfg.weights, runtime=self.runtime, model=cfg.model,
            escalation_model=cfg.escalation_model, pass_threshold=stage_cfg.pass_threshold,
            dimension_descriptions=st.descriptions(stage), low_confidence=cfg.escalation.low_confidence,
            disagreement=cfg.escalation.disagreement, borderline=cfg.escalation.borderline,
            role_timeout=cfg.role_timeout_seconds,
            calibrate_command=calibrate_stage_command(stage, self.settings.config_file),
        )

    async def check_calibration(self, stage: str) -> None:
        """Before a stage's first judge call: with ``require_calibration`` on any of its dimensions,
        raise :class:`~jurist.errors.CalibrationRequired` unless its judges are calibrated well
        enough (a disabled stage makes no call and is not checked)."""
        if not StageOptions.of(stage, self.config).enabled:
            return
        bars = self.config.stages.of(stage).calibration_bars()
        evaluator = self.evaluators[stage]
        if isinstance(evaluator, _LazyPanel):
            if not bars:
                return
            evaluator = evaluator.get()  # built here, outside the fail-safe
        if isinstance(evaluator, Panel):
            await require_calibrated(self.runtime, evaluator.calibration_uses(bars))
            await evaluator.check_calibration()  # a panel given with a require_calibration of its own
        elif bars:
            raise ConfigError(f"research.stages.{stage} requires a calibration, and its evaluator "
                              f"{type(evaluator).__name__} has no judge to look one up for: use a panel of LLM "
                              "judges, or remove require_calibration")

    def _build_critic(self) -> LLMPlanCritic:
        rt, s = self.runtime, self.settings
        model = rt.model(rt.judge_ref(self.config.critic(), announce=False))
        esc = rt.model(self.config.escalation_model) if self.config.escalation_model else None
        return LLMPlanCritic(model, esc, dimensions=st.descriptions(st.PLAN), temperature=s.temperature,
                             seed=s.seed, max_tokens=s.max_tokens, prompts=rt.prompts)

    async def _remember(self, query: str) -> None:
        if self.query is None:
            self.query = query
            await self.emit(Started(query=query, max_attempts=self.config.max_attempts))

    # -- events ----------------------------------------------------------------------
    async def emit(self, event: Any) -> None:
        """Number ``event``, stamp it with the log id and hand it to the sink (fail-safe)."""
        if self.events is None:
            return
        self._seq += 1
        event = event.model_copy(update={"log_id": self.log_id, "seq": self._seq})
        try:
            out = self.events(event)
            if inspect.isawaitable(out):
                await out
        except Exception as exc:  # a broken view never stops the research
            logger.warning("the research event sink failed on %s event %d: %s", event.type, event.seq, exc)

    async def decision(self, *, timeout: float, default: Choice = "proceed", stage: Stage = "retrieval",
                       reason: str | None = None) -> Choice:
        """Ask whoever watches the run (the ``decision`` event) to ``proceed`` or ``retry``, and
        wait for :meth:`decide` (the server's ``POST /api/research/{id}/decision``) or, after
        ``timeout`` seconds, take ``default``. Recorded in the record's ``decisions``."""
        if not 0 < timeout <= 86_400:
            raise InputError(f"a decision's timeout must be more than 0 and at most 86400 seconds, not {timeout!r}")
        if reason is None:
            warned = self.retrieval.warnings if stage == st.RETRIEVAL and self.retrieval else []
            reason = warned[-1] if warned else f"{stage} quality warning"
        pending = self._pending = PendingDecision(default)
        try:
            await self.emit(DecisionRequested(stage=stage, reason=reason, default=default, timeout_s=timeout,
                                              resolve=pending.resolve))
            choice, by = await pending.wait(timeout)
        finally:
            self._pending = None
        self.decisions.append(Decision(stage=stage, reason=reason, choice=choice, by=by, default=default,
                                       timeout=timeout))
        await self.emit(Decided(stage=stage, choice=choice, by=by))
        return choice

    def decide(self, choice: str) -> bool:
        """Answer the decision the run waits for (from any thread); False when none is waiting."""
        pending = self._pending
        return pending.resolve(choice) if pending is not None else False

    # -- the stages ------------------------------------------------------------------
    async def evaluate_plan(self, query: str, planner: Planner) -> PlanOutcome:
        """Stage 1: plan and refine (see :func:`jurist.research.plan.evaluate_plan`)."""
        await self.check_calibration(st.PLAN)
        await self._remember(query)
        out = await evaluate_plan(query, planner, evaluator=self.evaluators[st.PLAN], config=self.config,
                                  critic=self.critic, trace_id=self.trace_id, emit=self.emit)
        self.plan = out.evaluation
        return out

    async def evaluate_retrieval(self, query: str, plan: Any, sources: list[Any]) -> RetrievalEvaluation:
        """Stage 2: judge the sources (see :func:`jurist.research.retrieval.evaluate_retrieval`). Called
        again for the same query (a search made again), it numbers the search and keeps the
        earlier searches' warnings."""
        await self.check_calibration(st.RETRIEVAL)
        await self._remember(query)
        before, self._searches = self.retrieval, self._searches + 1
        section = await evaluate_retrieval(query, plan, sources, evaluator=self.evaluators[st.RETRIEVAL],
                                           config=self.config, trace_id=self.trace_id, search_attempt=self._searches,
                                           emit=self.emit)
        if before is not None:
            section.warnings[:0] = [*before.warnings, f"search {self._searches - 1} replaced by search {self._searches}"]
        self.retrieval = section
        return section

    async def evaluate_answer(self, query: str, sources: list[Any], synthesiser: Synthesiser, *,
                              answer: str | None = None) -> AnswerOutcome:
        """Stage 3: synthesise, judge, regenerate once (see :func:`jurist.research.answer.evaluate_answer`)."""
        await self.check_calibration(st.ANSWER)
        await self._remember(query)
        out = await evaluate_answer(query, sources, synthesiser, evaluator=self.evaluators[st.ANSWER],
                                    config=self.config, answer=answer, trace_id=self.trace_id, emit=self.emit)
        self.answer = out.evaluation
        return out

    async def pipeline_prompt(self, use: str) -> str | None:
        """The text of the pipeline's ``use`` prompt (``planner``, ``retrieval``, ``synthesis``) this
        run uses: registered with the prompt lab, then routed by the run's trace (the active
        version, or an A/B test's arm); None when the pipeline gave no such prompt. When the lab
        cannot be reached the text given is used, and the record's warnings say so."""
        from jurist.analysis.prompts import register_prompt
        from jurist.judges.templates import PromptTemplate

        if use not in self.pipeline_prompts:
            return None
        name, text = self.pipeline_prompts[use]
        used = PromptTemplate(name=name, version="", text=text)
        try:
            if self.runtime.has_store:
                used = await register_prompt(await self.runtime.astore(), name, text, owner="the research pipeline")
                router = self.runtime.prompts
                if router is not None:
                    used = await router.resolve(used, self.trace_id)
        except Exception as exc:  # the lab is advisory: the pipeline's own text is used
            self._notes.append(f"prompt {name}: the prompt lab could not be read ({type(exc).__name__}: {exc}); "
                               "the pipeline's own text was used")
            logger.warning("%s", self._notes[-1])
        self.prompts_used[name] = used.hash
        return used.text

    async def with_prompts(self, planner: Planner, search: Search, synthesiser: Synthesiser
                           ) -> tuple[Planner, Search, Synthesiser]:
        """The callbacks, each that has a prompt of the pipeline called with ``prompt=`` its routed text."""
        async def bind(use: str, callback: Any) -> Any:
            text = await self.pipeline_prompt(use)
            return callback if text is None else functools.partial(callback, prompt=text)

        return (await bind(st.PLANNER_PROMPT, planner), await bind(st.RETRIEVAL_PROMPT, search),
                await bind(st.SYNTHESIS_PROMPT, synthesiser))

    async def run(self, query: str, planner: Planner, search: Search, synthesiser: Synthesiser) -> ResearchResult:
        """The whole pipeline: plan (evaluated), search, retrieval evaluation, answer; then save.

        With ``decision_timeout`` set, a severe retrieval flag asks :meth:`decision`; ``retry``
        calls ``search`` again and evaluates its sources (at most ``MAX_SEARCH_RETRIES`` times).
        The pipeline's own prompts (:class:`ResearchPipeline`'s ``prompts``) reach their callbacks
        as ``prompt=`` (:meth:`with_prompts`). A failure is emitted as an ``error`` event before it is raised."""
        try:
            await self._remember(query)
            planner, search, synthesiser = await self.with_prompts(planner, search, synthesiser)
            plan = (await self.evaluate_plan(query, planner)).plan
            sources = await search(query, plan)
            retrieval = await self.evaluate_retrieval(query, plan, sources)
            for _ in range(MAX_SEARCH_RETRIES):
                if not retrieval.flagged_severe or self.decision_timeout is None:
                    break
                if await self.decision(timeout=self.decision_timeout, default=self.decision_default) != "retry":
                    break
                sources = await search(query, plan)
                retrieval = await self.evaluate_retrieval(query, plan, sources)
            answer = (await self.evaluate_answer(query, sources, synthesiser)).answer
            return ResearchResult(plan, sources, answer, await self.save())
        except BaseException as exc:
            await self.failed(exc)
            raise

    async def failed(self, exc: BaseException) -> None:
        """Emit the ``error`` event of a run that stopped on ``exc`` (once; not after ``done``)."""
        if self._finished:
            return
        self._finished = True
        await self.emit(Failed(error=str(exc) or type(exc).__name__, error_type=type(exc).__name__))

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
            warnings=[*self._notes, *(w for v in present.values() for w in v.warnings)], decisions=list(self.decisions),
            config=self.config.snapshot(), pipeline_prompts=dict(self.prompts_used),
        )

    async def save(self, *, flush: bool = True) -> EvaluationRecord:
        """Persist the record (one ``evaluations`` row, ``scores`` per stage and
        dimension), then emit ``done``. A store failure is logged, never raised: evaluation
        is advisory."""
        from jurist.research.export import evaluation_row, score_rows

        rec = self.record()
        try:
            store = self.store
            store.save_evaluation(evaluation_row(rec), score_rows(rec, self.config))
            if flush:
                await store.aflush()
        except Exception as exc:  # "Persistence error: log error, continue"
            logger.error("could not persist research evaluation %s: %s", rec.log_id, exc)
        if not self._finished:
            self._finished = True
            await self.emit(Done(overall_score=rec.overall_score, evaluation_skipped=rec.evaluation_skipped,
                                 skip_reason=rec.skip_reason, summary=rec.summary()))
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
        if exc[1] is not None:
            await self.failed(exc[1])
        await self.aclose()
