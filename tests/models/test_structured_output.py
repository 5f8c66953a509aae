"""Structured-output modes, their detection and the per-endpoint memory, against the scripted server."""

from __future__ import annotations

import json
from typing import AsyncIterator

import pytest

from jurist.config import Settings
from jurist.errors import AuthFailed, ConfigError, ModelUnavailable
from jurist.models.base import ChatRequest
from jurist.models.openai import OpenAIChat
from jurist.models.registry import build_adapter
from jurist.models.structured import (PROBE_SCHEMA, PROBE_WORD, ModeMemory, detect_structured_output, probe_mode,
                                      request_fields)
from jurist.testing import ProviderServer, Reply, schema_dialect

SCHEMA = {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]}


def ask(**kw: object) -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": "Rate this."}], response_schema=SCHEMA,
                       schema_name="rubric_score", **kw)


@pytest.fixture
async def chat(server: ProviderServer) -> AsyncIterator[OpenAIChat]:
    adapter = OpenAIChat("m", base_url=server.base_url, api_key="k", modes=ModeMemory())
    yield adapter
    await adapter.aclose()


def formats(server: ProviderServer) -> list[object]:
    return [r["json"].get("response_format") or ({"format": r["json"]["format"]} if "format" in r["json"] else None)
            for r in server.requests]


@pytest.mark.parametrize("mode, fields", [
    ("json_schema", {"response_format": {"type": "json_schema",
                                         "json_schema": {"name": "rubric_score", "schema": SCHEMA, "strict": False}}}),
    ("json_object_schema", {"response_format": {"type": "json_object", "schema": SCHEMA}}),
    ("ollama_format", {"format": SCHEMA}),
    ("prompt", {}),
])
async def test_each_mode_sends_its_own_fields(server: ProviderServer, mode: str, fields: dict) -> None:
    assert request_fields(mode, SCHEMA, "rubric_score") == fields
    chat = OpenAIChat("m", base_url=server.base_url, api_key="k", structured_output=mode)
    try:
        out = await chat.complete(ask())
    finally:
        await chat.aclose()
    body = server.requests[0]["json"]
    assert {k: body[k] for k in ("response_format", "format") if k in body} == fields
    assert out.structured_output == mode


async def test_a_500_naming_response_format_moves_on_to_the_mode_it_names(chat: OpenAIChat,
                                                                          server: ProviderServer) -> None:
    server.default = schema_dialect("json_object_schema")  # llama-cpp-python: 500 for json_schema
    out = await chat.complete(ask())
    assert json.loads(out.text) == {"score": 1} and out.structured_output == "json_object_schema"
    assert [f and f.get("type") for f in formats(server)] == ["json_schema", "json_object"]  # type: ignore[union-attr]
    assert chat.modes.get(chat.endpoint) == "json_object_schema" and chat.schema_mode == "json_object_schema"
    await chat.complete(ask())
    assert len(server.requests) == 3 and formats(server)[2] == {"type": "json_object", "schema": SCHEMA}


async def test_a_refusal_with_nothing_honoured_falls_back_to_the_prompt(chat: OpenAIChat,
                                                                       server: ProviderServer) -> None:
    server.default = schema_dialect("prompt", refusal=Reply(status=422, message="response_format is not supported"))
    out = await chat.complete(ask())
    sent = [f and (f.get("type") or "format") for f in formats(server)]  # type: ignore[union-attr]
    assert sent == ["json_schema", "json_object", "format", None]  # refused, probes refused and ignored, the call
    assert out.structured_output == "prompt" and chat.schema_supported is False


async def test_a_refusal_that_names_the_field_alone_makes_the_call_probe(chat: OpenAIChat,
                                                                         server: ProviderServer) -> None:
    refusal = Reply(status=400, message="unsupported response_format type json_schema")
    server.default = schema_dialect("ollama_format", refusal=refusal)
    out = await chat.complete(ask())
    assert out.structured_output == "ollama_format" == chat.modes.get(chat.endpoint)
    sent = [f and (f.get("type") or "format") for f in formats(server)]  # type: ignore[union-attr]
    assert sent == ["json_schema", "json_object", "format", "format"]  # refused, probe ignored, probe honoured, call
    assert json.loads(out.text) == {"score": 1}


async def test_a_mode_that_worked_stays_after_one_request_it_refused(chat: OpenAIChat,
                                                                     server: ProviderServer) -> None:
    chat.modes.set(chat.endpoint, "json_object_schema")
    server.script(Reply(status=400, message="grammar too large"))
    out = await chat.complete(ask())
    assert out.structured_output == "prompt" and chat.modes.get(chat.endpoint) == "json_object_schema"
    assert (await chat.complete(ask())).structured_output == "json_object_schema"


async def test_a_500_that_does_not_name_the_field_is_a_server_failure(chat: OpenAIChat,
                                                                      server: ProviderServer) -> None:
    server.default = Reply(status=500, message="CUDA out of memory")
    with pytest.raises(ModelUnavailable):
        await chat.complete(ask())
    assert len(server.requests) == 1 and chat.modes.get(chat.endpoint) is None


async def test_a_named_mode_never_moves_on(server: ProviderServer) -> None:
    server.default = schema_dialect("json_object_schema")
    chat = OpenAIChat("m", base_url=server.base_url, api_key="k", structured_output="json_schema",
                      modes=ModeMemory())
    try:
        with pytest.raises(ModelUnavailable, match="response_format"):
            await chat.complete(ask())
    finally:
        await chat.aclose()
    assert len(server.requests) == 1 and len(chat.modes) == 0


@pytest.mark.parametrize("dialect", ["json_schema", "json_object_schema", "ollama_format"])
async def test_the_probe_finds_the_mode_the_server_honours(server: ProviderServer, dialect: str) -> None:
    server.default = schema_dialect(dialect)
    chat = OpenAIChat("m", base_url=server.base_url, api_key="k", guess=None, modes=ModeMemory())
    try:
        assert chat.schema_mode is None
        out = await chat.complete(ask())  # probes first, then sends the call in the mode found
        again = await chat.complete(ask())
    finally:
        await chat.aclose()
    assert out.structured_output == again.structured_output == dialect == chat.modes.get(chat.endpoint)
    probes = [r for r in server.requests if "probe" in json.dumps(r["json"].get("response_format")
                                                                  or r["json"].get("format"))]
    assert 1 <= len(probes) <= 3 and len(server.requests) == len(probes) + 2


async def test_the_probe_tells_an_ignored_field_from_an_honoured_one(server: ProviderServer) -> None:
    server.default = schema_dialect("json_object_schema")  # reads no "format"; refuses json_schema
    chat = OpenAIChat("m", base_url=server.base_url, api_key="k", modes=ModeMemory())
    try:
        results = [await probe_mode(chat, mode) for mode in ("json_schema", "json_object_schema", "ollama_format")]
    finally:
        await chat.aclose()
    assert [r.outcome for r in results] == ["refused", "honoured", "ignored"]
    assert json.loads(results[1].reply or "") == {"probe": PROBE_WORD}
    assert server.requests[1]["json"]["response_format"]["schema"] == PROBE_SCHEMA
    assert len(chat.modes) == 0  # probing one mode keeps nothing


async def test_detection_falls_back_to_the_prompt_and_a_failure_keeps_nothing(server: ProviderServer) -> None:
    server.default = schema_dialect("prompt")  # ignores every field
    chat = OpenAIChat("m", base_url=server.base_url, api_key="k", guess="json_object_schema", modes=ModeMemory())
    try:
        assert await detect_structured_output(chat) == "prompt"
        assert [f and (f.get("type") or "format") for f in formats(server)] == [  # type: ignore[union-attr]
            "json_object", "json_schema", "format"]  # the guess first
        chat.modes.forget()
        server.default = Reply(status=401)
        with pytest.raises(AuthFailed):
            await detect_structured_output(chat)
        assert len(chat.modes) == 0
    finally:
        await chat.aclose()


async def test_adapters_of_one_endpoint_share_what_was_found(server: ProviderServer) -> None:
    server.default = schema_dialect("json_object_schema")
    memory = ModeMemory()
    first = OpenAIChat("a", base_url=server.base_url, api_key="k", guess=None, modes=memory)
    second = OpenAIChat("b", base_url=server.base_url, api_key="k", guess=None, modes=memory)
    try:
        await first.complete(ask())
        seen = len(server.requests)
        await second.complete(ask())
    finally:
        await first.aclose()
        await second.aclose()
    assert len(server.requests) == seen + 1  # no second probe


async def test_concurrent_first_calls_probe_once(server: ProviderServer) -> None:
    import asyncio

    server.default = schema_dialect("json_object_schema")
    chat = OpenAIChat("m", base_url=server.base_url, api_key="k", guess=None, modes=ModeMemory())
    try:
        await asyncio.gather(*(chat.complete(ask()) for _ in range(5)))
    finally:
        await chat.aclose()
    assert len(server.requests) == 2 + 5  # json_schema refused, json_object_schema honoured, the five calls


def test_the_memory_is_bounded() -> None:
    memory = ModeMemory(size=2)
    memory.set("a", "json_schema")
    memory.set("b", "prompt")
    assert memory.get("a") == "json_schema"  # a is now the most recently used
    memory.set("c", "ollama_format")
    assert (memory.get("a"), memory.get("b"), memory.get("c"), len(memory)) == ("json_schema", None,
                                                                               "ollama_format", 2)


def test_presets_give_the_first_guess(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # read as the settings are built
    settings = Settings(providers={"mine": {"type": "openai", "base_url": "http://127.0.0.1:9/v1", "api_key": "k"},
                                   "llamacpp": {"base_url": "http://127.0.0.1:9/v1"}})
    guesses = {ref: build_adapter(ref, settings).guess  # type: ignore[attr-defined]
               for ref in ("llamacpp/m", "vllm/m", "ollama/m", "mine/m")}
    assert guesses == {"llamacpp/m": "json_object_schema", "vllm/m": "json_schema", "ollama/m": "json_schema",
                       "mine/m": "json_schema"}
    assert build_adapter("openai/m", settings).guess == "json_schema"  # type: ignore[attr-defined]


def test_an_unknown_mode_in_settings_is_a_config_error(tmp_path) -> None:
    (tmp_path / "jurist.yaml").write_text("providers:\n  mine:\n    structured_output: grammar\n")
    with pytest.raises(ConfigError, match="structured_output"):
        Settings.load(tmp_path / "jurist.yaml")
    with pytest.raises(ConfigError, match="guess"):
        OpenAIChat("m", base_url="http://127.0.0.1:9/v1", api_key="k", guess="auto")
