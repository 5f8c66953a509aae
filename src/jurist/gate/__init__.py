"""The response gate: evaluate a generated answer before it is final; regenerate
with the judge's feedback below a threshold; blocking, revision and parallel
strategies; SSE-ready events; continuation after errors.

:class:`GateRecord` is the result of a gated request (``GateResult`` is the same
class under its former name), :data:`GateEvent` the union of its events."""

from jurist.errors import EvaluationFailed, IterationLimit
from jurist.gate.config import GateConfig
from jurist.gate.evaluators import (
    ComprehensivenessEvaluator,
    FunctionEvaluator,
    GateEvaluator,
    QualityEvaluator,
    TemplateEvaluator,
)
from jurist.gate.events import (
    DeltaEvent,
    DoneEvent,
    ErrorEvent,
    EvaluationEvent,
    GateEvent,
    RevisionEvent,
    ThinkingEvent,
)
from jurist.gate.gate import Gate
from jurist.gate.records import Attempt, CallEntry, Evaluation, GateRecord, evaluations_list, gate_payload
from jurist.gate.types import (
    CALL_COMPREHENSIVE_RETRY,
    CALL_GENERATION,
    CALL_QUALITY_EVALUATION,
    CALL_REGENERATION,
    CALL_SELF_EVALUATION,
    ENCOURAGEMENT,
    REVISION_MESSAGE,
    AcceptReason,
    Generator,
)

GateResult = GateRecord  # the former name of the gate's result

__all__ = [
    "AcceptReason", "Attempt", "CALL_COMPREHENSIVE_RETRY", "CALL_GENERATION", "CALL_QUALITY_EVALUATION",
    "CALL_REGENERATION", "CALL_SELF_EVALUATION", "CallEntry", "ComprehensivenessEvaluator", "DeltaEvent",
    "DoneEvent", "ENCOURAGEMENT", "ErrorEvent", "Evaluation", "EvaluationEvent", "EvaluationFailed",
    "FunctionEvaluator", "Gate", "GateConfig", "GateEvaluator", "GateEvent", "GateRecord", "GateResult", "Generator",
    "IterationLimit", "QualityEvaluator", "REVISION_MESSAGE", "RevisionEvent", "TemplateEvaluator", "ThinkingEvent",
    "evaluations_list", "gate_payload",
]
