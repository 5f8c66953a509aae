"""`jurist doctor`'s checks against the scripted server's failures."""

from __future__ import annotations

import json
import socket

import pytest

from jurist.config import Settings
from jurist.models.doctor import FAIL, OK, SKIP, WARN, Diagnosis, diagnose
from jurist.testing import ProviderServer, Reply
from jurist.testing.replies import TokenLogprob, token_logprobs

from tests.conftest import run_cli

PROBE_OK = json.dumps({"probe": "jurist-probe-ok"})


def llama_like(req: dict) -> Reply:
    """Answers as llama-cpp-python's server does: a json_schema response_format is a 500, a
    json_object with a schema is followed, logprobs come back when asked for."""
    fmt = req.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return Reply(status=500)
    if fmt.get("type") == "json_object" and fmt.get("schema"):
        return Reply(text=PROBE_OK)
    if req.get("logprobs"):
        return Reply(text="4", logprobs=token_logprobs(["4"], {0: {"4": -0.1, "3": -2.5}}))
    return Reply(text="Sure! Here you go.")


def settings_for(server: ProviderServer, **provider: object) -> Settings:
    return Settings.load(providers={"fake": {"type": "openai", "base_url": server.base_url, "api_key": "k",
                                             **provider}}, timeout=5, max_retries=0)


def by_name(diagnosis: Diagnosis) -> dict[str, tuple[str, str, str | None]]:
    return {c.name: (c.status, c.detail, c.fix) for c in diagnosis.checks}


async def test_a_healthy_endpoint_is_ready_and_says_what_jurist_will_use(provider):
    provider.models = ["judge-1"]
    provider.default = llama_like
    diagnosis = await diagnose(settings_for(provider, structured_output="json_object_schema"), "fake/judge-1")
    checks = by_name(diagnosis)
    assert diagnosis.ok and [c.status for c in diagnosis.checks] == [OK] * 8
    assert list(checks) == ["configuration", "reachable", "auth", "model listed", "call", "structured output",
                            "streaming", "logprobs"]
    assert checks["structured output"][1] == (
        "json_object_schema (json_schema: refused (HTTP 500); json_object_schema: honoured; "
        "ollama_format: ignored)")
    assert "returned (1 tokens, 2 alternatives at a number" in checks["logprobs"][1]
    assert "with its token usage" in checks["streaming"][1]
    assert diagnosis.uses["structured output"] == "json_object_schema"
    assert diagnosis.uses["streaming"] == "yes" and diagnosis.uses["score mode"] == "plain"
    assert diagnosis.uses["judge"] == f"fake/judge-1 at {provider.base_url}"
    # one small call, three probes (one per constrained mode), the configured mode, a stream, a logprobs call
    assert len(provider.requests) == 7


async def test_an_unreachable_endpoint_skips_the_rest_and_says_where_to_point():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    settings = Settings.load(providers={"fake": {"type": "openai", "base_url": f"http://127.0.0.1:{port}/v1",
                                                 "api_key": "k"}}, timeout=5)
    diagnosis = await diagnose(settings, "fake/judge-1")
    checks = by_name(diagnosis)
    assert not diagnosis.ok
    assert checks["reachable"][0] == FAIL and "could not be reached" in checks["reachable"][1]
    assert checks["reachable"][2] == "start the server, or set providers.fake.base_url in jurist.yaml to its address"
    assert {checks[n][0] for n in ("auth", "call", "structured output", "streaming", "logprobs")} == {SKIP}


async def test_a_refused_key_fails_auth_and_names_the_setting(provider):
    provider.default = Reply(status=401)
    diagnosis = await diagnose(settings_for(provider), "fake/judge-1")
    checks = by_name(diagnosis)
    assert checks["reachable"] == (OK, "GET /models answered HTTP 404", None)
    assert checks["auth"][0] == FAIL and "401" in checks["auth"][1]
    assert checks["auth"][2] == "set providers.fake.api_key in jurist.yaml to a key the endpoint accepts"
    assert checks["call"][0] == SKIP and not diagnosis.ok


async def test_openai_key_fix_names_the_variable(provider, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", provider.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "wrong")
    provider.default = Reply(status=403)
    checks = by_name(await diagnose(Settings.load(timeout=5), "openai/gpt-test"))
    assert checks["auth"][2] == "set OPENAI_API_KEY or providers.openai.api_key in jurist.yaml to a key the " \
                                "endpoint accepts"


async def test_an_unknown_model_fails_with_the_names_the_endpoint_lists(provider):
    provider.models = ["qwen3:14b", "llama3.1:8b"]
    provider.default = Reply(status=404)
    checks = by_name(await diagnose(settings_for(provider), "fake/qwen3:4b"))
    assert checks["auth"][0] == OK
    assert checks["model listed"][0] == FAIL
    assert checks["model listed"][2] == "name a model the endpoint lists: qwen3:14b, llama3.1:8b"


async def test_a_single_model_server_answering_any_name_is_a_warning(provider):
    provider.models = ["smollm2"]
    provider.default = llama_like
    diagnosis = await diagnose(settings_for(provider, structured_output="json_object_schema"), "fake/other")
    status, detail, fix = by_name(diagnosis)["model listed"]
    assert status == WARN and "not among the endpoint's models (smollm2)" in detail
    assert fix == "name a listed model, e.g. fake/smollm2" and diagnosis.ok


async def test_a_refused_structured_output_mode_fails_and_names_the_one_that_works(provider):
    provider.default = llama_like
    diagnosis = await diagnose(settings_for(provider, structured_output="json_schema"), "fake/j")
    status, detail, fix = by_name(diagnosis)["structured output"]
    assert status == FAIL and detail.startswith("structured_output json_schema fails here, HTTP 500: 500 Internal")
    assert fix == "set providers.fake.structured_output: json_object_schema in jurist.yaml"
    assert diagnosis.uses["structured output"] == "json_schema (fails here)" and not diagnosis.ok


async def test_prompt_mode_where_a_schema_mode_works_is_a_warning(provider):
    provider.default = llama_like
    diagnosis = await diagnose(settings_for(provider, structured_output="prompt"), "fake/j")
    status, detail, fix = by_name(diagnosis)["structured output"]
    assert status == WARN and detail.startswith("prompt, though the endpoint honours json_object_schema")
    assert fix == "set providers.fake.structured_output: json_object_schema in jurist.yaml" and diagnosis.ok


async def test_an_endpoint_that_ignores_every_schema(provider):
    provider.default = Reply(text="Here is some prose.")
    diagnosis = await diagnose(settings_for(provider, structured_output="prompt"), "fake/j")
    assert by_name(diagnosis)["structured output"] == (
        OK, "prompt: no schema mode is honoured here (json_schema: ignored; json_object_schema: ignored; ollama_format: ignored)", None)
    diagnosis = await diagnose(settings_for(provider, structured_output="json_schema"), "fake/j")
    status, detail, fix = by_name(diagnosis)["structured output"]
    assert status == WARN and detail.startswith("json_schema is accepted but not followed") and fix is not None


async def test_a_stream_without_usage_says_its_tokens_are_recorded_as_not_reported(provider):
    """As llama-cpp-python's server: no usage chunk in a stream, whatever is asked; never a made-up 0."""
    def no_stream_usage(req: dict) -> Reply:
        reply = llama_like(req)
        reply.usage = False
        return reply

    provider.default = no_stream_usage
    diagnosis = await diagnose(settings_for(provider, structured_output="json_object_schema"), "fake/j")
    status, detail, _ = by_name(diagnosis)["streaming"]
    assert status == OK and detail.endswith(
        "without token usage (a streamed call's tokens are recorded as not reported)")
    assert "0 tokens" not in detail


async def test_a_broken_stream_is_a_warning(provider):
    def no_streams(req: dict) -> Reply:
        return Reply(drop=True) if req.get("stream") else llama_like(req)

    provider.default = no_streams
    diagnosis = await diagnose(settings_for(provider, structured_output="json_object_schema"), "fake/j")
    status, detail, fix = by_name(diagnosis)["streaming"]
    assert status == WARN and detail.startswith("a streamed call fails:") and "stream" in fix
    assert diagnosis.uses["streaming"] == "no" and diagnosis.ok


async def test_missing_logprobs_fail_only_when_the_score_mode_needs_them(provider):
    provider.default = Reply(text="4")
    settings = settings_for(provider, structured_output="prompt")
    plain = by_name(await diagnose(settings, "fake/j"))["logprobs"]
    assert plain[0] == OK and plain[1].startswith("not returned (score_mode: logprobs would record")
    needed = await diagnose(settings, "fake/j", score_mode="logprobs")
    status, detail, fix = by_name(needed)["logprobs"]
    assert (status, detail) == (FAIL, "not returned; score_mode: logprobs needs them") and "score_mode: plain" in fix
    assert needed.uses["score mode"].startswith("logprobs, unavailable here") and not needed.ok
    assert provider.requests[-1]["json"]["top_logprobs"] == 20


async def test_logprobs_without_alternatives(provider):
    provider.default = Reply(text="4", logprobs=[TokenLogprob("4", -0.1, bytes=False)])
    detail = by_name(await diagnose(settings_for(provider, structured_output="prompt"), "fake/j",
                                    score_mode="logprobs"))["logprobs"]
    assert detail[:2] == (FAIL, "returned, but no top_logprobs alternatives; score_mode: logprobs needs them")


@pytest.mark.parametrize("reply, fix", [
    (Reply(status=429), "wait, or lower providers.fake.max_in_flight / requests_per_minute in jurist.yaml"),
    (Reply(status=503), "check the server's log; the message above is what it said"),
])
async def test_a_failing_call(provider, reply, fix):
    provider.default = reply
    checks = by_name(await diagnose(settings_for(provider), "fake/j"))
    assert checks["call"][0] == FAIL and checks["call"][2] == fix
    assert checks["structured output"][0] == SKIP


async def test_a_hanging_endpoint_times_out(provider):
    provider.models = ["j"]
    provider.default = Reply(hang=True)
    checks = by_name(await diagnose(settings_for(provider), "fake/j", timeout=0.3))
    assert checks["reachable"][0] == OK and checks["call"][0] == FAIL
    assert "did not answer in time" in checks["call"][1] and checks["call"][2].startswith("raise the timeout")
    assert checks["auth"][0] == SKIP  # no answer: the key was neither accepted nor refused
    # the Anthropic wire has no model list here: the call is the first thing that could answer
    anthropic = Settings.load(providers={"anthropic": {"base_url": provider.anthropic_base_url, "api_key": "k"}})
    checks = by_name(await diagnose(anthropic, "anthropic/claude-test", timeout=0.3))
    assert checks["reachable"][0] == FAIL and checks["reachable"][2].startswith("raise the timeout")


async def test_the_anthropic_wire(provider):
    provider.default = Reply(text="OK")
    anthropic = Settings.load(providers={"anthropic": {"base_url": provider.anthropic_base_url, "api_key": "k"}})
    diagnosis = await diagnose(anthropic, "anthropic/claude-test")
    checks = by_name(diagnosis)
    assert diagnosis.ok and checks["reachable"] == (OK, "the first call was answered", None)
    assert checks["model listed"] == (SKIP, "the endpoint gives no model list (not checked on this wire)", None)
    assert checks["structured output"][:2] == (OK, "prompt: this wire has no schema mode; the judge prompt asks "
                                                   "for JSON and the parser reads it")
    assert checks["streaming"][0] == OK and checks["logprobs"][1].startswith("not returned")
    assert all(r["path"] == "/v1/messages" for r in provider.requests)


async def test_in_process_judges_have_no_endpoint():
    local = await diagnose(Settings.load())
    assert local.ok and local.checks[0].status == WARN and "no judge configured" in local.checks[0].detail
    assert "JURIST_JUDGE" in (local.checks[0].fix or "")
    scripted = await diagnose(Settings.load(), "scripted/demo")
    assert scripted.ok and scripted.checks[0].status == OK and scripted.endpoint is None


async def test_a_bad_reference_fails_configuration():
    diagnosis = await diagnose(Settings.load(), "nosuch/model")
    assert [(c.name, c.status) for c in diagnosis.checks] == [("configuration", FAIL)]
    assert "unknown provider 'nosuch'" in diagnosis.checks[0].detail


def test_cli_exit_codes_fixes_and_what_jurist_will_use(provider, tmp_path):
    provider.models = ["judge-1"]
    provider.default = llama_like
    env = {"OPENAI_BASE_URL": provider.base_url, "OPENAI_API_KEY": "k", "JURIST_HOME": str(tmp_path / ".jurist")}
    (tmp_path / "jurist.yaml").write_text("providers:\n  openai:\n    structured_output: json_schema\n")
    r = run_cli("doctor", "openai/judge-1", env=env, cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "to fix:" in r.stdout and "providers.openai.structured_output: json_object_schema" in r.stdout
    assert "not ready" in r.stdout
    (tmp_path / "jurist.yaml").write_text("providers:\n  openai:\n    structured_output: json_object_schema\n")
    r = run_cli("doctor", "openai/judge-1", "--score-mode", "logprobs", env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "jurist will use:" in r.stdout and "structured output: json_object_schema" in r.stdout
    assert "score mode: logprobs (weighted scores)" in r.stdout and "ready: 8 ok" in r.stdout
