"""Logprobs and weighted scores on the wire of a real llama.cpp server (llama-cpp-python, SmolLM2)."""

from __future__ import annotations

import json
import math
import re
import urllib.request

import pytest

from jurist.config import Settings
from jurist.judges.parsing import parse_score
from jurist.judges.weighting import weighted_score
from jurist.models.messages import openai_messages
from jurist.models.base import ChatRequest
from jurist.models.openai import OpenAIChat
from jurist.rubrics import evaluate
from jurist.rubrics.judging import score_schema

SCORE_SCHEMA = score_schema((1.0, 5.0))
from jurist.rubrics.models import Rubric, RubricSet
from jurist.store import Store

from tests.realserver.conftest import MODEL_ALIAS
from tests.rubrics.test_scoring import SESSION

pytestmark = pytest.mark.realserver

SCALE = (1.0, 5.0)
PROMPT = ("Rate how polite this reply is, from 1 to 5: 'Thank you so much for asking!'. "
          'Answer with a JSON object {"score": <1-5>, "reasoning": "<one sentence>"}.')


def _raw(base_url: str, body: dict) -> dict:
    request = urllib.request.Request(f"{base_url}/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.loads(response.read())


def _expectation_by_hand(content: list[dict]) -> float:
    """The G-Eval expectation read straight off the wire: the first digit token after ``"score":``."""
    text = ""
    for entry in content:
        if re.search(r'"score"\s*:\s*$', text) and entry["token"].strip().isdigit():
            probabilities: dict[int, float] = {}
            alternatives = {alt["token"]: alt["logprob"] for alt in entry["top_logprobs"]}
            alternatives.setdefault(entry["token"], entry["logprob"])
            for token, logprob in alternatives.items():
                if token.strip().isdigit() and 1 <= int(token.strip()) <= 5:
                    probabilities[int(token.strip())] = probabilities.get(int(token.strip()), 0.0) + math.exp(logprob)
            return sum(v * p for v, p in probabilities.items()) / sum(probabilities.values())
        text += entry["token"]
    raise AssertionError(f"no score token in {text!r}")


async def test_the_adapter_reads_the_servers_logprobs_and_the_weighting_matches_the_wire(llama_server):
    adapter = OpenAIChat(MODEL_ALIAS, provider="llamacpp", base_url=llama_server, api_key="none",
                         structured_output="json_object_schema")
    request = ChatRequest(messages=[{"role": "user", "content": PROMPT}], temperature=0.0, max_tokens=60, seed=0,
                          response_schema=SCORE_SCHEMA, top_logprobs=20)
    try:
        completion = await adapter.complete(request, timeout=120)
    finally:
        await adapter.aclose()
    assert completion.logprobs is not None
    assert "".join(t.token for t in completion.logprobs) == completion.text
    at_numbers = [t for t in completion.logprobs if any(ch.isdigit() for ch in t.token)]
    assert at_numbers and all(2 <= len(t.top) <= 21 for t in at_numbers)
    assert all(t.top == () for t in completion.logprobs if t not in at_numbers)  # bounded: only where needed
    reply = parse_score(completion.text, SCALE)
    value, unavailable = weighted_score(completion.logprobs, reply.score, SCALE)
    assert unavailable is None and 1.0 <= value <= 5.0

    raw = _raw(llama_server, {
        "model": MODEL_ALIAS, "messages": openai_messages(request.messages), "temperature": 0.0, "max_tokens": 60, "seed": 0,
        "response_format": {"type": "json_object", "schema": SCORE_SCHEMA}, "logprobs": True, "top_logprobs": 20})
    assert raw["choices"][0]["message"]["content"] == completion.text  # the same reply, greedy and seeded
    assert value == round(_expectation_by_hand(raw["choices"][0]["logprobs"]["content"]), 4)


async def test_a_rubric_scored_with_logprobs_on_the_real_server(llama_server, tmp_path):
    settings = Settings.load(providers={"llamacpp": {"base_url": llama_server,
                                                     "structured_output": "json_object_schema"}},
                             score_mode="logprobs", timeout=180, max_retries=0, max_tokens=120)
    rubrics = RubricSet(rubrics=[Rubric(id="clarity", name="Clarity", scoring_criteria="Is the answer clear?")])
    store = Store(f"sqlite:///{tmp_path}/real.db")
    result = await evaluate(rubrics, SESSION, judge=f"llamacpp/{MODEL_ALIAS}", settings=settings, store=store)
    store.flush()
    calls = store.calls(limit=None)
    store.close()
    (entry,) = result["rubric_scores"]
    assert entry["status"] == "scored", entry["reasoning"]
    assert entry["score_mode"] == "logprobs" and entry["score"] in (1.0, 2.0, 3.0, 4.0, 5.0)
    assert "logprobs_unavailable" not in entry and 1.0 <= entry["weighted_score"] <= 5.0
    assert result["summary"]["total_score"] == entry["weighted_score"]
    assert calls and all(c["params"]["logprobs_returned"] and c["params"]["top_logprobs"] == 20 for c in calls)
