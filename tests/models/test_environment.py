"""Keys and addresses are read from the environment once, when the settings are built: a model
resolved later takes them from those settings, whatever the environment holds by then."""

from __future__ import annotations

import logging
import pickle
from pathlib import Path

import pytest

import jurist
from jurist.config import ProviderSettings, Settings
from jurist.errors import ConfigError
from jurist.models.anthropic import AnthropicChat
from jurist.models.base import ChatRequest
from jurist.models.openai import OpenAIChat
from jurist.models.registry import build_adapter
from jurist.testing import ProviderServer

ASK = ChatRequest(messages=[{"role": "user", "content": "Rate this."}])


async def test_a_model_resolved_later_calls_the_address_with_the_key_of_the_settings(
        server: ProviderServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "key-a")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_ORG_ID", "org-a")
    with ProviderServer() as elsewhere:
        async with jurist.open(database_url=f"sqlite:///{tmp_path / 'a.db'}") as rt:
            monkeypatch.setenv("OPENAI_API_KEY", "key-b")
            monkeypatch.setenv("OPENAI_BASE_URL", elsewhere.base_url)
            monkeypatch.setenv("OPENAI_ORG_ID", "org-b")
            model = rt.model("openai/gpt-test", cache=False)
            assert (await model.complete(ASK)).text
            await model.aclose()
        assert elsewhere.requests == []
    [request] = server.requests
    assert request["headers"]["authorization"] == "Bearer key-a"
    assert request["headers"]["openai-organization"] == "org-a"


async def test_anthropic_and_a_providers_own_variable_are_read_with_the_settings(
        server: ProviderServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "anthropic-a")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.anthropic_base_url)
    monkeypatch.setenv("MINE_KEY", "mine-a")
    settings = Settings.load(providers={"mine": {"base_url": server.base_url, "api_key_env": "MINE_KEY"}})
    for name in ("ANTHROPIC_API_KEY", "MINE_KEY"):
        monkeypatch.setenv(name, "changed")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    for ref in ("anthropic/claude-test", "mine/m"):
        adapter = build_adapter(ref, settings)
        try:
            assert (await adapter.complete(ASK)).text
        finally:
            await adapter.aclose()
    anthropic_call, mine_call = server.requests
    sent = anthropic_call["headers"]  # the SDK sends the key as x-api-key, or as a bearer token in newer versions
    assert "anthropic-a" in (sent.get("x-api-key"), sent.get("authorization", "").removeprefix("Bearer "))
    assert mine_call["headers"]["authorization"] == "Bearer mine-a"


def test_settings_built_in_code_read_the_provider_variables_when_built(
        server: ProviderServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("JURIST_TIMEOUT", "3")
    settings = Settings(judge="openai/gpt-test")  # not through Settings.load: no JURIST_*, but the keys
    assert settings.timeout == 30.0
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert build_adapter("openai/gpt-test", settings).endpoint == server.base_url
    copied = settings.model_copy(update={"timeout": 5.0})
    assert build_adapter("openai/gpt-test", copied).endpoint == server.base_url
    monkeypatch.delenv("OPENAI_BASE_URL")
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):  # unset when built: how to fix it
        build_adapter("openai/gpt-test", Settings())


def test_a_variable_the_settings_did_not_read_is_an_error_not_a_missing_key(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LATER_KEY", "k")
    later = ProviderSettings(base_url="http://127.0.0.1:9/v1", api_key_env="LATER_KEY")
    settings = Settings.load().model_copy(update={"providers": {"later": later}})  # no validation: nothing read
    with pytest.raises(ConfigError, match="LATER_KEY was not read"):
        build_adapter("later/m", settings)
    assert build_adapter("later/m", Settings.load(providers={"later": later.model_dump()})).endpoint


async def test_no_repr_dump_record_or_log_of_the_settings_shows_a_key(
        server: ProviderServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    settings = Settings.load(providers={"mine": {"base_url": server.base_url, "api_key": "sk-from-the-file"}},
                             database_url=f"sqlite:///{tmp_path / 'r.db'}")
    shown = [repr(settings), str(settings), settings.model_dump_json(), str(settings.model_dump()),
             repr(settings.providers), f"{settings!r}"]
    caplog.set_level(logging.DEBUG)
    async with jurist.open(database_url=settings.database_url,
                           providers={"mine": {"base_url": server.base_url, "api_key": "sk-from-the-file"}}) as rt:
        for ref in ("openai/gpt-test", "mine/m"):
            model = rt.model(ref, cache=False)
            await model.complete(ASK)
            await model.aclose()
            shown.append(repr(model.adapter))
        await rt.aflush()
        store = await rt.astore()
        shown += [repr(rt.settings), str(store.calls())]
    shown.append(caplog.text)
    for text in shown:
        assert "sk-from-the" not in text
    assert [r["headers"]["authorization"] for r in server.requests] == ["Bearer sk-from-the-environment",
                                                                        "Bearer sk-from-the-file"]
    carried = pickle.loads(pickle.dumps(settings))  # what a Ray worker gets: the keys travel with the settings
    assert build_adapter("openai/gpt-test", carried)._headers["Authorization"] == "Bearer sk-from-the-environment"


def test_the_adapters_read_no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        OpenAIChat("gpt-4o-mini")
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        AnthropicChat("claude-haiku-4-5")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    assert AnthropicChat("claude-haiku-4-5", api_key="k").endpoint == "https://api.anthropic.com"
