"""Checking an endpoint before a long run, as data (``jurist doctor`` prints it).

:func:`diagnose` asks the endpoint behind a model reference what a batch will
need, one small request at a time, and returns a :class:`Diagnosis`: the
checks in order, each ``ok``, ``warn``, ``fail`` or ``skip`` with what was
seen and how to fix a failure, and what jurist will use there.

==================  ==========================================================
configuration       the reference resolves to a provider, an endpoint and a key
reachable           the endpoint answers (``GET /models``, else the first call)
auth                the key is accepted
model listed        the model is among the endpoint's models (a single-model
                    server that answers for any name is a warning)
call                a small call answers; its latency
structured output   each schema mode the adapter knows, probed with a schema
                    whose one answer the prompt never names (honoured, ignored
                    or refused), then the configured mode as a judge call uses it
streaming           a small streamed call, and whether it reports its usage
logprobs            whether ``logprobs`` / ``top_logprobs`` come back (needed by
                    ``score_mode: logprobs``)
==================  ==========================================================

Nothing is recorded or cached: the checks talk to adapters directly, not
through :class:`~jurist.models.model.Model`, and retry nothing.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from jurist.config import Settings
from jurist.errors import AuthFailed, ConfigError, ModelError, ModelTimeout, ModelUnavailable, RateLimited
from jurist.models.base import TOP_LOGPROBS, ChatModel, ChatRequest, Completion
from jurist.models.messages import UserMessage
from jurist.models.openai import STRUCTURED_OUTPUT_MODES, OpenAIChat
from jurist.models.sdk_errors import error_detail
from jurist.models.registry import HOW_TO_CONFIGURE, LOCAL_JUDGE, build_adapter, judge_ref, provider_settings

__all__ = ["Check", "Diagnosis", "OK", "WARN", "FAIL", "SKIP", "diagnose"]

OK, WARN, FAIL, SKIP = "ok", "warn", "fail", "skip"
ENDPOINT_CHECKS = ("reachable", "auth", "model listed", "call", "structured output", "streaming", "logprobs")

#: The schema modes a probe tries: every mode of the adapter that sends the schema.
SCHEMA_MODES = tuple(m for m in STRUCTURED_OUTPUT_MODES if m not in ("auto", "prompt"))
PROBE_WORD = "jurist-probe-ok"  # no model writes it unasked: a reply holding it followed the schema
PROBE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"probe": {"type": "string", "enum": [PROBE_WORD]}},
    "required": ["probe"],
    "additionalProperties": False,
}


def _ask(content: str, max_tokens: int, **kw: Any) -> ChatRequest:
    return ChatRequest(messages=(UserMessage(content=content),), temperature=0.0, max_tokens=max_tokens,
                       seed=0, **kw)


SMALL = _ask("Reply with the word OK.", 8)
PROBE = _ask("Reply with a JSON object.", 64, response_schema=PROBE_SCHEMA, schema_name="probe")
DIGIT = _ask("What is 2 + 2? Answer with the digit only.", 4, top_logprobs=TOP_LOGPROBS)


@dataclass
class Check:
    """One check: its status (``ok``, ``warn``, ``fail``, ``skip``), what was seen, how to fix it."""

    name: str
    status: str
    detail: str
    fix: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the check leaves the endpoint usable (a warning does)."""
        return self.status != FAIL


@dataclass
class Diagnosis:
    """The checks of one model reference, and what jurist will use there."""

    model: str
    endpoint: str | None
    checks: list[Check]
    uses: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)


async def diagnose(settings: Settings, model: str | None = None, *, timeout: float | None = None,
                   score_mode: str | None = None) -> Diagnosis:
    """Check the endpoint of ``model`` (default: the configured judge) as a batch will use it.

    ``timeout`` bounds each request (default: the settings' per-call timeout);
    ``score_mode`` is the one to check for (default: the settings')."""
    timeout = timeout or settings.timeout
    score_mode = score_mode or settings.score_mode
    try:
        ref = judge_ref(settings, model)
        adapter = build_adapter(ref, settings)
    except ConfigError as exc:
        return Diagnosis(model or settings.judge or "", None, [Check("configuration", FAIL, str(exc))])
    provider = ref.partition("/")[0]
    if provider in ("local", "scripted"):
        return Diagnosis(ref, None, [_in_process(ref, configured=bool(model or settings.judge))],
                         {"judge": f"{ref}, in this process"})
    checks = [Check("configuration", OK, f"{ref} at {adapter.endpoint}")]
    try:
        found, uses = await _Endpoint(ref, adapter, settings, timeout, score_mode).run()
    finally:
        await adapter.aclose()
    return Diagnosis(ref, adapter.endpoint, checks + found, {"judge": f"{ref} at {adapter.endpoint}", **uses})


def _in_process(ref: str, *, configured: bool) -> Check:
    if ref != LOCAL_JUDGE:
        return Check("configuration", OK, f"{ref} answers from its script in this process; no endpoint to check")
    detail = (f"{LOCAL_JUDGE}: the offline embedding judge, in this process (item-based rubrics only, "
              "no free-form scores); no endpoint to check")
    if configured:
        return Check("configuration", OK, detail)
    return Check("configuration", WARN, f"no judge configured, so {detail}", fix=HOW_TO_CONFIGURE)


class _Endpoint:
    """The endpoint checks of one adapter, in order; each may end the run (the rest skipped)."""

    def __init__(self, ref: str, adapter: ChatModel, settings: Settings, timeout: float, score_mode: str) -> None:
        self.ref = ref
        self.provider, _, self.model = ref.partition("/")
        self.adapter = adapter
        self.settings = settings
        self.timeout = timeout
        self.score_mode = score_mode
        self.checks: list[Check] = []
        self.uses: dict[str, str] = {}

    async def run(self) -> tuple[list[Check], dict[str, str]]:
        listed, list_error, list_ms = await self._list_models()
        if list_error is not None and _unreachable(list_error):
            return self._stop(Check("reachable", FAIL, str(list_error), fix=self._no_answer_fix(list_error)))
        if list_error is None and listed is not None:
            self.checks.append(Check("reachable", OK, f"GET /models answered in {list_ms:.0f} ms"))
        elif list_error is not None:
            self.checks.append(Check("reachable", OK, f"GET /models answered HTTP {list_error.status}"))
        if isinstance(list_error, AuthFailed):
            return self._stop(Check("auth", FAIL, str(list_error), fix=self._key_fix()))
        started = time.perf_counter()
        try:
            reply = await self.adapter.complete(SMALL, timeout=self.timeout)
        except ModelError as exc:
            return self._call_failed(exc, listed)
        latency = (time.perf_counter() - started) * 1000.0
        if not self.checks:  # no model list on this wire: the call was the first answer
            self.checks.append(Check("reachable", OK, "the first call was answered"))
        self.checks.append(Check("auth", OK, "the key was accepted"))
        self.checks.append(self._listing(listed, list_error))
        self.checks.append(Check("call", OK, f"a small call answered in {latency:.0f} ms "
                                             f"({reply.output_tokens} tokens out): {reply.text.strip()[:40]!r}"))
        self.uses["latency"] = f"{latency:.0f} ms for a small call"
        self.checks.append(await self._structured_output())
        self.checks.append(await self._streaming())
        self.checks.append(await self._logprobs())
        ps = provider_settings(self.provider, self.settings)
        self.uses["limits"] = (f"{ps.max_in_flight or self.settings.max_concurrency} requests in flight, "
                               f"{self.settings.timeout:g} s per attempt, {self.settings.max_retries} retries")
        return self.checks, self.uses

    # -- the steps -------------------------------------------------------------------
    async def _list_models(self) -> tuple[list[str] | None, ModelError | None, float]:
        """The endpoint's model ids (None: no list on this wire, or an error), the error, the time taken."""
        if not isinstance(self.adapter, OpenAIChat):
            return None, None, 0.0
        started = time.perf_counter()
        try:
            raw = await self.adapter.list_models(timeout=self.timeout)
        except ModelError as exc:
            return None, exc, 0.0
        elapsed = (time.perf_counter() - started) * 1000.0
        try:
            data = json.loads(raw).get("data") or []
            return [str(m.get("id")) for m in data if isinstance(m, dict)], None, elapsed
        except (ValueError, AttributeError):
            return [], None, elapsed

    def _call_failed(self, exc: ModelError, listed: list[str] | None) -> tuple[list[Check], dict[str, str]]:
        if _unreachable(exc) and not self.checks:
            return self._stop(Check("reachable", FAIL, str(exc), fix=self._no_answer_fix(exc)))
        if not self.checks:
            self.checks.append(Check("reachable", OK, f"the first call was answered with HTTP {exc.status}"))
        if isinstance(exc, AuthFailed):
            return self._stop(Check("auth", FAIL, str(exc), fix=self._key_fix()))
        if _unreachable(exc):  # the list came, the call's answer did not
            return self._stop(Check("call", FAIL, str(exc), fix=self._no_answer_fix(exc)))
        self.checks.append(Check("auth", OK, "the key was not refused"))
        if exc.status == 404 or (exc.status == 400 and listed and self.model not in listed):
            fix = f"name a model the endpoint lists: {', '.join(listed[:10])}" if listed else \
                "check the model name"
            return self._stop(Check("model listed", FAIL, str(exc), fix=fix))
        self.checks.append(self._listing(listed, None))
        if isinstance(exc, RateLimited):
            fix = f"wait, or lower providers.{self.provider}.max_in_flight / requests_per_minute in jurist.yaml"
        elif isinstance(exc, ModelTimeout):
            fix = self._no_answer_fix(exc)
        else:
            fix = "check the server's log; the message above is what it said"
        return self._stop(Check("call", FAIL, str(exc), fix=fix))

    def _listing(self, listed: list[str] | None, error: ModelError | None) -> Check:
        if listed is None:
            why = f"GET /models answered HTTP {error.status}" if error is not None else \
                "not checked on this wire"
            return Check("model listed", SKIP, f"the endpoint gives no model list ({why})")
        if self.model in listed:
            return Check("model listed", OK, f"{self.model} is among the endpoint's {len(listed)} model(s)")
        return Check("model listed", WARN,
                     f"{self.model} is not among the endpoint's models ({', '.join(listed[:10]) or 'none'}); "
                     "it answered anyway, as a single-model server does for any name",
                     fix=f"name a listed model, e.g. {self.provider}/{listed[0]}" if listed else None)

    async def _structured_output(self) -> Check:
        if not isinstance(self.adapter, OpenAIChat):
            self.uses["structured output"] = "prompt"
            return Check("structured output", OK, "prompt: this wire has no schema mode; the judge prompt asks "
                                                  "for JSON and the parser reads it")
        seen = {mode: await self._probe(mode) for mode in SCHEMA_MODES}
        best = next((m for m, outcome in seen.items() if outcome == "honoured"), "prompt")
        modes = "; ".join(f"{m}: {outcome}" for m, outcome in seen.items())
        configured = provider_settings(self.provider, self.settings).structured_output
        fix = f"set providers.{self.provider}.structured_output: {best} in jurist.yaml"
        adapter = build_adapter(self.ref, self.settings)  # as a judge call gets it
        try:
            reply = await adapter.complete(PROBE, timeout=self.timeout)
            used = adapter.schema_mode if isinstance(adapter, OpenAIChat) else "prompt"
        except ModelError as exc:
            self.uses["structured output"] = f"{configured} (fails here)"
            return Check("structured output", FAIL, f"structured_output {configured} fails here, "
                                                    f"{_said(exc)} ({modes})", fix=fix)
        finally:
            await adapter.aclose()
        self.uses["structured output"] = used if used == configured else f"{used} (configured: {configured})"
        if used == "prompt":
            if best == "prompt":
                return Check("structured output", OK, f"prompt: no schema mode is honoured here ({modes})")
            return Check("structured output", WARN, f"prompt, though the endpoint honours {best} ({modes})",
                         fix=fix)
        if _honoured(reply):
            return Check("structured output", OK, f"{used} ({modes})")
        return Check("structured output", WARN, f"{used} is accepted but not followed ({modes})",
                     fix=fix if best != used else None)

    async def _probe(self, mode: str) -> str:
        """What the endpoint does with the probe's schema sent in ``mode``: honoured, ignored or refused."""
        ps = provider_settings(self.provider, self.settings).model_copy(update={"structured_output": mode})
        settings = self.settings.model_copy(update={"providers": {**self.settings.providers, self.provider: ps}})
        adapter = build_adapter(self.ref, settings)
        try:
            reply = await adapter.complete(PROBE, timeout=self.timeout)
        except ModelError as exc:
            return f"refused (HTTP {exc.status})" if exc.status else f"failed ({_brief(exc)})"
        finally:
            await adapter.aclose()
        return "honoured" if _honoured(reply) else "ignored"

    async def _streaming(self) -> Check:
        done = Completion(text="", model=self.adapter.name)
        started = time.perf_counter()
        first: float | None = None
        chunks = 0
        try:
            async for _ in self.adapter.stream(SMALL, timeout=self.timeout, into=done):
                chunks += 1
                first = first if first is not None else (time.perf_counter() - started) * 1000.0
        except ModelError as exc:
            self.uses["streaming"] = "no"
            return Check("streaming", WARN, f"a streamed call fails: {_brief(exc)} (judges do not stream; "
                                            "the gate's proxy does)",
                         fix="check that the server supports \"stream\": true on /chat/completions")
        self.uses["streaming"] = "yes"
        usage = "with its token usage" if done.output_tokens else \
            "without token usage (a streamed call's tokens are recorded as not reported)"
        after = f", the first after {first:.0f} ms" if first is not None else ""
        return Check("streaming", OK, f"{chunks} chunk(s){after}, {usage}")

    async def _logprobs(self) -> Check:
        wanted = self.score_mode == "logprobs"
        try:
            reply = await self.adapter.complete(DIGIT, timeout=self.timeout)
            tokens = reply.logprobs
            missing = "not returned" if tokens is None else None
        except ModelError as exc:
            tokens, missing = None, f"asking for them fails: {_brief(exc)}"
        if tokens is not None:
            widest = max((len(t.top) for t in tokens if t.top), default=None)
            if widest is None and any(ch.isdigit() for t in tokens for ch in t.token):
                missing = "returned, but no top_logprobs alternatives"
            else:
                alternatives = f", {widest} alternatives at a number" if widest else ""
                self.uses["score mode"] = "logprobs (weighted scores)" if wanted else "plain"
                return Check("logprobs", OK, f"returned ({len(tokens)} tokens{alternatives}; "
                                             f"top_logprobs asked: {TOP_LOGPROBS})")
        if wanted:
            self.uses["score mode"] = "logprobs, unavailable here: plain scores, each marked 'logprobs unavailable'"
            return Check("logprobs", FAIL, f"{missing}; score_mode: logprobs needs them",
                         fix="use score_mode: plain, or an endpoint that returns logprobs (llama.cpp, vLLM, OpenAI)")
        self.uses["score mode"] = "plain"
        return Check("logprobs", OK, f"{missing} (score_mode: logprobs would record 'logprobs unavailable' "
                                     "and keep the plain scores)")

    # -- helpers ---------------------------------------------------------------------
    def _stop(self, check: Check) -> tuple[list[Check], dict[str, str]]:
        """End with ``check``; the checks not reached are skipped."""
        self.checks.append(check)
        done = {c.name for c in self.checks}
        self.checks += [Check(name, SKIP, f"not checked: {check.name} failed")
                        for name in ENDPOINT_CHECKS if name not in done]
        return self.checks, self.uses

    def _no_answer_fix(self, exc: ModelError) -> str:
        """What to do when no answer came: wait longer for a slow one, else find the server."""
        if isinstance(exc, ModelTimeout):
            return "raise the timeout (--timeout, or timeout in jurist.yaml), or check the server's load"
        where = "OPENAI_BASE_URL (or providers.openai.base_url in jurist.yaml)" if self.provider == "openai" else \
            f"providers.{self.provider}.base_url in jurist.yaml"
        return f"start the server, or set {where} to its address"

    def _key_fix(self) -> str:
        ps = provider_settings(self.provider, self.settings)
        variable = f"{ps.api_key_env} or " if ps.api_key_env else ""
        return f"set {variable}providers.{self.provider}.api_key in jurist.yaml to a key the endpoint accepts"


def _unreachable(exc: ModelError) -> bool:
    """An error that means no answer came at all (refused, dropped, timed out)."""
    return isinstance(exc, (ModelUnavailable, ModelTimeout)) and exc.status is None


def _honoured(reply: Completion) -> bool:
    try:
        return bool(json.loads(reply.text) == {"probe": PROBE_WORD})
    except ValueError:
        return False


def _said(exc: ModelError) -> str:
    """What the endpoint answered: its status and own message, else the error's."""
    if exc.status is None:
        return _brief(exc)
    message = " ".join(error_detail(exc.body).split()) if exc.body else ""
    if not message:
        return f"HTTP {exc.status}"
    return f"HTTP {exc.status}: {message if len(message) <= 120 else message[:117] + '...'}"


def _brief(exc: Exception, limit: int = 200) -> str:
    """The error's message on one line, at most ``limit`` characters."""
    text = " ".join(str(exc).split())
    return (text if len(text) <= limit else text[:limit - 3] + "...") or type(exc).__name__
