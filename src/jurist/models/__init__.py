"""Talking to LLMs: request types, adapters, the Model wrapper, the registry."""

from jurist.models.base import (
    CallRecord,
    ChatModel,
    ChatRequest,
    Completion,
    CoverageResult,
    MeaningJudge,
    RelevanceScore,
    StatementCheck,
    SupportResult,
)
from jurist.models.limiter import Limiter, limiter_for
from jurist.models.model import Model, RetryPolicy
from jurist.models.registry import LOCAL_JUDGE, judge_ref, resolve_model, resolve_ref
from jurist.models.scripted import ScriptedChat, script, scripted

__all__ = [
    "LOCAL_JUDGE",
    "CallRecord",
    "ChatModel",
    "ChatRequest",
    "Completion",
    "CoverageResult",
    "Limiter",
    "MeaningJudge",
    "Model",
    "RelevanceScore",
    "RetryPolicy",
    "ScriptedChat",
    "StatementCheck",
    "SupportResult",
    "judge_ref",
    "limiter_for",
    "resolve_model",
    "resolve_ref",
    "script",
    "scripted",
]
