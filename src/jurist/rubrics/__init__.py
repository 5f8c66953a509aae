"""Rubric scoring of chat sessions: one judge call per rubric, in parallel; batches."""

from jurist.rubrics.api import build_judge, evaluate, evaluate_batch, evaluate_batch_sync, evaluate_sync
from jurist.rubrics.batch import BatchReport, run_batch
from jurist.rubrics.judging import RubricJudge, item_score
from jurist.rubrics.models import Rubric, RubricItem, RubricSet, load_rubrics
from jurist.rubrics.results import BatchSummary, RubricResult, RubricScore
from jurist.rubrics.scoring import SessionEvaluator, aggregate
from jurist.rubrics.sessions import ChatSession, Message, format_session, load_session, parse_session

__all__ = [
    "BatchReport",
    "BatchSummary",
    "ChatSession",
    "RubricJudge",
    "Message",
    "Rubric",
    "RubricItem",
    "RubricResult",
    "RubricScore",
    "RubricSet",
    "SessionEvaluator",
    "aggregate",
    "build_judge",
    "evaluate",
    "evaluate_batch",
    "evaluate_batch_sync",
    "evaluate_sync",
    "format_session",
    "item_score",
    "load_rubrics",
    "load_session",
    "parse_session",
    "run_batch",
]
