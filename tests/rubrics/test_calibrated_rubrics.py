"""Rubric scoring with require_calibration: the judge identity of each rubric, the refusal of
jurist.evaluate / evaluate_batch (and the Ray engine, before Ray starts) and a run once calibrated."""

from __future__ import annotations

import json

import pytest

import jurist
from jurist.analysis.calibrate import calibrate
from jurist.errors import CalibrationRequired
from jurist.judges.templates import from_file
from jurist.rubrics import evaluate, evaluate_batch, load_rubrics
from jurist.rubrics.api import build_judge, load_template
from jurist.rubrics.calibration import calibrate_command, rubric_hash, rubric_identities, template_option, with_bar
from jurist.rubrics.models import parse_rubrics
from jurist.rubrics.ray_engine import evaluate_batch_on_ray
from jurist.testing import Reply
from tests.calibrations import label_set, store_calibration, write_sessions

RUBRICS = {"scale": [1, 5], "rubrics": [
    {"id": "helpful", "name": "Helpful", "scoring_criteria": "5: fully helpful; 1: not at all",
     "require_calibration": {"min_kappa": 0.6}},
    {"id": "safe", "name": "Safe", "items": [{"id": "doctor", "text": "suggests a doctor", "points": 1}]},
]}


def _runtime(provider):
    return jurist.open(providers={"fake": {"type": "openai", "base_url": provider.base_url, "api_key": "k"}},
                       max_retries=0)


def _score_by_word(payload: dict) -> Reply:
    prompt = payload["messages"][-1]["content"]
    return Reply(text=json.dumps({"score": 5 if "GOOD" in prompt.rpartition("<chat_session")[2] else 1,
                                  "reasoning": "by the word"}))


def test_each_rubric_has_the_identity_of_the_judge_that_scores_it(tmp_path):
    rubric_set = parse_rubrics(RUBRICS, "rubrics.json")
    with jurist.open(judge="local/minilm") as rt:
        rj = build_judge(rt, template=load_template(None, None))
        ids = rubric_identities(rubric_set, rj)
    assert (ids["helpful"].template_name, ids["safe"].template_name) == ("rubric_judge", "rubric_items_judge")
    assert ids["helpful"].judge_model == "local/minilm" and ids["helpful"].rubric_hash != ids["safe"].rubric_hash
    helpful = rubric_set.rubrics[0]
    scale = rubric_set.scale_of(helpful)
    assert rubric_hash(helpful.model_copy(update={"weight": 3.0, "require_calibration": None}), scale) == \
        rubric_hash(helpful, scale)  # what the judge is not shown does not count
    changed = helpful.model_copy(update={"scoring_criteria": "5: helpful"})
    assert rubric_hash(changed, scale) != rubric_hash(helpful, scale)
    assert rubric_hash(helpful, (0.0, 10.0)) != rubric_hash(helpful, scale)
    # the --template that loads a template again
    custom = tmp_path / "mine.txt"
    custom.write_text("Score {rubric_name} on {chat_session}.")
    assert template_option(load_template(None, None)) is None
    assert template_option(load_template("judge_template", None)) == "judge_template"
    assert template_option(from_file(custom)) == str(custom)
    assert calibrate_command(rubric_set, rj, from_file(custom)) == (
        f"jurist calibrate --rubrics rubrics.json --judge local/minilm --template {custom} --labels LABELS.jsonl "
        "--sessions SESSIONS/")
    assert with_bar(rubric_set, None) is rubric_set
    assert all(r.require_calibration.min_kappa == 0.3 for r in with_bar(rubric_set, 0.3).rubrics)


async def test_evaluate_refuses_a_rubric_that_requires_a_calibration_then_runs(provider, tmp_path):
    provider.default = _score_by_word
    (tmp_path / "rubrics.json").write_text(json.dumps(RUBRICS))
    rubric_set = load_rubrics(tmp_path / "rubrics.json")
    sessions = write_sessions(tmp_path / "sessions", {f"c{k}": ("GOOD" if k % 2 else "bad") + f" reply {k}"
                                                       for k in range(6)})
    async with _runtime(provider) as rt:
        with pytest.raises(CalibrationRequired) as caught:
            await evaluate(rubric_set, sessions / "c1.jsonl", judge="fake/judge", runtime=rt)
        with pytest.raises(CalibrationRequired):
            await evaluate_batch(rubric_set, sessions, tmp_path / "out", judge="fake/judge", runtime=rt)
        with pytest.raises(CalibrationRequired):  # the Ray engine refuses on the driver, before Ray starts
            await evaluate_batch_on_ray(rubric_set, sessions, tmp_path / "out", runtime=rt, judge="fake/judge")
        assert provider.requests == [] and not (tmp_path / "out").exists()
        assert "rubric 'helpful'" in str(caught.value) and "rubric 'safe'" not in str(caught.value)
        assert caught.value.commands == [f"jurist calibrate --rubrics {tmp_path / 'rubrics.json'} --judge fake/judge "
                                         "--labels LABELS.jsonl --sessions SESSIONS/"]

        labels = label_set([(f"c{k}", "helpful", 5 if k % 2 else 1, "ana") for k in range(6)])
        report = await calibrate(rubric_set.model_copy(update={"rubrics": rubric_set.rubrics[:1]}), labels,
                                 [sessions], rt, judge="fake/judge", resamples=0)
        assert report.rubrics[0].agreement.judge_vs_humans.weighted_kappa.value == 1.0
        assert report.rubrics[0].calibration_id
        result = await evaluate(rubric_set, sessions / "c1.jsonl", judge="fake/judge", runtime=rt)
        assert result["rubric_scores"][0]["score"] == 5

        # a stored calibration of another judge model does not count
        with pytest.raises(CalibrationRequired):
            await evaluate(rubric_set, sessions / "c1.jsonl", judge="fake/other", runtime=rt)
        other = build_judge(rt, judge="fake/other")
        ident = rubric_identities(rubric_set, other)["helpful"]
        await other.model.aclose()
        store_calibration(rt.store, ident, 0.59)
        with pytest.raises(CalibrationRequired, match="κ 0.590, below min_kappa 0.6"):
            await evaluate(rubric_set, sessions / "c1.jsonl", judge="fake/other", runtime=rt)
