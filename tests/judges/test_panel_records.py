"""The panel's results are the research record's parts: one model each (no twin), with the
outcome vocabulary for statuses and each JSON format's documented names."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from jurist.judges.panel import Escalation, PanelResult, RoleResult
from jurist.research.records import EscalationResult, EvaluatorResult, PlanAttempt


def role(**kw: object) -> RoleResult:
    fields: dict[str, object] = dict(role="ra", model="m/x", dimensions=["q"], scores={"q": 0.5}, confidence=0.9,
                                     critique="fine", raw_response="{}", latency_ms=12.5, tokens_used=3)
    return RoleResult.model_validate({**fields, **kw})


def test_the_records_evaluator_and_escalation_results_are_the_panels_own() -> None:
    assert EvaluatorResult is RoleResult and EscalationResult is Escalation


def test_one_latency_field_written_by_each_formats_name() -> None:
    r = role()
    panel = PanelResult(status="ok", scores={"q": 0.5}, overall=0.5, confidence=0.9, passed=False,
                        panel_scores={"q": 0.5}, panel_overall=0.5, role_results=[r])
    assert panel.to_json()["role_results"][0]["latency_ms"] == 12.5  # the panel's JSON: snake_case
    attempt = PlanAttempt(attempt_number=1, evaluator_results=[r]).to_json()["evaluatorResults"][0]
    assert attempt["latency"] == 12.5 and attempt["rawResponse"] == "{}" and "latency_ms" not in attempt
    # either spelling reads back as the one field
    assert RoleResult.model_validate(attempt).latency_ms == 12.5
    assert RoleResult.model_validate(panel.to_json()["role_results"][0]) == r


def test_statuses_are_the_outcome_vocabulary_and_the_panel_json_keeps_scored() -> None:
    with pytest.raises(ValidationError):
        role(status="error")
    with pytest.raises(ValidationError):
        role(confidence=0.5, extra_field=1)
    panel = PanelResult(status="scored", scores={}, overall=None, confidence=0.0, passed=None, panel_scores={},
                        panel_overall=None)
    assert panel.status == "ok" and panel.to_json()["status"] == "scored"
    skipped = panel.model_copy(update={"status": "skipped"})
    assert skipped.to_json()["status"] == "skipped"


def test_an_escalation_names_its_first_trigger_in_the_record_only() -> None:
    esc = Escalation(triggers=["disagreement", "borderline"], model="m/big", panel_review="r", final_verdict="v",
                     latency_ms=4.0)
    assert esc.trigger == "disagreement"
    recorded = PlanAttempt(attempt_number=1, escalation=esc).to_json()["escalation"]
    assert list(recorded)[:2] == ["trigger", "triggers"] and recorded["latency"] == 4.0
    panel = PanelResult(status="ok", scores={}, overall=None, confidence=0.0, passed=None, panel_scores={},
                        panel_overall=None, escalation=esc)
    assert "trigger" not in panel.to_json()["escalation"] and panel.to_json()["escalation"]["latency_ms"] == 4.0
    assert Escalation.model_validate(recorded) == esc
