"""Probing a judge with scripted judges on a real HTTP server: verbosity, variance and its sampled
calls, self-preference, position flips."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
from scipy import stats

from jurist.analysis.answers import load_answers
from jurist.analysis.bias import FILLER, family, pad
from jurist.analysis.probe import probe
from jurist.config import Settings
from jurist.models.base import CallRecord
from jurist.rubrics import load_rubrics
from jurist.runtime import Runtime
from jurist.testing import Reply
from tests.judges.test_pairwise import verdict
from tests.quoting import prompt_text

ASSISTANT = re.compile(r"\[2\] ASSISTANT: (.*?)\n</chat_session>", re.S)


def answer_of(payload: dict) -> str:
    return ASSISTANT.search(prompt_text(payload["messages"])).group(1)


def score(value: float) -> Reply:
    return Reply(text=json.dumps({"score": value, "reasoning": "scripted"}))


def by_length(payload: dict) -> Reply:
    """A judge swayed by length: one point per 100 characters of the answer, from 1 to 5."""
    return score(min(5, 1 + len(answer_of(payload)) // 100))


def steady(payload: dict) -> Reply:
    return score(3)


def by_seed(payload: dict) -> Reply:
    """A judge whose score is its sample's seed: samples 0, 1, 2 score 1, 2, 3."""
    return score(1 + payload["seed"] % 5)


@pytest.fixture
def rubrics(tmp_path):
    f = tmp_path / "rubrics.json"
    f.write_text(json.dumps({"version": "1", "scale": [1, 5], "rubrics": [
        {"id": "helpful", "name": "Helpful", "description": "The answer helps.",
         "scoring_criteria": {"1": "no help", "5": "great help"}}]}))
    return load_rubrics(f)


def answers(tmp_path, name: str, texts: list[str], model: str | None = None):
    f = tmp_path / f"{name}.jsonl"
    f.write_text("".join(json.dumps({"id": f"q{i}", "prompt": f"Question {i}?", "answer": t,
                                     **({"model": model} if model else {})}) + "\n" for i, t in enumerate(texts)))
    return load_answers(f)


def runtime(provider, judge: str = "fake/judge") -> Runtime:
    return Runtime(Settings.load(providers={"fake": {"type": "openai", "base_url": provider.base_url,
                                                     "api_key": "k"}}, judge=judge, max_retries=0))


def section(report, name: str) -> dict:
    return next(s for s in report.to_json()["sections"] if s["name"] == name)


TEXTS = ["Short answer.", "A somewhat longer answer that says a little more about the question asked.",
         "An answer of middling length, " * 3, "x" * 250]


async def test_a_judge_swayed_by_length_shows_verbosity_bias(provider, tmp_path, rubrics):
    provider.default = by_length
    rt = runtime(provider)
    report = await probe([answers(tmp_path, "s", TEXTS)], rt, rubric_set=rubrics, samples=1, resamples=300)
    await rt.aclose()
    v = section(report, "verbosity")
    assert v["skipped"] is None and v["items"] == 4
    (r,) = v["rubrics"]
    before = [min(5, 1 + len(t) // 100) for t in TEXTS]
    after = [min(5, 1 + len(pad(t)) // 100) for t in TEXTS]
    assert np.mean(np.subtract(after, before)) > 0
    assert r["mean_shift"]["value"] == pytest.approx(np.mean(np.subtract(after, before)), abs=1e-4)
    assert r["up"] == sum(a > b for a, b in zip(after, before)) and r["down"] == 0
    assert r["mean_shift"]["low"] >= 0
    assert section(report, "variance")["skipped"] == "needs --samples 2 or more"
    assert section(report, "position")["skipped"] == "needs two or more systems' answers"


async def test_a_deterministic_judge_shows_no_variance_and_no_verbosity_bias(provider, tmp_path, rubrics):
    provider.default = steady
    rt = runtime(provider)
    report = await probe([answers(tmp_path, "s", TEXTS)], rt, rubric_set=rubrics, samples=3, resamples=300)
    await rt.aclose()
    var = section(report, "variance")
    (r,) = var["rubrics"]
    assert var["items"] == 4 and r["items"] == 4 and r["varying"] == 0
    assert r["repeatability_sd"] == {"value": 0.0, "low": 0.0, "high": 0.0} and r["mean_range"] == 0
    assert all(a["sd"] == 0 and a["low"] == a["high"] == a["mean"] == 3 for a in r["answers"])
    assert section(report, "verbosity")["rubrics"][0]["mean_shift"]["value"] == 0


async def test_k_samples_are_k_calls_and_a_rerun_makes_none(provider, tmp_path, rubrics):
    provider.default = by_seed
    system = answers(tmp_path, "s", TEXTS[:2])
    rt = runtime(provider)
    report = await probe([system], rt, rubric_set=rubrics, samples=3, resamples=200)
    assert len(provider.requests) == 2 * 3 + 2  # three samples of each answer, and each answer padded
    calls = (await rt.astore()).calls(limit=None)
    samples = sorted((c["params"].get("sample", 0), c["params"]["seed"]) for c in calls)
    assert samples == [(0, 0)] * 4 + [(1, 1), (1, 1), (2, 2), (2, 2)]  # sample 0 is the ordinary request
    assert len({c["request_hash"] for c in calls}) == 8
    again = await probe([system], rt, rubric_set=rubrics, samples=3, resamples=200)
    await rt.aclose()
    assert len(provider.requests) == 8  # every judgement answered from the call cache
    assert section(again, "variance") == section(report, "variance")

    (r,) = section(report, "variance")["rubrics"]
    for a in r["answers"]:  # samples scored 1, 2, 3: the t interval of their mean
        half = stats.t.ppf(0.975, 2) * 1.0 / math.sqrt(3)
        assert (a["n"], a["mean"], a["sd"], a["min"], a["max"]) == (3, 2.0, 1.0, 1.0, 3.0)
        assert (a["low"], a["high"]) == (round(2 - half, 4), round(2 + half, 4))
    assert r["varying"] == 2 and r["repeatability_sd"]["value"] == 1.0


async def test_a_first_position_judge_flips_every_pair(provider, tmp_path, rubrics):
    def respond(payload: dict) -> Reply:
        return verdict("A") if '<answer id="A">' in prompt_text(payload["messages"]) else score(3)

    provider.default = respond
    rt = runtime(provider)
    report = await probe([answers(tmp_path, "a", TEXTS), answers(tmp_path, "b", TEXTS[::-1])], rt, samples=1,
                         resamples=200)
    await rt.aclose()
    pos = section(report, "position")
    assert pos["items"] == 4 and pos["flips"] == 4 and pos["flip_rate"]["value"] == 1.0
    assert pos["first_position_share"]["value"] == 1.0
    assert section(report, "verbosity")["skipped"] == "needs --rubrics"
    assert len(provider.requests) == 8  # no rubric, so only the pairs in both orders


async def test_self_preference_from_the_model_field_and_from_the_call_records(provider, tmp_path):
    provider.default = steady
    rt = runtime(provider, judge="fake/gpt-4o-mini")
    store = await rt.astore()
    store.record_call(CallRecord(id="c1", trace_id=None, purpose="generation", model="openai/gpt-4.1",
                                 endpoint="x", messages=[], params={}, request_hash="", response_text="Recorded.",
                                 input_tokens=0, output_tokens=0, latency_ms=1.0, attempts=1, status="ok"))
    mine = answers(tmp_path, "mine", ["From GPT.", "Also GPT."], model="openai/gpt-4o")
    theirs = answers(tmp_path, "theirs", ["Recorded.", "Unknown origin."])
    report = await probe([mine, theirs], rt, samples=1, resamples=0)
    await rt.aclose()
    sp = section(report, "self_preference")
    assert report.judge_family == "gpt" and sp["items"] == 4
    assert sp["by_family"] == {"gpt": 3} and sp["unknown"] == 1 and sp["same_family"] == 3
    assert sp["same_family_answers"] == ["q0 (mine)", "q1 (mine)", "q0 (theirs)"]
    assert "3 of 4 answers were written by the judge's own family (gpt)" in sp["warning"]


async def test_no_warning_when_the_families_differ(provider, tmp_path):
    provider.default = steady
    rt = runtime(provider, judge="fake/claude-haiku-4-5")
    report = await probe([answers(tmp_path, "s", ["a"], model="ollama/qwen3:14b")], rt, samples=1, resamples=0)
    await rt.aclose()
    sp = section(report, "self_preference")
    assert sp["warning"] is None and sp["by_family"] == {"qwen": 1} and report.judge_family == "claude"


@pytest.mark.parametrize("model, expected", [
    ("openai/gpt-4o-mini", "gpt"), ("anthropic/claude-haiku-4-5", "claude"), ("ollama/qwen3:14b", "qwen"),
    ("openrouter/meta-llama/llama-3.1-8b", "llama"), ("openai/o3-mini", "gpt"), ("local/minilm", "minilm"),
    ("vllm/Meta-Llama-3-8B-Instruct", "llama"), ("x/42", "42"),
])
def test_families(model, expected):
    assert family(model) == expected


def test_padding_adds_only_filler_to_the_requested_length():
    text = "Caffeine blocks adenosine receptors."
    padded = pad(text, 3.0)
    assert padded.startswith(text + "\n\n") and len(padded) >= 3 * len(text)
    assert set(re.findall(r"[^.!?]+[.!?]", padded[len(text):].strip())) <= {f if i == 0 else " " + f
                                                                             for f in FILLER for i in (0, 1)}
    assert pad("", 2.0) == "\n\n" + FILLER[0]


def test_the_sections_json_keeps_its_keys_and_their_order():
    from jurist.analysis.answers import Answer
    from jurist.analysis.probe import ProbeItem, Scoring, self_preference_section, variance_section
    from jurist.rubrics.models import RubricSet

    rs = RubricSet.model_validate({"scale": [1, 5], "rubrics": [{"id": "h", "name": "Helpful",
                                                                 "scoring_criteria": "5 = very"}]})
    items = [ProbeItem("x", Answer(id="a1", prompt="p", answer="t", context=[], model="openai/gpt-4o"))]
    variance = variance_section(rs, items, Scoring({(0, "h"): [4, 5, 3]}, {}, []), 3, resamples=20, seed=0)
    assert json.dumps(variance.to_json()["rubrics"][0]["answers"]) == (
        '[{"item": "a1", "system": "x", "n": 3, "mean": 4.0, "sd": 1.0, "min": 3.0, "max": 5.0, "low": 1.5159, '
        '"high": 6.4841}]')
    assert list(variance.to_json()) == ["name", "measured", "items", "unit", "skipped", "samples", "rubrics",
                                        "failures"]
    assert list(variance.to_json()["rubrics"][0]) == ["rubric", "name", "scale", "items", "varying",
                                                      "repeatability_sd", "mean_range", "answers"]
    assert json.dumps(self_preference_section("openai/gpt-4o-mini", items, {}).to_json()) == (
        '{"name": "self_preference", "measured": "which answers were written by a model of the judge\'s family '
        '(gpt): from the answers\' model field, else the store\'s call records", "items": 1, "unit": "answers", '
        '"skipped": null, "judge_family": "gpt", "by_family": {"gpt": 1}, "unknown": 0, "same_family": 1, '
        '"same_family_answers": ["a1 (x)"], "warning": "1 of 1 answers were written by the judge\'s own family '
        '(gpt); judges tend to favour their own family\'s answers: prefer a judge of another family for these"}')
