"""POST /v1/responses and POST /v1/messages fed generated bodies (every field swapped for each bad
value, mutated bodies, bytes): the answer is a 2xx or a 4xx in JSON, never a 500, as for chat completions."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import given

from jurist.config import Settings
from jurist.models import script
from jurist.server import create_app
from jurist.testing import ProviderServer, Reply
from tests.faults.generated import PROPERTY, dump, places, replaced
from tests.faults.test_generated_bodies import GATE_PASS, SWAPS, answers_without_a_500, bodies

TOOL = {"type": "object", "properties": {"q": {"type": "string"}}}
RESPONSES = {"model": "gpt-test", "instructions": "Answer briefly.", "max_output_tokens": 50, "temperature": 0.2,
             "tools": [{"type": "function", "name": "lookup", "parameters": TOOL, "strict": False}],
             "text": {"format": {"type": "json_schema", "name": "a", "schema": {"type": "object"}}},
             "input": [{"role": "user", "content": [{"type": "input_text", "text": "Capital of France?"},
                                                    {"type": "input_image", "image_url": "data:image/png;base64,AA"}]},
                       {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{\"q\": \"x\"}"},
                       {"type": "function_call_output", "call_id": "c1", "output": "Paris"}]}
MESSAGES = {"model": "claude-test", "max_tokens": 50, "system": "Answer briefly.", "stop_sequences": ["#"],
            "tools": [{"name": "lookup", "input_schema": TOOL}], "tool_choice": {"type": "auto"},
            "messages": [{"role": "user", "content": "Capital of France?"},
                         {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "lookup",
                                                            "input": {"q": "x"}}]},
                         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "Paris"},
                                                      {"type": "image", "source": {"type": "base64",
                                                                                   "media_type": "image/png",
                                                                                   "data": "AA"}}]}]}
APIS = [("/v1/responses", RESPONSES), ("/v1/messages", MESSAGES)]


@pytest.fixture(scope="module")
def proxy() -> Iterator[TestClient]:
    upstream = ProviderServer().start()
    upstream.default = Reply(text="Paris.")
    folder = Path(tempfile.mkdtemp(prefix="jurist-api-bodies-"))
    settings = Settings(home=str(folder / ".jurist"), database_url=f"sqlite:///{folder / 'jurist.db'}",
                        max_retries=0)
    app = create_app(settings, upstream=upstream.base_url, upstream_api_key="k",
                     gate_config={"evaluate_feedback_enabled": True, "judge": "scripted/judge"})
    try:
        with TestClient(app, base_url="http://localhost", raise_server_exceptions=False) as c:
            yield c
    finally:
        upstream.stop()


@pytest.mark.parametrize("path, valid", APIS, ids=[p for p, _ in APIS])
def test_every_field_swapped_for_each_bad_value_is_a_2xx_or_4xx(proxy, path: str, valid: dict[str, Any]):
    script("judge", default=GATE_PASS)
    r = proxy.post(path, json=valid)
    assert r.status_code == 200, r.text
    for place in places(valid)[1:]:
        for bad in SWAPS:
            answers_without_a_500(proxy, "POST", path, dump(replaced(valid, place, bad)).encode())


@pytest.mark.parametrize("path, valid", APIS, ids=[p for p, _ in APIS])
def test_a_generated_body_is_a_2xx_or_4xx_in_json(proxy, path: str, valid: dict[str, Any]):
    script("judge", default=GATE_PASS)

    @PROPERTY
    @given(bodies(valid))
    def check(body: bytes) -> None:
        answers_without_a_500(proxy, "POST", path, body)

    check()
    proxy.app.state.jurist.store.flush()  # every request answered was recorded: no write failed
