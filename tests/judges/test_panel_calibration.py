"""A panel with require_calibration: refused before any call unless every role judge is
calibrated on its dimensions (calibrate_panel against a real HTTP judge, or stored rows)."""

from __future__ import annotations

import json

import pytest

import jurist
from jurist.analysis.calibrate_panel import calibrate_panel
from jurist.errors import CalibrationRequired, InputError
from jurist.judges.calibration import CalibrationRequirement
from jurist.judges.panel import CALIBRATE_PANEL, Panel, Role
from jurist.testing import Reply
from tests.calibrations import label_set, store_calibration

TASK = "Judge the answer to the question."
ROLES = [Role("checker", ["accuracy", "clarity"], model="fake/a"), Role("reader", ["tone"], model="fake/b")]
WEIGHTS = {"accuracy": 0.5, "clarity": 0.3, "tone": 0.2}
BAR = CalibrationRequirement(min_kappa=0.6)


def role_judge(body: dict) -> Reply:
    """Every dimension asked for: 0.9 for an answer saying GOOD, else 0.2."""
    schema = body["response_format"]["json_schema"]["schema"]
    dims = list(schema["properties"]["scores"]["properties"])
    good = "GOOD" in body["messages"][-1]["content"].rpartition('id="answer"')[2]
    return Reply(text=json.dumps({"scores": {d: 0.9 if good else 0.2 for d in dims}, "confidence": 0.9,
                                  "critique": "ok"}))


def _runtime(provider):
    return jurist.open(providers={"fake": {"type": "openai", "base_url": provider.base_url, "api_key": "k"}},
                       max_retries=0)


def _items(n: int = 6) -> dict[str, dict[str, str]]:
    return {f"q{k}": {"question": f"question {k}", "answer": ("GOOD" if k % 2 else "weak") + f" answer {k}"}
            for k in range(n)}


async def test_an_uncalibrated_panel_refuses_before_any_call(provider):
    provider.default = role_judge
    async with _runtime(provider) as rt:
        panel = Panel(ROLES, WEIGHTS, runtime=rt, require_calibration=BAR)
        with pytest.raises(CalibrationRequired) as caught:
            await panel.evaluate({"answer": "x"}, task=TASK)
        await panel.aclose()
    assert provider.requests == []
    message = str(caught.value)
    for model, dim in (("fake/a", "accuracy"), ("fake/a", "clarity"), ("fake/b", "tone")):
        assert f"judge {model}, template panel_role (" in message
        assert f"rubric {dim!r}: no stored calibration" in message
    assert caught.value.commands == [CALIBRATE_PANEL]


async def test_calibrate_panel_stores_one_calibration_per_role_and_dimension_and_the_panel_runs(provider):
    provider.default = role_judge
    items = _items()
    labels = label_set([(item, dim, "GOOD" in text["answer"], "ana") for item, text in items.items()
                        for dim in ("accuracy", "clarity", "tone")])
    async with _runtime(provider) as rt:
        panel = Panel(ROLES, WEIGHTS, runtime=rt, require_calibration=BAR)
        report = await calibrate_panel(panel, items, labels, task=TASK, pass_marks={"accuracy": 0.7},
                                       resamples=100)
        assert len(provider.requests) == 12  # two roles, six items; the bar was not checked
        assert [(r.rubric, r.name, r.pass_at) for r in report.rubrics] == [
            ("accuracy", "accuracy (checker)", 0.7), ("clarity", "clarity (checker)", 0.7),
            ("tone", "tone (reader)", 0.7)]
        assert all(r.agreement.judge_vs_humans.weighted_kappa.value == 1.0 and r.calibration_id
                   for r in report.rubrics)
        result = await panel.evaluate(items["q1"], task=TASK)
        await panel.aclose()
        assert result.status == "ok" and result.scores == {"accuracy": 0.9, "clarity": 0.9, "tone": 0.9}

        # a role's instructions are part of what was calibrated: other instructions, no calibration
        other = Panel([Role("checker", ["accuracy", "clarity"], model="fake/a", instructions="Be terse."),
                       ROLES[1]], WEIGHTS, runtime=rt, require_calibration=BAR)
        with pytest.raises(CalibrationRequired) as caught:
            await other.evaluate(items["q1"], task=TASK)
        assert "rubric 'accuracy'" in str(caught.value) and "rubric 'tone'" not in str(caught.value)
        await other.aclose()


async def test_a_bar_per_dimension_checks_only_those_and_a_low_kappa_refuses(provider):
    provider.default = role_judge
    async with _runtime(provider) as rt:
        panel = Panel(ROLES, WEIGHTS, runtime=rt, require_calibration={"tone": BAR})
        tone = next(ident for _, ident in panel.identities() if ident.rubric == "tone")
        store_calibration(rt.store, tone, 0.35)
        with pytest.raises(CalibrationRequired) as caught:
            await panel.evaluate({"answer": "GOOD"}, task=TASK)
        assert "rubric 'tone'" in str(caught.value) and "κ 0.350, below min_kappa 0.6" in str(caught.value)
        assert "accuracy" not in str(caught.value)
        store_calibration(rt.store, tone, 0.8)
        assert (await panel.evaluate({"answer": "GOOD"}, task=TASK)).status == "ok"
        await panel.aclose()


async def test_panel_labels_are_checked_before_any_call(provider):
    provider.default = role_judge
    async with _runtime(provider) as rt:
        panel = Panel(ROLES, WEIGHTS, runtime=rt)
        for rows, message in (([("q1", "humour", True, "ana")], "dimension 'humour' is not scored"),
                              ([("q1", "tone", 4, "ana")], "labelled pass or fail"),
                              ([("q9", "tone", True, "ana")], "no item 'q9'")):
            with pytest.raises(InputError, match=message):
                await calibrate_panel(panel, _items(), label_set(rows), task=TASK)
        await panel.aclose()
    assert provider.requests == []
