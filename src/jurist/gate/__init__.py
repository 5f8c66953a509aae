"""The response gate: evaluate a generated answer before it is final; regenerate
with the judge's feedback below a threshold; blocking, revision and parallel
strategies; SSE-ready events; continuation after errors."""

from jurist.errors import EvaluationFailed, IterationLimit
from jurist.gate.config import GateConfig
from jurist.gate.evaluators import (
    ComprehensivenessEvaluator,
    FunctionEvaluator,
    GateEvaluator,
    QualityEvaluator,
    TemplateEvaluator,
)
from jurist.gate.gate import Gate
from jurist.gate.records import GateRecord, evaluations_list, result_json
from jurist.gate.types import (
    CALL_COMPREHENSIVE_RETRY,
    CALL_GENERATION,
    CALL_QUALITY_EVALUATION,
    CALL_REGENERATION,
    CALL_SELF_EVALUATION,
    ENCOURAGEMENT,
    REVISION_MESSAGE,
    Attempt,
    Evaluation,
    GateEvent,
    GateResult,
    Generator,
)

__all__ = [
    "Attempt", "CALL_COMPREHENSIVE_RETRY", "CALL_GENERATION", "CALL_QUALITY_EVALUATION", "CALL_REGENERATION",
    "CALL_SELF_EVALUATION", "ComprehensivenessEvaluator", "ENCOURAGEMENT", "Evaluation", "EvaluationFailed",
    "FunctionEvaluator", "Gate", "GateConfig", "GateEvaluator", "GateEvent", "GateRecord", "GateResult", "Generator",
    "IterationLimit", "QualityEvaluator", "REVISION_MESSAGE", "TemplateEvaluator",
    "evaluations_list", "result_json",
]
