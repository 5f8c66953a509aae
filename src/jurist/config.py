"""Settings, resolved in one place.

Precedence, highest first: an explicit argument (``Settings.load(judge=...)``
or a CLI flag), then ``jurist.yaml`` (the file named by ``JURIST_CONFIG``, or
``./jurist.yaml``), then the environment (``JURIST_*``). Nothing here runs at import.

The providers' own variables (:data:`PROVIDER_VARIABLES`: ``OPENAI_API_KEY``,
``OPENAI_BASE_URL``, ``ANTHROPIC_API_KEY``, ... and each provider's
``api_key_env``) are read once, when a :class:`Settings` is built (by
:meth:`Settings.load` or directly), and carried in it as secrets that no repr,
dump or record shows (:meth:`Settings.variable`). The registry and the
adapters take keys and addresses from the settings they are given and never
read the environment: a key set after the settings were built is not seen.

Where the store is, whatever the current folder: ``database_url`` (``--db``,
``jurist.yaml``, ``JURIST_DATABASE_URL``), else ``jurist.db`` in the data folder
``home`` (``jurist.yaml``, ``JURIST_HOME``), which defaults to the user's data
folder (:func:`default_home`: ``$XDG_DATA_HOME/jurist`` or
``~/.local/share/jurist`` on Linux). The store is all jurist keeps there: the
call cache and the prompt versions are tables of it. ``jurist.yaml`` in the
current folder stays the project's configuration.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, SecretStr, ValidationError, field_validator

from jurist.errors import ConfigError
from jurist.jsonfiles import Number, Whole, error_problem, key_line, value_problem

APP_NAME = "jurist"
DATABASE_FILE = "jurist.db"

# The providers' own variables, read with the settings (with each provider's api_key_env): the
# presets' keys (jurist.models.registry.PRESETS), the addresses and OpenAI's organization and project.
PROVIDER_VARIABLES = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID",
                      "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "GROQ_API_KEY", "OPENROUTER_API_KEY")

#: The provider name of the gate proxy's upstream (its calls' records, its limiter's lane): no
#: configured provider may take it.
UPSTREAM_PROVIDER = "upstream"

# How a judge asks an endpoint for schema output (see jurist.models.structured).
StructuredOutput = Literal["auto", "json_schema", "json_object_schema", "ollama_format", "prompt"]


class ProviderSettings(BaseModel):
    """One endpoint: its wire format, address, key and limits."""

    model_config = ConfigDict(extra="forbid")

    type: str = "openai"  # openai | anthropic
    base_url: str | None = None
    api_key: SecretStr | None = None  # shown as '**********'; .get_secret_value() is the key
    api_key_env: str | None = None  # the variable that holds the key (read when the settings are built)
    structured_output: StructuredOutput = "auto"
    system_role: bool = True  # false: the server takes no system message (judges' instructions join the user turn)
    max_in_flight: Whole | None = Field(default=None, ge=1)
    requests_per_minute: Whole | None = Field(default=None, ge=1)
    tokens_per_minute: Whole | None = Field(default=None, ge=1)
    # Whose prices the endpoint charges (a gateway, a proxy of a provider's API at another address):
    # a provider id of the genai-prices table ("openai", "anthropic", ...), checked when the settings
    # are built; None: the endpoint's address says (a local server's calls have no known cost)
    prices: str | None = None

    @field_validator("prices")
    @classmethod
    def _known_prices(cls, v: str | None) -> str | None:
        if v is not None:
            problem = price_table_problem(v)
            if problem:
                raise ValueError(problem)
        return v


def price_table_problem(provider_id: str) -> str | None:
    """Why ``provider_id`` names no provider of the genai-prices table (with the closest id), or None."""
    from genai_prices.data_snapshot import find_provider_by_id, get_snapshot

    from jurist.jsonfiles import unknown_name

    providers = get_snapshot().providers
    if find_provider_by_id(providers, provider_id) is not None:
        return None
    return unknown_name(provider_id, [p.id for p in providers], "price table provider")


class Settings(BaseModel):
    """Everything jurist can be told. Build it with :meth:`Settings.load` (explicit values, jurist.yaml,
    ``JURIST_*``); built directly, ``Settings(...)`` holds the values given and the defaults. Either
    way it reads the providers' variables once, as it is built (:meth:`variable`). Every number is
    finite: a time-out or a scale of ``1e400`` (infinity) or NaN is refused, not waited on."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    judge: str | None = None
    # A vision model (reference or alias): sessions with images are judged by it, with the images;
    # None: the judge reads text placeholders and the result says the images were not seen
    visual_evaluator: str | None = None
    aliases: dict[str, str] = Field(default_factory=dict)
    providers: dict[str, ProviderSettings] = Field(default_factory=dict)
    database_url: str | None = None
    limiter_url: str | None = None  # redis://...: endpoint bounds shared by every process using it
    home: str = Field(default_factory=lambda: default_home())  # the data folder: the default store, jurist.db
    cache: bool = True
    max_concurrency: Whole = Field(default=10, ge=1)  # requests in flight per endpoint (note 003: 10)
    # The gate proxy's generations in flight to its upstream (user traffic, never queued behind judge
    # calls): a limit of their own, sized for a proxy; a configured provider's max_in_flight for the
    # upstream's base_url takes its place
    upstream_max_concurrency: Whole = Field(default=512, ge=1)
    # The most bytes of one upstream answer the gate proxy reads (a reply or a whole stream):
    # past it the request is a 502 naming this bound (1 KiB to 1 GiB; default 16 MiB)
    upstream_max_reply_bytes: Whole = Field(default=16 * 1024 * 1024, ge=1024, le=1024 ** 3)
    # seconds per attempt: under rubric_timeout, so that a retry fits in a rubric's time and a hung
    # endpoint's first calls time out (and open its breaker) well before the rubrics' own clock
    timeout: Number = Field(default=30.0, gt=0)
    max_retries: Whole = Field(default=4, ge=0)
    backoff_base: Number = Field(default=0.5, gt=0)
    backoff_max: Number = Field(default=30.0, gt=0)
    temperature: Number = 0.1  # the judges' temperature (notes 003 and 004: low, for consistency)
    seed: Whole | None = 0
    max_tokens: Whole = Field(default=1024, ge=1)
    session_char_budget: Whole = Field(default=60_000, ge=200)
    score_scale: tuple[Number, Number] = (1.0, 5.0)  # for rubric files that give no scale
    # plain: the judge's number; logprobs: also the expectation over the scale's tokens
    # from the endpoint's top logprobs (G-Eval), where it returns them
    score_mode: Literal["plain", "logprobs"] = "plain"
    # seconds per rubric, every attempt, backoff and re-ask included (note 003); a call it cuts counts
    # toward the endpoint's breaker as a time-out, like one whose own timeout ran out
    rubric_timeout: Number = Field(default=60.0, gt=0)
    retry_on_parse_failure: bool = True  # one re-ask showing the judge its parse error
    max_reply_chars: Whole = Field(default=64_000, ge=100)  # a longer judge reply is cut and fails to parse
    breaker_threshold: Whole = Field(default=5, ge=0)  # calls in a row without an answer open the breaker (0: off)
    breaker_cooldown: Number = Field(default=30.0, gt=0)  # seconds an open breaker fails calls before a probe
    config_file: str | None = None
    research: dict[str, Any] | None = None  # the research evaluation section (see jurist.research.config)
    api_token: str | None = Field(default=None, repr=False)  # the server's write token (JURIST_API_TOKEN)
    # Host names the server answers to besides 127.0.0.1, localhost and ::1 ("*": any; see docs/server.md)
    allowed_hosts: list[str] = Field(default_factory=list)
    max_body_bytes: Whole = Field(default=4 * 1024 * 1024, ge=1024)  # a request body to the API, the pages, the socket
    max_proxy_body_bytes: Whole = Field(default=32 * 1024 * 1024, ge=1024)  # a request body to the proxy (/v1/...)
    # The proxy's regenerations of an answer its judge rejects (note 004's MAX_EVALUATION_RETRIES);
    # None: the evaluator's default (2 for comprehensiveness, 1 for quality)
    max_evaluation_retries: Whole | None = Field(default=None, ge=0)
    # The /tutor page and its socket show the learner the progress counts (points recalled of all);
    # off: the conversation only, the evaluation stays out of sight (note 000's criterion 17)
    tutor_progress: bool = False
    # http(s) image URLs whose host is, or resolves to, a loopback, private, link-local or reserved
    # address are refused (a vision endpoint fetching one would reach this network); true: taken
    allow_private_image_urls: bool = False

    # PROVIDER_VARIABLES and each provider's api_key_env as the environment held them when these
    # settings were built (None: unset or empty); copied with the settings, never shown
    _variables: dict[str, SecretStr | None] = PrivateAttr(default_factory=dict)

    def model_post_init(self, context: Any, /) -> None:
        """Read the providers' variables: the one moment the environment gives keys and addresses."""
        self._variables = _provider_variables(self.providers)

    def variable(self, name: str) -> str | None:
        """The value of the environment variable ``name`` when these settings were built (None:
        unset or empty); a ConfigError for a variable jurist did not read then."""
        if name not in self._variables:
            raise ConfigError(
                f"{name} was not read when the settings were built: name it in providers.<name>.api_key_env "
                "before they are built (jurist.yaml, Settings.load(providers=...)), or give api_key")
        value = self._variables[name]
        return value.get_secret_value() if value is not None else None

    @field_validator("providers")
    @classmethod
    def _upstream_is_reserved(cls, v: dict[str, ProviderSettings]) -> dict[str, ProviderSettings]:
        if UPSTREAM_PROVIDER in v:
            raise ValueError(f"{UPSTREAM_PROVIDER!r} is the gate proxy's own name for its upstream: give the "
                             "provider another name (its base_url's bounds still apply to the upstream)")
        return v

    @field_validator("aliases")
    @classmethod
    def _aliases_are_refs(cls, v: dict[str, str]) -> dict[str, str]:
        for name, ref in v.items():
            if not isinstance(ref, str) or not ref:
                raise ValueError(f"alias {name!r} must map to a model reference such as 'openai/gpt-4o-mini'")
        return v

    @classmethod
    def load(cls, config_file: str | Path | None = None, **explicit: Any) -> "Settings":
        """Resolve settings: explicit arguments, then jurist.yaml, then environment."""
        values: dict[str, object] = _from_env()
        path = _config_path(config_file)
        if path is not None:
            file_values = read_yaml(path)
            values.update(file_values)
            values["config_file"] = str(path)
        values.update({k: v for k, v in explicit.items() if v is not None})
        try:
            return cls(**values)
        except ValidationError as exc:
            raise ConfigError(settings_problem(exc, cls, path)) from None

    @property
    def database(self) -> str:
        """The database URL: ``database_url`` (``--db``, jurist.yaml, JURIST_DATABASE_URL), else
        ``jurist.db`` in the data folder ``home``, as an absolute path."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(Path(self.home).expanduser() / DATABASE_FILE).absolute()}"


def settings_problem(exc: ValidationError, model: type[BaseModel], path: Path | None) -> str:
    """A settings validation error in words: each problem (an unknown setting with the closest
    known name), with its line in the file where the setting is written there once."""
    text = path.read_text(encoding="utf-8") if path is not None else None
    located: list[tuple[int | None, str]] = []
    for err in exc.errors():
        leaf = err["loc"][-1] if err["loc"] else None
        line = key_line(text, leaf) if text is not None and isinstance(leaf, str) else None
        located.append((line, error_problem(err, model)))
    located.sort(key=lambda lp: (lp[0] is None, lp[0] or 0))  # in the file's order
    problems = [f"line {line}: {problem}" if line is not None else problem for line, problem in located]
    return f"invalid settings{f' in {path}' if path else ''}: {'; '.join(problems)}"


def default_home() -> str:
    """The user's data folder for jurist (read when asked, never at import): ``$XDG_DATA_HOME/jurist``,
    else ``~/.local/share/jurist`` on Linux; the platform's own elsewhere (``~/Library/Application
    Support/jurist`` on macOS, ``%LOCALAPPDATA%\\jurist`` on Windows)."""
    import platformdirs

    return platformdirs.user_data_dir(APP_NAME, appauthor=False)


def database_url_of(value: str) -> str:
    """A ``--db`` value as a database URL: a URL (``sqlite:///...``, ``postgresql+psycopg://...``)
    as it is, else a path to a SQLite file (made absolute, ``~`` expanded)."""
    if "://" in value:
        return value
    if not value.strip():
        raise ConfigError("--db needs a database URL or the path of a SQLite file")
    return f"sqlite:///{Path(value).expanduser().absolute()}"


def shown_url(url: str) -> str:
    """A database URL to print: its password hidden."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        return url


_ENV_FIELDS = {
    "JURIST_JUDGE": "judge",
    "JURIST_VISUAL_EVALUATOR": "visual_evaluator",
    "JURIST_DATABASE_URL": "database_url",
    "JURIST_LIMITER_URL": "limiter_url",
    "JURIST_HOME": "home",
    "JURIST_CACHE": "cache",
    "JURIST_MAX_CONCURRENCY": "max_concurrency",
    "JURIST_UPSTREAM_MAX_CONCURRENCY": "upstream_max_concurrency",
    "JURIST_UPSTREAM_MAX_REPLY_BYTES": "upstream_max_reply_bytes",
    "JURIST_TIMEOUT": "timeout",
    "JURIST_MAX_RETRIES": "max_retries",
    "JURIST_SESSION_CHAR_BUDGET": "session_char_budget",
    "JURIST_RETRY_ON_PARSE_FAILURE": "retry_on_parse_failure",
    "JURIST_MAX_REPLY_CHARS": "max_reply_chars",
    "JURIST_BREAKER_THRESHOLD": "breaker_threshold",
    "JURIST_BREAKER_COOLDOWN": "breaker_cooldown",
    "JURIST_SCORE_MODE": "score_mode",
    "JURIST_API_TOKEN": "api_token",
    "JURIST_ALLOWED_HOSTS": "allowed_hosts",
    "JURIST_MAX_BODY_BYTES": "max_body_bytes",
    "JURIST_MAX_PROXY_BODY_BYTES": "max_proxy_body_bytes",
    "JURIST_MAX_EVALUATION_RETRIES": "max_evaluation_retries",
    "JURIST_TUTOR_PROGRESS": "tutor_progress",
    "JURIST_ALLOW_PRIVATE_IMAGE_URLS": "allow_private_image_urls",
}


def _from_env() -> dict[str, object]:
    out: dict[str, object] = {}
    for var, field in _ENV_FIELDS.items():
        raw = os.environ.get(var)
        if raw is None or raw == "":
            continue
        if field in ("cache", "retry_on_parse_failure", "tutor_progress", "allow_private_image_urls"):
            out[field] = raw.strip().lower() not in ("0", "false", "no", "off")
        elif field == "allowed_hosts":
            out[field] = [h.strip() for h in raw.split(",") if h.strip()]  # comma-separated
        else:
            out[field] = raw
    return out


def _provider_variables(providers: dict[str, ProviderSettings]) -> dict[str, SecretStr | None]:
    names = {*PROVIDER_VARIABLES, *(ps.api_key_env for ps in providers.values() if ps.api_key_env)}
    return {name: SecretStr(os.environ[name]) if os.environ.get(name) else None for name in sorted(names)}


def _config_path(explicit: str | Path | None) -> Path | None:
    if explicit is not None:
        p = Path(explicit)
        if not p.is_file():
            raise ConfigError(f"config file {p} not found")
        return p
    env = os.environ.get("JURIST_CONFIG")
    if env:
        p = Path(env)
        if not p.is_file():
            raise ConfigError(f"JURIST_CONFIG points to {p}, which does not exist")
        return p
    p = Path("jurist.yaml")
    return p if p.is_file() else None


def read_yaml(path: Path, what: str = "settings") -> dict[str, object]:
    """A YAML file holding a mapping (``{}`` when empty), within the bounds of a JSON input
    (:func:`~jurist.jsonfiles.value_problem`); ConfigError naming the file otherwise."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path} is not UTF-8 text") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{path} is nested too deep to read") from None
    except ValueError:  # an integer of more digits than Python reads (4,300)
        raise ConfigError(f"{path} holds a number too long to read (over 4,300 digits)") from None
    problem = value_problem(data)
    if problem is not None:
        raise ConfigError(f"{path}: {problem}")
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a mapping of {what} at the top level")
    return data
