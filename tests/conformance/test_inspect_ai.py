"""Inspect AI: a tiny eval whose solver offers a tool (``use_tools`` then ``generate``), run on the
``openai/`` provider at the upstream and at the proxy, and the two logs compared."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jurist.testing import Reply
from tests.conformance.conftest import (API_KEY, CALL, NO_RESPONSES_API, WEATHER_ANSWER, WEATHER_RESULT, Outcome,
                                        Routes, cell, tool_reply)


@pytest.fixture(scope="module")
def inspect() -> Any:
    import inspect_ai
    from inspect_ai.dataset import Sample
    from inspect_ai.scorer import includes
    from inspect_ai.solver import generate, use_tools
    from inspect_ai.tool import tool

    @tool
    def get_weather() -> Any:
        async def execute(city: str) -> str:
            """The weather in a city.

            Args:
                city: The city.
            """
            return WEATHER_RESULT
        return execute

    def task() -> Any:
        return inspect_ai.Task(dataset=[Sample(input="Weather in Paris?", target="sunny")],
                               solver=[use_tools(get_weather()), generate()], scorer=includes())

    return inspect_ai, task


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_eval_with_a_tool(inspect: Any, routes: Routes, route: str, api: str, tmp_path: Path,
                          monkeypatch: pytest.MonkeyPatch) -> None:
    inspect_ai, task = inspect
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)

    def run(r: str) -> Outcome:
        [log] = inspect_ai.eval(task(), model="openai/gpt-test", model_base_url=routes.base(r),
                                model_args={"responses_api": api == "responses"}, log_dir=str(tmp_path / r),
                                display="none", max_retries=0, fail_on_error=True, log_samples=True)
        if log.status != "success":
            return Outcome(error=(log.status, None, str(log.error.message if log.error else "")[:300]))
        [sample] = log.samples
        calls = [(c.function, c.arguments) for m in sample.messages if m.role == "assistant"
                 for c in m.tool_calls or ()]
        tool_outputs = [m.text for m in sample.messages if m.role == "tool"]
        usage = sum(u.total_tokens for u in log.stats.model_usage.values()) or None
        return Outcome(text=sample.output.completion, tool_calls=calls,
                       finish=sample.output.choices[0].stop_reason if sample.output.choices else None, usage=usage,
                       extra={"accuracy": log.results.scores[0].metrics["accuracy"].value,
                              "tool outputs": tool_outputs})

    def check(out: Outcome) -> None:
        assert out.error is None, f"the eval failed: {out.error}"
        assert out.tool_calls == [("get_weather", {"city": "Paris"})], out.tool_calls
        assert out.extra == {"accuracy": 1.0, "tool outputs": [WEATHER_RESULT]}
        assert (out.text, out.finish) == (WEATHER_ANSWER, "stop")

    cell(routes, route, [tool_reply(CALL), Reply(text=WEATHER_ANSWER)], run, check,
         direct_fails=NO_RESPONSES_API if routes.llama and api == "responses" else None)
