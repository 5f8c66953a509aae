"""Talking to LLMs: request types, adapters, the Model wrapper, the registry."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jurist.lazy import lazy_names

# Imported now: the function ``scripted`` shares its name with its module, which
# would take the package attribute once imported (and scripted.py is light).
from jurist.models.scripted import ScriptedChat, script, scripted

if TYPE_CHECKING:
    from jurist.models.base import (CallRecord, ChatModel, ChatRequest, Completion, CoverageResult, MeaningJudge,
                                    RelevanceScore, StatementCheck, SupportResult)
    from jurist.models.limiter import Limiter, LimiterBounds, RequestLimiter
    from jurist.models.limiter_pool import LimiterPool, open_limiter
    from jurist.models.model import Model, RetryPolicy
    from jurist.models.registry import LOCAL_JUDGE, judge_ref, resolve_model, resolve_ref
    from jurist.models.structured import (STRUCTURED_OUTPUT_MODES, ModeMemory, ProbeResult, detect_structured_output,
                                          probe_mode)

# Imported on first use: the limiter and the error types load without the adapters and their HTTP client.
__getattr__, __dir__ = lazy_names(__name__, {
    **dict.fromkeys(("CallRecord", "ChatModel", "ChatRequest", "Completion", "CoverageResult", "MeaningJudge",
                     "RelevanceScore", "StatementCheck", "SupportResult"), "jurist.models.base"),
    **dict.fromkeys(("Limiter", "LimiterBounds", "RequestLimiter"), "jurist.models.limiter"),
    **dict.fromkeys(("LimiterPool", "open_limiter"), "jurist.models.limiter_pool"),
    **dict.fromkeys(("Model", "RetryPolicy"), "jurist.models.model"),
    **dict.fromkeys(("LOCAL_JUDGE", "judge_ref", "resolve_model", "resolve_ref"), "jurist.models.registry"),
    **dict.fromkeys(("STRUCTURED_OUTPUT_MODES", "ModeMemory", "ProbeResult", "detect_structured_output", "probe_mode"),
                    "jurist.models.structured"),
})

__all__ = [
    "LOCAL_JUDGE",
    "STRUCTURED_OUTPUT_MODES",
    "CallRecord",
    "ChatModel",
    "ChatRequest",
    "Completion",
    "CoverageResult",
    "Limiter",
    "LimiterBounds",
    "LimiterPool",
    "MeaningJudge",
    "ModeMemory",
    "Model",
    "ProbeResult",
    "RelevanceScore",
    "RequestLimiter",
    "RetryPolicy",
    "ScriptedChat",
    "StatementCheck",
    "SupportResult",
    "detect_structured_output",
    "judge_ref",
    "open_limiter",
    "probe_mode",
    "resolve_model",
    "resolve_ref",
    "script",
    "scripted",
]
