"""Model references (``provider/model``) and aliases, turned into ``Model``s.

A reference names a provider and a model: ``openai/gpt-4o-mini``,
``anthropic/claude-haiku-4-5``, ``ollama/qwen3:14b``, ``local/minilm``,
``scripted/<name>``. An alias from ``jurist.yaml`` (``fast``, ``strong``,
``escalation`` or any name) stands for a reference. Providers other than
``anthropic``, ``local`` and ``scripted`` speak the OpenAI wire format; their
endpoints and keys come from the presets below or from ``providers:`` in
``jurist.yaml``; a key named by ``api_key_env`` and the addresses in
``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL`` from the environment as the
settings read it when they were built (:meth:`jurist.config.Settings.variable`):
nothing here reads the environment.
"""

from __future__ import annotations

from typing import Protocol

from jurist.config import ProviderSettings, Settings
from jurist.errors import ConfigError
from jurist.models.base import ChatModel
from jurist.models.limiter_pool import LimiterPool
from jurist.models.model import CallSink, Model, RetryPolicy
from jurist.models.structured import ModeMemory

LOCAL_JUDGE = "local/minilm"

# Well-known OpenAI-compatible endpoints. ``api_key_env`` names the variable the settings
# read the key from (config.PROVIDER_VARIABLES); servers that take no key get a placeholder.
PRESETS: dict[str, ProviderSettings] = {
    "openai": ProviderSettings(type="openai", api_key_env="OPENAI_API_KEY"),
    "anthropic": ProviderSettings(type="anthropic", api_key_env="ANTHROPIC_API_KEY", structured_output="prompt"),
    "ollama": ProviderSettings(type="openai", base_url="http://localhost:11434/v1", api_key="ollama"),
    "vllm": ProviderSettings(type="openai", base_url="http://localhost:8000/v1", api_key="EMPTY"),
    "lmstudio": ProviderSettings(type="openai", base_url="http://localhost:1234/v1", api_key="lm-studio"),
    "llamacpp": ProviderSettings(type="openai", base_url="http://localhost:8080/v1", api_key="none"),
    "groq": ProviderSettings(type="openai", base_url="https://api.groq.com/openai/v1", api_key_env="GROQ_API_KEY"),
    "openrouter": ProviderSettings(
        type="openai", base_url="https://openrouter.ai/api/v1", api_key_env="OPENROUTER_API_KEY"
    ),
}

# What ``structured_output: auto`` tries first on each preset's server: its own
# constrained decoding (see jurist.models.structured). A server of unknown kind
# (a custom provider, ``openai`` pointed elsewhere) starts from json_schema too.
FIRST_GUESS: dict[str, str] = {
    "openai": "json_schema",
    "vllm": "json_schema",
    "ollama": "json_schema",  # its /v1 hands response_format's schema to Ollama's format
    "lmstudio": "json_schema",
    "llamacpp": "json_object_schema",  # both llama.cpp servers; llama-cpp-python takes no json_schema
    "groq": "json_schema",
    "openrouter": "json_schema",
}

HOW_TO_CONFIGURE = (
    "configure a judge with --judge or JURIST_JUDGE, for example\n"
    "  JURIST_JUDGE=openai/gpt-4o-mini           (with OPENAI_API_KEY; OPENAI_BASE_URL for another server)\n"
    "  JURIST_JUDGE=anthropic/claude-haiku-4-5   (with ANTHROPIC_API_KEY)\n"
    "  JURIST_JUDGE=ollama/qwen3:14b             (a local Ollama at http://localhost:11434)\n"
    "or name an alias from jurist.yaml (aliases: {fast: openai/gpt-4o-mini})"
)


def resolve_ref(ref: str, settings: Settings) -> str:
    """Follow aliases until a ``provider/model`` reference is reached."""
    seen: list[str] = []
    while ref in settings.aliases:
        if ref in seen:
            raise ConfigError(f"alias loop in jurist.yaml: {' -> '.join(seen + [ref])}")
        seen.append(ref)
        ref = settings.aliases[ref]
    if "/" not in ref:
        raise ConfigError(
            f"unknown model {ref!r}: use 'provider/model' (openai/gpt-4o-mini, anthropic/claude-haiku-4-5, "
            f"ollama/qwen3:14b, local/minilm) or define the alias {ref!r} under 'aliases:' in jurist.yaml"
        )
    return ref


class ModelSource(Protocol):
    """What a capability resolves model references through (a :class:`jurist.Runtime`)."""

    settings: Settings

    def model(self, ref: str, *, cache: bool | None = None, sink: CallSink | None = None) -> Model: ...


def judge_ref(settings: Settings, explicit: str | None = None) -> str:
    """The judge to use: explicit, else settings, else the offline local judge.
    (:meth:`jurist.runtime.Runtime.judge_ref` also gives the notice that no judge is configured.)"""
    ref = explicit or settings.judge
    return resolve_ref(ref, settings) if ref else LOCAL_JUDGE


def writes_text(ref: str) -> bool:
    """Whether a ``provider/model`` reference can write replies (the local judge only matches meaning)."""
    return ref.partition("/")[0] != "local"


def provider_settings(provider: str, settings: Settings) -> ProviderSettings:
    """Preset for a provider, overlaid with ``providers.<name>`` from jurist.yaml."""
    preset = PRESETS.get(provider)
    custom = settings.providers.get(provider)
    if custom is None:
        if preset is None:
            known = ", ".join(sorted([*PRESETS, "local", "scripted", *settings.providers]))
            raise ConfigError(
                f"unknown provider {provider!r}; known providers: {known}. "
                "Add it under 'providers:' in jurist.yaml with type and base_url."
            )
        return preset
    merged = (preset.model_dump() if preset else {}) | custom.model_dump(exclude_unset=True)
    return ProviderSettings(**merged)


def build_adapter(ref: str, settings: Settings, *, modes: ModeMemory | None = None) -> ChatModel:
    """Build the adapter for a ``provider/model`` reference; an OpenAI-compatible one keeps the
    structured-output modes it finds in ``modes`` (a runtime's; default: a memory of its own)."""
    provider, _, model = ref.partition("/")
    if not model:
        raise ConfigError(f"model reference {ref!r} has no model name after '/'")
    if provider == "scripted":
        from jurist.models.scripted import scripted

        return scripted(model)
    if provider == "local":
        if model != "minilm":
            raise ConfigError(f"the local judge is 'local/minilm'; {ref!r} is not available")
        from jurist.models.local import LocalJudge

        return LocalJudge()  # the MiniLM weights it reads are loaded once per process, read-only
    ps = provider_settings(provider, settings)
    api_key = ps.api_key.get_secret_value() if ps.api_key else None
    if not api_key and ps.api_key_env:
        api_key = settings.variable(ps.api_key_env)
    where = "(before the settings are built)"
    if ps.type == "anthropic":
        if not api_key:
            raise ConfigError(
                f"{ref} needs an API key: set {ps.api_key_env or 'ANTHROPIC_API_KEY'} {where} "
                f"or providers.{provider}.api_key in jurist.yaml"
            )
        from jurist.models.anthropic import AnthropicChat

        return AnthropicChat(model, base_url=ps.base_url or settings.variable("ANTHROPIC_BASE_URL"), api_key=api_key)
    if ps.type != "openai":
        raise ConfigError(f"provider {provider!r} has type {ps.type!r}; use 'openai' or 'anthropic'")
    base_url = ps.base_url or settings.variable("OPENAI_BASE_URL")
    if not api_key and ps.base_url is None and provider == "openai" and base_url:
        api_key = "none"  # a self-hosted server behind OPENAI_BASE_URL may take no key
    if not api_key:
        raise ConfigError(
            f"{ref} needs an API key: set {ps.api_key_env or 'OPENAI_API_KEY'} {where} "
            f"or providers.{provider}.api_key in jurist.yaml"
        )
    from jurist.models.openai import OpenAIChat

    return OpenAIChat(model, provider=provider, base_url=base_url, api_key=api_key,
                      organization=settings.variable("OPENAI_ORG_ID"), project=settings.variable("OPENAI_PROJECT_ID"),
                      structured_output=ps.structured_output, guess=FIRST_GUESS.get(provider, "json_schema"),
                      system_role=ps.system_role, modes=modes)


def model_for(
    adapter: ChatModel,
    settings: Settings,
    limiters: LimiterPool,
    *,
    provider: str | None = None,
    sink: CallSink | None = None,
    cache: bool | None = None,
    retry: RetryPolicy | None = None,
    shared: bool = True,
) -> Model:
    """``adapter`` as a ready ``Model``: the limiter of its endpoint from ``limiters`` (a
    runtime's pool, whose bounds were fixed when it was built: ``provider``'s, else those of
    the endpoint; across processes through ``limiter_url`` when ``shared``), the endpoint's
    circuit breaker from the same pool (when ``shared``: an in-process backend has no
    endpoint to go down), the settings' timeout, retries and reply limit, the call record; the
    prices of ``provider``'s ``prices`` (a gateway that charges a provider's prices), else those
    its endpoint's address says."""
    configured = settings.providers.get(provider) if provider is not None else None
    return Model(
        adapter,
        limiters.get(adapter.endpoint, provider, shared=shared),
        timeout=settings.timeout,
        retry=retry or RetryPolicy(settings.max_retries, settings.backoff_base, settings.backoff_max),
        sink=sink,
        cache=settings.cache if cache is None else cache,
        breaker=limiters.breaker(adapter.endpoint) if shared else None,
        max_reply_chars=settings.max_reply_chars,
        prices_from=configured.prices if configured is not None else None,
    )


def resolve_model(
    ref: str,
    settings: Settings,
    *,
    sink: CallSink | None = None,
    cache: bool | None = None,
    limiters: LimiterPool | None = None,
    modes: ModeMemory | None = None,
) -> Model:
    """Turn a reference or alias into a ready ``Model`` sharing its endpoint's limiter in
    ``limiters`` (a runtime's pool; none: a pool of its own, built from ``settings``) and
    its structured-output modes in ``modes``. Resolving never changes a pool's bounds."""
    full = resolve_ref(ref, settings)
    adapter = build_adapter(full, settings, modes=modes)
    provider = full.partition("/")[0]
    # In-process judges (local, scripted) have no endpoint to share: their bound stays in the process.
    return model_for(adapter, settings, limiters if limiters is not None else LimiterPool(settings),
                     provider=provider, sink=sink, cache=cache, shared=provider not in ("local", "scripted"))
