import pytest

from jurist.config import Settings
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
    assert merged.base_url == "http://gpu:11434/v1" and merged.api_key == "ollama"
