"""Stored evaluation payloads, read back as their models.

Every ``evaluations`` row carries a payload whose ``kind`` says which model
reads it: :class:`~jurist.rubrics.RubricResult` (``rubric``, result.json),
:class:`~jurist.gate.GateRecord` (``gate``), the research
:class:`~jurist.research.records.EvaluationRecord` (``research``) and
:class:`~jurist.checklist.ChecklistTurn` (``checklist``). :data:`Payload` is
their union, discriminated on ``kind``.

Payloads stored before ``kind`` and ``version`` existed take the kind from
their row's ``kind`` column and the first version from the model's default;
fields added later have defaults, so old rows keep loading.
"""

from __future__ import annotations

from typing import Annotated, Any, Union

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from jurist.checklist.records import ChecklistTurn
from jurist.errors import PayloadError
from jurist.gate.records import GateRecord
from jurist.jsonfiles import unknown_field
from jurist.research.records import EvaluationRecord
from jurist.rubrics.results import RubricResult

Payload = Annotated[Union[RubricResult, GateRecord, EvaluationRecord, ChecklistTurn], Field(discriminator="kind")]
KINDS = ("rubric", "gate", "research", "checklist")
_MODELS: dict[str, type[BaseModel]] = {"rubric": RubricResult, "gate": GateRecord, "research": EvaluationRecord,
                                       "checklist": ChecklistTurn}

_ADAPTER: TypeAdapter[Payload] = TypeAdapter(Payload)


def read_payload(kind: str | None, data: Any) -> Payload:
    """The payload of an ``evaluations`` row of ``kind`` as its model.

    A payload without its own ``kind`` takes the row's. Raises
    :class:`~jurist.errors.PayloadError`, saying what does not fit, for an
    unknown kind or a payload its kind's model cannot read.
    """
    if not isinstance(data, dict):
        raise PayloadError(f"the stored payload is {type(data).__name__}, not a JSON object", kind=kind)
    own = data.get("kind", kind)
    if own not in KINDS:
        raise PayloadError(f"unknown payload kind {own!r}; this version of jurist reads {', '.join(KINDS)}",
                           kind=own if isinstance(own, str) else None)
    try:
        return _ADAPTER.validate_python(data if "kind" in data else {**data, "kind": own})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"][1:]) or "payload"  # loc[0] is the union tag
        if first["type"] == "extra_forbidden":  # unknown field 'feedbak' (did you mean 'feedback'?)
            first["msg"] = unknown_field(first, _MODELS[own], skip=1)
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise PayloadError(f"the stored {own} payload does not fit its format: {where}: {first['msg']}{more}",
                           kind=own) from None

