"""A gate with require_calibration: refused before any call without a good enough stored
calibration of its judge, run with one (a real HTTP judge, calibrated with calibrate_gate)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

import jurist
from jurist.analysis.calibrate_gate import calibrate_gate
from jurist.errors import CalibrationRequired, ConfigError
from jurist.gate import Gate, GateConfig
from jurist.judges.calibration import CalibrationRequirement, identity_of
from jurist.testing import Reply
from tests.calibrations import label_set, store_calibration, write_sessions
from tests.gate.helpers import QUESTION, bad, good

BAR = {"min_kappa": 0.6}


def _runtime(provider):
    return jurist.open(providers={"fake": {"type": "openai", "base_url": provider.base_url, "api_key": "k"}},
                       max_retries=0)


def _judge_and_writer(payload: dict) -> Reply:
    """The judge scores an answer GOOD or POOR by its word; the writer answers GOOD."""
    prompt = "\n".join(m["content"] for m in payload["messages"])  # instructions (system), then the data
    if "quality_score" in prompt:
        return Reply(text=good(0.9) if "GOOD" in prompt.rpartition("<response")[2] else bad(0.2))
    return Reply(text="GOOD: built in 1889, 330 m tall.")


def _gate(rt, **cfg) -> Gate:
    return Gate(GateConfig(require_calibration=BAR, **cfg), runtime=rt, judge="fake/judge")


async def test_a_gate_without_a_calibration_refuses_before_any_call_and_says_how_to_make_one(provider):
    provider.default = _judge_and_writer
    async with _runtime(provider) as rt:
        gate = _gate(rt)
        with pytest.raises(CalibrationRequired) as caught:
            await gate.run(QUESTION, "fake/writer", wait_for_evaluation=True)
        with pytest.raises(CalibrationRequired):
            await gate.evaluate(QUESTION, "an answer")
        await gate.aclose()
    assert provider.requests == []  # neither the writer nor the judge was asked
    message = str(caught.value)
    judge = identity_of(gate.evaluator.judge, "quality")
    assert f"judge fake/judge, template gate_quality ({judge.template_hash}), rubric 'quality': no stored " \
           "calibration (min_kappa 0.6)" in message
    command = ("jurist calibrate --gate quality --judge fake/judge --threshold 0.4 --labels LABELS.jsonl "
               "--sessions SESSIONS/")
    assert caught.value.commands == [command] and command in message


async def test_a_gate_calibrated_by_calibrate_gate_runs(provider, tmp_path):
    provider.default = _judge_and_writer
    answers = {f"a{k}": ("GOOD answer" if k % 2 else "POOR answer") + f" number {k}" for k in range(8)}
    sessions = write_sessions(tmp_path / "sessions", answers)
    labels = label_set([(item, "quality", text.startswith("GOOD"), who) for item, text in answers.items()
                        for who in ("ana", "ben")])
    async with _runtime(provider) as rt:
        gate = _gate(rt)
        report = await calibrate_gate(gate, labels, [sessions], resamples=200)
        assert len(provider.requests) == 8  # one judge call per labelled answer, none refused
        cal = report.rubrics[0]
        assert cal.agreement.judge_vs_humans.weighted_kappa.value == 1.0 and cal.agreement.judge_vs_humans.n == 16
        assert cal.threshold is not None and cal.threshold.threshold == 0.9 and cal.threshold.agreement.value == 1.0
        assert cal.calibration_id and report.target == "gate"

        result = await gate.run(QUESTION, "fake/writer", wait_for_evaluation=True)
        await gate.aclose()
    assert result.accept_reason == "feedback_disabled" and result.evaluations[0].quality_score == 0.9
    assert len(provider.requests) == 10  # the writer and the judge


async def test_a_calibration_below_the_bar_refuses_and_names_its_kappa(provider):
    provider.default = _judge_and_writer
    async with _runtime(provider) as rt:
        gate = _gate(rt)
        judge = identity_of(gate.evaluator.judge, "quality")
        cid = store_calibration(rt.store, judge, 0.9)
        newest = store_calibration(rt.store, judge, 0.41)  # the newest calibration counts, not the best
        with pytest.raises(CalibrationRequired) as caught:
            await gate.run(QUESTION, "fake/writer", wait_for_evaluation=True)
        assert f"the newest calibration ({newest}, " in str(caught.value) and "has κ 0.410, below min_kappa 0.6" \
            in str(caught.value) and cid not in str(caught.value)
        store_calibration(rt.store, judge, None)  # κ undefined (every rating alike): refused too
        with pytest.raises(CalibrationRequired, match="κ undefined"):
            await _gate(rt).run(QUESTION, "fake/writer")
        await gate.aclose()
    assert provider.requests == []


async def test_a_calibration_of_another_template_model_or_evaluator_does_not_count(provider):
    provider.default = _judge_and_writer
    async with _runtime(provider) as rt:
        gate = _gate(rt)
        judge = identity_of(gate.evaluator.judge, "quality")
        store_calibration(rt.store, replace(judge, template_hash="0" * 16), 0.95)
        store_calibration(rt.store, replace(judge, judge_model="fake/other"), 0.95)
        comprehensive = _gate(rt, evaluator="comprehensiveness")
        store_calibration(rt.store, identity_of(comprehensive.evaluator.judge, "comprehensiveness"), 0.95)
        with pytest.raises(CalibrationRequired, match="no stored calibration"):
            await gate.run(QUESTION, "fake/writer", wait_for_evaluation=True)
        await comprehensive.astart()  # its own judge is calibrated: it starts
        store_calibration(rt.store, judge, 0.6)  # exactly the bar: enough
        result = await gate.run(QUESTION, "fake/writer", wait_for_evaluation=True)
        await gate.aclose()
        await comprehensive.aclose()
    assert result.evaluations[0].quality_score == 0.9


async def test_require_calibration_is_validated_and_off_by_default(provider):
    with pytest.raises(ValueError):
        GateConfig(require_calibration={"min_kappa": 1.5})
    with pytest.raises(ValueError):
        GateConfig(require_calibration={"min_kappa": 0.6, "kappa": "weighted"})
    assert GateConfig().require_calibration is None
    assert GateConfig(**json.loads('{"require_calibration": {"min_kappa": 0.7}}')).require_calibration == \
        CalibrationRequirement(min_kappa=0.7)

    async def judge_fn(messages, answer):
        return 0.9

    async with _runtime(provider) as rt:
        with pytest.raises(ConfigError, match="require_calibration needs a judge"):
            Gate(GateConfig(require_calibration=BAR), runtime=rt, evaluator=judge_fn)
        provider.default = _judge_and_writer
        plain = Gate(GateConfig(), runtime=rt, judge="fake/judge")  # no bar: no look-up, it runs
        assert (await plain.run(QUESTION, "fake/writer", wait_for_evaluation=True)).evaluations[0].quality_score == 0.9
        await plain.aclose()


async def test_a_gate_with_its_own_template_is_calibrated_from_python(provider, tmp_path):
    from jurist.gate import TemplateEvaluator
    from jurist.judges.templates import PromptTemplate

    provider.default = _judge_and_writer
    template = PromptTemplate("strict_quality", "1", "Judge strictly; give quality_score from 0 to 1.\n"
                                                      "{question}\n{answer}")
    schema = {"type": "object", "properties": {"quality_score": {"type": "number"}}, "required": ["quality_score"]}
    answers = {f"t{k}": ("GOOD" if k % 2 else "POOR") + f" answer {k}" for k in range(6)}
    sessions = write_sessions(tmp_path / "sessions", answers)
    labels = label_set([(item, "custom", text.startswith("GOOD"), "ana") for item, text in answers.items()])
    async with _runtime(provider) as rt:
        judge = rt.model("fake/judge")
        gate = Gate(GateConfig(require_calibration=BAR), runtime=rt,
                    evaluator=TemplateEvaluator(judge, template, schema))
        with pytest.raises(CalibrationRequired) as caught:
            await gate.astart()
        assert "template strict_quality" in str(caught.value) and "rubric 'custom'" in str(caught.value)
        assert caught.value.commands[0].startswith("await jurist.analysis.calibrate_gate.calibrate_gate(gate, labels")
        report = await calibrate_gate(gate, labels, [sessions], resamples=0)
        assert report.rubrics[0].agreement.judge_vs_humans.weighted_kappa.value == 1.0
        result = await gate.run(QUESTION, "fake/writer", wait_for_evaluation=True)
        await gate.aclose()
        await judge.aclose()
    assert result.evaluations[0].quality_score == 0.9


async def test_the_command_names_the_settings_file_and_store_the_gate_used(provider, tmp_path):
    from types import SimpleNamespace

    from jurist.judges.calibration import with_store_options

    provider.default = _judge_and_writer
    config = tmp_path / "gate.yaml"
    config.write_text(f"providers:\n  fake:\n    type: openai\n    base_url: {provider.base_url}\n    api_key: k\n")
    url = f"sqlite:///{tmp_path}/calibrations.db"
    async with jurist.open(config, database_url=url) as rt:
        gate = _gate(rt)
        with pytest.raises(CalibrationRequired) as caught:
            await gate.astart()
        await gate.aclose()
    assert caught.value.commands == [
        "jurist calibrate --gate quality --judge fake/judge --threshold 0.4 --labels LABELS.jsonl --sessions SESSIONS/"
        f" --config {config} --db {url}"]
    assert f"calibrations looked up in {url}" in str(caught.value)
    secret = SimpleNamespace(settings=SimpleNamespace(config_file=None, database_url="postgresql://u:pw@db/j"))
    assert with_store_options("jurist calibrate --gate quality", secret) == "jurist calibrate --gate quality"
    assert with_store_options("await calibrate_gate(...)", secret) == "await calibrate_gate(...)"


async def test_a_calibration_holds_for_the_text_the_prompt_lab_routes_the_judge_to(provider, tmp_path):
    """An active version of gate_quality is another judge: the shipped text's calibration does not
    count; during an A/B test both arms need one, and no calibration can be made."""
    from jurist.analysis.prompt_tests import activate_version, start_test
    from jurist.analysis.prompts import create_prompt_version, prompt_version

    provider.default = _judge_and_writer
    answers = {f"p{k}": ("GOOD" if k % 2 else "POOR") + f" answer {k}" for k in range(6)}
    sessions = write_sessions(tmp_path / "sessions", answers)
    labels = label_set([(item, "quality", text.startswith("GOOD"), "ana") for item, text in answers.items()])
    async with _runtime(provider) as rt:
        store = await rt.astore()
        gate = _gate(rt)
        shipped = identity_of(gate.evaluator.judge, "quality")
        store_calibration(rt.store, shipped, 0.9)
        v1 = await prompt_version(store, "gate_quality", 1)
        await create_prompt_version(store, "gate_quality", v1.text.replace("Score the response", "Score strictly"))
        await activate_version(store, "gate_quality", 2)
        rt.prompts.forget()
        with pytest.raises(CalibrationRequired) as caught:
            await gate.astart()
        v2 = (await prompt_version(store, "gate_quality", 2)).hash
        assert f"template gate_quality ({v2})" in str(caught.value) and shipped.template_hash not in str(caught.value)

        report = await calibrate_gate(gate, labels, [sessions], resamples=0)  # calibrated on version 2
        assert report.rubrics[0].judge.template_hash == v2
        await gate.astart()  # now it starts

        await start_test(store, "gate_quality", 1, 2, calls=50)
        rt.prompts.forget()
        other = _gate(rt)
        await other.astart()  # both arms (the shipped text and version 2) are calibrated
        store_calibration(rt.store, shipped, 0.2)
        with pytest.raises(CalibrationRequired) as caught:
            await _gate(rt).astart()
        assert f"({shipped.template_hash}), rubric 'quality': the newest calibration" in str(caught.value)
        with pytest.raises(ConfigError, match="an A/B test of the prompt gate_quality is running"):
            await calibrate_gate(gate, labels, [sessions], resamples=0)
        for g in (gate, other):
            await g.aclose()
