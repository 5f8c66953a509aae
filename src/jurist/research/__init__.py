"""Staged research evaluation: plan, retrieval and answer, with a plan-refinement
loop, a fail-safe wrapper, one record per query, persisted and exportable.

See ``docs/research.md``. The entry point is :class:`ResearchEvaluation`;
:func:`evaluate_plan`, :func:`evaluate_retrieval` and :func:`evaluate_answer`
are the stages on their own.
"""

from jurist.errors import EvaluationUnavailable, ResearchBlocked
from jurist.research.answer import AnswerOutcome, Synthesiser, evaluate_answer
from jurist.research.config import ResearchConfig, load_research_config, research_config
from jurist.research.evaluation import ResearchEvaluation, ResearchPipeline, ResearchResult, query_id
from jurist.research.events import EventSink, PendingDecision, ResearchEvent
from jurist.research.export import export_record, find_record, write_export
from jurist.research.failsafe import StageOptions, guarded
from jurist.research.local import LocalPlanCritic, LocalResearchEvaluator
from jurist.research.plan import LLMPlanCritic, PlanCritic, PlanOutcome, Planner, evaluate_plan, plan_queries
from jurist.research.records import (
    AnswerAttempt,
    AnswerEvaluation,
    Decision,
    EscalationResult,
    EvaluationRecord,
    EvaluatorResult,
    Issue,
    IterationDecision,
    PlanAttempt,
    PlanEvaluation,
    RetrievalEvaluation,
    SourceEvaluation,
)
from jurist.research.retrieval import evaluate_retrieval
from jurist.research.stages import ANSWER, PLAN, RETRIEVAL, StageEvaluator
from jurist.research.vocabulary import DEFAULT_ROLES, DIMENSION_DESCRIPTIONS, ROLE_INSTRUCTIONS

__all__ = [
    "ANSWER",
    "DEFAULT_ROLES",
    "DIMENSION_DESCRIPTIONS",
    "PLAN",
    "RETRIEVAL",
    "ROLE_INSTRUCTIONS",
    "AnswerAttempt",
    "AnswerEvaluation",
    "AnswerOutcome",
    "Decision",
    "EscalationResult",
    "EvaluationRecord",
    "EvaluationUnavailable",
    "EvaluatorResult",
    "EventSink",
    "Issue",
    "IterationDecision",
    "LLMPlanCritic",
    "LocalPlanCritic",
    "LocalResearchEvaluator",
    "PlanAttempt",
    "PlanCritic",
    "PlanEvaluation",
    "PendingDecision",
    "PlanOutcome",
    "Planner",
    "ResearchBlocked",
    "ResearchConfig",
    "ResearchEvaluation",
    "ResearchEvent",
    "ResearchPipeline",
    "ResearchResult",
    "RetrievalEvaluation",
    "SourceEvaluation",
    "StageEvaluator",
    "StageOptions",
    "Synthesiser",
    "evaluate_answer",
    "evaluate_plan",
    "evaluate_retrieval",
    "export_record",
    "find_record",
    "guarded",
    "load_research_config",
    "plan_queries",
    "query_id",
    "research_config",
    "write_export",
]
