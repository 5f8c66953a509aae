import os

import pytest

from jurist.config import Settings, database_url_of, default_home, shown_url
from jurist.errors import ConfigError


def test_precedence_explicit_then_yaml_then_env(tmp_path, monkeypatch):
    monkeypatch.setenv("JURIST_JUDGE", "openai/from-env")
    monkeypatch.setenv("JURIST_TIMEOUT", "7")
    monkeypatch.setenv("JURIST_CACHE", "off")
    assert Settings.load().judge == "openai/from-env"
    assert Settings.load().timeout == 7 and Settings.load().cache is False
    (tmp_path / "jurist.yaml").write_text("judge: openai/from-yaml\nscore_scale: [0, 10]\n")
    s = Settings.load()
    assert s.judge == "openai/from-yaml" and s.timeout == 7 and s.score_scale == (0, 10)
    assert Settings.load(judge="openai/explicit").judge == "openai/explicit"


def test_database_default_is_sqlite_in_home(monkeypatch, tmp_path):
    monkeypatch.setenv("JURIST_HOME", str(tmp_path / "h"))
    assert Settings.load().database == f"sqlite:///{tmp_path / 'h' / 'jurist.db'}"
    monkeypatch.setenv("JURIST_DATABASE_URL", "postgresql://x@y/z")
    assert Settings.load().database == "postgresql://x@y/z"
    assert Settings.load(database_url="sqlite:////elsewhere.db").database == "sqlite:////elsewhere.db"


def test_the_default_store_is_the_users_whatever_the_folder(monkeypatch, tmp_path):
    monkeypatch.delenv("JURIST_HOME")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    expected = f"sqlite:///{tmp_path / 'data' / 'jurist' / 'jurist.db'}"
    assert Settings.load().database == expected == Settings().database
    (tmp_path / "project").mkdir()
    monkeypatch.chdir(tmp_path / "project")
    assert Settings.load().database == expected
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "me"))
    assert default_home() == str(tmp_path / "me" / ".local" / "share" / "jurist")


def test_a_relative_home_is_taken_from_the_current_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("JURIST_HOME", ".jurist")  # the layout of earlier versions, asked for
    assert Settings.load().database == f"sqlite:///{tmp_path / '.jurist' / 'jurist.db'}"
    (tmp_path / "jurist.yaml").write_text("home: ~/stores/jurist\n")
    monkeypatch.setenv("HOME", str(tmp_path / "me"))
    assert Settings.load().database == f"sqlite:///{tmp_path / 'me' / 'stores' / 'jurist' / 'jurist.db'}"


def test_the_tests_never_see_the_users_data_folder(tmp_path):
    """The guard of tests/conftest.py: a Settings built without a home points into this test's folder."""
    from tests.conftest import USER_DATA

    assert Settings().home == str(tmp_path / "xdg-data" / "jurist")
    assert not Settings().home.startswith(str(USER_DATA))
    assert os.environ["XDG_DATA_HOME"] == str(tmp_path / "xdg-data")


def test_db_values_and_printed_urls(tmp_path):
    assert database_url_of("postgresql+psycopg://u:pw@h/db") == "postgresql+psycopg://u:pw@h/db"
    assert database_url_of("stores/a.db") == f"sqlite:///{tmp_path / 'stores' / 'a.db'}"
    assert database_url_of("sqlite:///rel.db") == "sqlite:///rel.db"
    with pytest.raises(ConfigError, match="--db"):
        database_url_of(" ")
    assert shown_url("postgresql+psycopg://u:secret@h:5432/db") == "postgresql+psycopg://u:***@h:5432/db"
    assert shown_url("sqlite:////tmp/x.db") == "sqlite:////tmp/x.db"


def test_the_bounds_have_defaults_and_come_from_yaml_or_env(tmp_path, monkeypatch):
    s = Settings.load()
    assert (s.max_reply_chars, s.breaker_threshold, s.breaker_cooldown) == (64_000, 5, 30.0)
    monkeypatch.setenv("JURIST_MAX_REPLY_CHARS", "9000")
    monkeypatch.setenv("JURIST_BREAKER_COOLDOWN", "2.5")
    (tmp_path / "jurist.yaml").write_text("breaker_threshold: 0\n")
    s = Settings.load()
    assert (s.max_reply_chars, s.breaker_threshold, s.breaker_cooldown) == (9000, 0, 2.5)


@pytest.mark.parametrize(
    "text, message",
    [
        ("judge: [unclosed", "not valid YAML"),
        ("- a\n- b\n", "mapping of settings"),
        ("max_concurrency: 0\n", "max_concurrency"),
        ("no_such_setting: 1\n", "no_such_setting"),
        ("aliases:\n  fast: ''\n", "alias"),
        ("max_reply_chars: 10\n", "max_reply_chars"),
        ("breaker_cooldown: 0\n", "breaker_cooldown"),
        ("breaker_threshold: -1\n", "breaker_threshold"),
    ],
)
def test_bad_yaml(tmp_path, text, message):
    (tmp_path / "jurist.yaml").write_text(text)
    with pytest.raises(ConfigError, match=message):
        Settings.load()


def test_config_file_paths(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="not found"):
        Settings.load(tmp_path / "missing.yaml")
    monkeypatch.setenv("JURIST_CONFIG", str(tmp_path / "nope.yaml"))
    with pytest.raises(ConfigError, match="JURIST_CONFIG"):
        Settings.load()
    (tmp_path / "nope.yaml").write_text("timeout: 3\n")
    assert Settings.load().timeout == 3


def test_alias_loops_and_unknown_providers():
    from jurist.models import resolve_ref
    from jurist.models.registry import provider_settings

    s = Settings.load(aliases={"a": "b", "b": "a"})
    with pytest.raises(ConfigError, match="alias loop"):
        resolve_ref("a", s)
    with pytest.raises(ConfigError, match="unknown provider"):
        provider_settings("nope", s)
    s = Settings.load(providers={"ollama": {"base_url": "http://gpu:11434/v1"}})
    merged = provider_settings("ollama", s)
    assert merged.base_url == "http://gpu:11434/v1"
    assert merged.api_key is not None and merged.api_key.get_secret_value() == "ollama"


def test_a_misspelt_setting_names_its_line_and_the_setting_meant(tmp_path):
    (tmp_path / "jurist.yaml").write_text("cache: true\njudg: openai/gpt-4o-mini\nproviders:\n"
                                          "  local: {type: openai, bse_url: 'http://127.0.0.1:8080/v1'}\n")
    with pytest.raises(ConfigError) as info:
        Settings.load()
    assert str(info.value) == ("invalid settings in jurist.yaml: line 2: unknown field 'judg' (did you mean "
                               "'judge'?); line 4: providers.local: unknown field 'bse_url' (did you mean 'base_url'?)")


@pytest.mark.parametrize("text", ["max_concurrency: true\n", "timeout: false\n", "score_scale: [true, 5]\n",
                                  "providers:\n  p: {max_in_flight: true}\n"])
def test_booleans_are_not_numbers_in_settings(tmp_path, text):
    (tmp_path / "jurist.yaml").write_text(text)
    with pytest.raises(ConfigError, match="expected a number, got (true|false)"):
        Settings.load()


def test_numbers_from_the_environment_are_still_read(monkeypatch):
    monkeypatch.setenv("JURIST_MAX_CONCURRENCY", "7")
    monkeypatch.setenv("JURIST_TIMEOUT", "2.5")
    settings = Settings.load()
    assert settings.max_concurrency == 7 and settings.timeout == 2.5


def test_the_upstream_reply_byte_cap_is_a_bounded_setting(tmp_path, monkeypatch):
    assert Settings.load().upstream_max_reply_bytes == 16 * 1024 * 1024
    monkeypatch.setenv("JURIST_UPSTREAM_MAX_REPLY_BYTES", "4096")
    assert Settings.load().upstream_max_reply_bytes == 4096
    for bad in ("10", str(2 * 1024 ** 3), "true", "lots"):
        monkeypatch.setenv("JURIST_UPSTREAM_MAX_REPLY_BYTES", bad)
        with pytest.raises(ConfigError, match="upstream_max_reply_bytes"):
            Settings.load()


def test_a_gateways_prices_must_name_a_provider_of_the_price_table(tmp_path):
    (tmp_path / "jurist.yaml").write_text("providers:\n  gw:\n    base_url: http://127.0.0.1:9/v1\n"
                                          "    prices: opnai\n")
    with pytest.raises(ConfigError, match=r"line 4: providers\.gw\.prices: .*'opnai' \(did you mean 'openai'\?\)"):
        Settings.load(tmp_path / "jurist.yaml")
    assert Settings.load(providers={"gw": {"base_url": "http://127.0.0.1:9/v1", "prices": "openai"}}
                         ).providers["gw"].prices == "openai"


async def test_a_gateway_that_charges_openais_prices_records_a_known_cost(isolated):
    from genai_prices import Usage, calc_price

    from jurist.models import ChatRequest
    from jurist.models.registry import resolve_model
    from jurist.store import Store
    from jurist.testing import ProviderServer, Reply

    store = Store(f"sqlite:///{isolated}/c.db")
    with ProviderServer(Reply(text="Yes.", input_tokens=1200, output_tokens=300)) as server:
        providers = {"gw": {"base_url": server.base_url, "api_key": "k", "prices": "openai"},
                     "plain": {"base_url": server.base_url, "api_key": "k"}}
        settings = Settings(home=str(isolated), providers=providers, cache=False)
        for ref in ("gw/gpt-4o-mini", "plain/gpt-4o-mini"):
            model = resolve_model(ref, settings, sink=store)
            await model.complete(ChatRequest(messages=[{"role": "user", "content": "Is the sky blue?"}]))
            await model.aclose()
    store.flush()
    rows = {r["model"]: r for r in store.calls(limit=None)}
    store.close()
    price = float(calc_price(Usage(input_tokens=1200, output_tokens=300), "gpt-4o-mini",
                             provider_id="openai").total_price)
    assert rows["gw/gpt-4o-mini"]["cost_usd"] == pytest.approx(price) and price > 0
    assert rows["plain/gpt-4o-mini"]["cost_usd"] is None  # a 127.0.0.1 server's prices are unknown


def test_the_proxy_reads_an_upstream_answer_up_to_the_configured_cap(isolated, provider):
    import httpx

    from jurist.server import create_app
    from jurist.testing import Reply
    from tests.server.live import running

    provider.default = Reply(text="a" * 8000)
    settings = Settings.load(home=str(isolated / ".jurist"), upstream_max_reply_bytes=4096)
    app = create_app(settings, upstream=provider.base_url,
                     gate_config={"evaluate_feedback_enabled": False, "judge": "scripted/judge"})
    with running(app) as url:
        for stream in (False, True):
            r = httpx.post(f"{url}/v1/chat/completions", timeout=30,
                           json={"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": stream})
            assert r.status_code == 502 and "over 4,096 bytes" in r.json()["error"]["message"], (stream, r.text)
