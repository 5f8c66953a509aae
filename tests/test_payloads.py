"""Stored payloads read back as their models: the union on ``kind``, old rows, round trips, errors.

``tests/data/payloads/stored_before_kind.json`` holds payloads exactly as the
capabilities stored them before payloads had ``kind`` and ``version`` (one or
two per kind: a free-form and a local-judge item rubric, a regenerated and a
failed gate request, a full and a skipped research evaluation, a checklist turn).
"""

from __future__ import annotations

import json

import pytest

from jurist.checklist import ChecklistTurn
from jurist.errors import PayloadError, StoreError
from jurist.gate import GateRecord
from jurist.payloads import KINDS, read_payload
from jurist.research.records import EvaluationRecord
from jurist.rubrics import RubricResult
from tests.conftest import REPO

DATA = REPO / "tests" / "data" / "payloads"
OLD = json.loads((DATA / "stored_before_kind.json").read_text(encoding="utf-8"))
MODELS = {"rubric": RubricResult, "gate": GateRecord, "research": EvaluationRecord, "checklist": ChecklistTurn}
OLD_ROWS = [(kind, p) for kind, payloads in OLD.items() for p in payloads]
# Fields added after the fixture was stored, with the value an old row reads as.
LATER = {"research": {"decisions": [], "pipelinePrompts": {}}, "checklist": {"undecided": []}}
# Fields added since inside a record's parts (a research evaluator result, a gate evaluation),
# with the value an old row reads as: left out where they have it, to compare with the row as stored.
NESTED_LATER = {"research": {"templateHash": None}, "gate": {"template_hash": None}}


def without_later(kind: str, data):
    """``data`` without the fields :data:`NESTED_LATER` names where they hold their default."""
    later = NESTED_LATER.get(kind, {})
    if isinstance(data, dict):
        return {k: without_later(kind, v) for k, v in data.items() if not (k in later and v == later[k])}
    if isinstance(data, list):
        return [without_later(kind, v) for v in data]
    return data


def test_the_fixture_is_from_before_kind_and_covers_every_kind():
    assert set(OLD) == set(KINDS) == set(MODELS)
    assert all("kind" not in p for _, p in OLD_ROWS)
    assert all("version" not in p for kind, p in OLD_ROWS if kind != "rubric")  # result.json always had one


@pytest.mark.parametrize("kind, stored", OLD_ROWS, ids=[f"{k}-{i}" for i, (k, _) in enumerate(OLD_ROWS)])
def test_old_rows_load_through_the_union_with_the_rows_kind(kind, stored):
    payload = read_payload(kind, stored)
    assert type(payload) is MODELS[kind]
    assert payload.kind == kind and payload.version == "1.0"
    again = without_later(kind, payload.to_json())
    # nothing lost, nothing changed: only kind (and version) are added, and later fields at their defaults
    added = {"kind", "version"} - set(stored)
    later = LATER.get(kind, {})
    assert {k: again[k] for k in later} == later
    assert {k: v for k, v in again.items() if k not in added and k not in later} == stored
    assert again["kind"] == kind


@pytest.mark.parametrize("kind, stored", OLD_ROWS, ids=[f"{k}-{i}" for i, (k, _) in enumerate(OLD_ROWS)])
def test_each_kind_round_trips(kind, stored):
    payload = read_payload(kind, stored)
    data = json.loads(json.dumps(payload.to_json()))  # as the JSON column gives it back
    assert read_payload("ignored when the payload has its own kind", data) == payload
    assert read_payload(kind, data).to_json() == data


def test_typed_access_on_old_rows():
    rubric = read_payload("rubric", OLD["rubric"][1])
    assert isinstance(rubric, RubricResult)
    assert rubric.rubric_scores[0].items is not None and rubric.rubric_scores[0].items[0].met is True
    gate = read_payload("gate", OLD["gate"][0])
    assert isinstance(gate, GateRecord) and gate.strategy == "blocking"
    assert [gate.evaluation_of(a).passed for a in gate.attempts] == [False, True]
    research = read_payload("research", OLD["research"][0])
    assert isinstance(research, EvaluationRecord) and research.plan_evaluation is not None
    assert research.plan_evaluation.attempts[0].iteration_decision is not None
    turn = read_payload("checklist", OLD["checklist"][0])
    assert isinstance(turn, ChecklistTurn) and turn.recalled == {"adenosine": 0.92}


def test_fields_added_later_have_defaults():
    old = dict(OLD["gate"][0])
    for added in ("strategy", "evaluator", "evaluations_list", "continue_context"):
        old.pop(added)
    gate = read_payload("gate", old)
    assert isinstance(gate, GateRecord)
    assert gate.strategy is None and gate.evaluations_list == [] and gate.continue_context is None


def test_unknown_kind_is_a_clear_error():
    with pytest.raises(PayloadError) as err:
        read_payload("verdict", {"score": 1})
    assert "unknown payload kind 'verdict'" in str(err.value) and "rubric, gate, research, checklist" in str(err.value)
    assert isinstance(err.value, StoreError) and err.value.kind == "verdict"
    with pytest.raises(PayloadError, match="unknown payload kind 'mystery'"):
        read_payload("rubric", {"kind": "mystery"})  # the payload's own kind wins


def test_a_payload_that_does_not_fit_says_where():
    with pytest.raises(PayloadError) as err:
        read_payload("rubric", {"synthetic": True})
    assert "rubric payload does not fit" in str(err.value) and "session_id" in str(err.value)
    bad = dict(OLD["checklist"][0], message_seq="first")
    with pytest.raises(PayloadError, match="message_seq"):
        read_payload("checklist", bad)
    with pytest.raises(PayloadError, match="not a JSON object"):
        read_payload("gate", ["not", "an", "object"])
