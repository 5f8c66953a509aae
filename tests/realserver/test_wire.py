"""The adapter on the wire of a real llama.cpp server: structured-output detection, usage."""

from __future__ import annotations

import json

import pytest

from jurist.config import Settings
from jurist.models.base import CallRecord, ChatRequest
from jurist.models.openai import OpenAIChat
from jurist.models.registry import build_adapter, resolve_model
from jurist.models.structured import ModeMemory, detect_structured_output, probe_mode
from tests.realserver.conftest import MODEL

pytestmark = pytest.mark.realserver

SCHEMA = {"type": "object", "properties": {"answer": {"type": "string", "enum": ["yes", "no"]}},
          "required": ["answer"], "additionalProperties": False}


def ask(**kw: object) -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": "Is Paris in France? Answer yes or no."}],
                       temperature=0.0, max_tokens=16, seed=0, **kw)


class Records:
    """A call sink that keeps the records."""

    def __init__(self) -> None:
        self.records: list[CallRecord] = []

    def record_call(self, record: CallRecord) -> None:
        self.records.append(record)

    async def cached_reply(self, request_hash: str) -> None:
        return None


async def test_the_probe_finds_json_object_schema_and_tells_refused_from_ignored(llama) -> None:
    adapter = OpenAIChat(MODEL, base_url=llama.base_url, api_key="none", modes=ModeMemory())
    try:
        outcomes = {m: (await probe_mode(adapter, m)).outcome
                    for m in ("json_schema", "json_object_schema", "ollama_format")}
        found = await detect_structured_output(adapter)
    finally:
        await adapter.aclose()
    # llama-cpp-python answers json_schema with a 500 naming response_format, and reads no "format"
    assert outcomes == {"json_schema": "refused", "json_object_schema": "honoured", "ollama_format": "ignored"}
    assert found == "json_object_schema" == adapter.modes.get(adapter.endpoint)


async def test_auto_moves_on_from_the_500_to_the_servers_own_mode_and_keeps_it(llama, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", llama.base_url)
    adapter = build_adapter(f"openai/{MODEL}", Settings())  # the plain OpenAI reference: json_schema first
    assert isinstance(adapter, OpenAIChat) and adapter.guess == "json_schema"
    try:
        first = await adapter.complete(ask(response_schema=SCHEMA))
        second = await adapter.complete(ask(response_schema=SCHEMA))
    finally:
        await adapter.aclose()
    assert first.structured_output == second.structured_output == "json_object_schema"
    assert json.loads(first.text)["answer"] in ("yes", "no") and json.loads(second.text)["answer"] in ("yes", "no")
    assert adapter.schema_mode == "json_object_schema"


async def test_the_llamacpp_preset_asks_in_its_own_mode_and_records_usage(llama) -> None:
    settings = Settings(providers={"llamacpp": {"base_url": llama.base_url}}, cache=False)
    records = Records()
    model = resolve_model(f"llamacpp/{MODEL}", settings, sink=records, cache=False)
    try:
        done = await model.complete(ask(response_schema=SCHEMA), purpose="probe")
        streamed = "".join([d async for d in model.stream(ask(), purpose="generation")])
    finally:
        await model.aclose()
    assert done.structured_output == "json_object_schema" and json.loads(done.text)["answer"] in ("yes", "no")
    call, stream = records.records
    assert call.params["structured_output"] == "json_object_schema"
    assert call.input_tokens > 10 and call.output_tokens > 0 and call.status == "ok"
    # the server sends no usage in a stream, even with stream_options.include_usage: on record as unknown
    assert stream.response_text == streamed and streamed and not stream.usage_known
