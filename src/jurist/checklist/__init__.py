"""Continuous checklist: on every user message one cheap judge call checks every
still-unchecked point; hidden feedback shapes the tutor's next reply; FSRS
schedules each point per learner. See docs/checklist.md."""

from jurist.checklist.evaluator import BatchEvaluation, ChecklistEvaluator, checklist_judge_ref, parse_batch_response
from jurist.checklist.points import Checklist, ChecklistMessage, ChecklistPoint, load_checklist, parse_checklist
from jurist.checklist.records import ChecklistTurn
from jurist.checklist.scheduling import DuePoint, PointScheduler, default_scheduler, due_points, rating_for
from jurist.checklist.session import (
    EVENTS,
    OBSERVATION_PREFIX,
    ChecklistSession,
    PointState,
    ProcessMessageResult,
    tutor_ref,
)

__all__ = [
    "EVENTS",
    "OBSERVATION_PREFIX",
    "BatchEvaluation",
    "Checklist",
    "ChecklistEvaluator",
    "ChecklistMessage",
    "ChecklistPoint",
    "ChecklistSession",
    "ChecklistTurn",
    "DuePoint",
    "PointScheduler",
    "PointState",
    "ProcessMessageResult",
    "checklist_judge_ref",
    "parse_batch_response",
    "default_scheduler",
    "due_points",
    "load_checklist",
    "parse_checklist",
    "rating_for",
    "tutor_ref",
]
