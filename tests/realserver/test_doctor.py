"""`jurist doctor` against a real llama.cpp server (llama-cpp-python, SmolLM2)."""

from __future__ import annotations

import pytest

from jurist.config import Settings
from jurist.models.doctor import FAIL, OK, SKIP, WARN, diagnose

from tests.conftest import run_cli
from tests.realserver.conftest import MODEL_ALIAS

pytestmark = pytest.mark.realserver


def settings_for(base_url: str, structured_output: str, timeout: float = 120) -> Settings:
    return Settings.load(providers={"llamacpp": {"base_url": base_url, "structured_output": structured_output}},
                         timeout=timeout)


async def test_the_real_server_is_ready_with_json_object_schema(llama_server):
    diagnosis = await diagnose(settings_for(llama_server, "json_object_schema"), f"llamacpp/{MODEL_ALIAS}",
                               score_mode="logprobs")
    checks = {c.name: c for c in diagnosis.checks}
    assert diagnosis.ok, [(c.name, c.status, c.detail) for c in diagnosis.checks]
    assert all(c.status == OK for c in diagnosis.checks)
    assert checks["model listed"].detail == f"{MODEL_ALIAS} is among the endpoint's 1 model(s)"
    # llama-cpp-python's server takes response_format json_object with a schema, and answers json_schema with a 500
    assert checks["structured output"].detail == (
        "json_object_schema (json_schema: refused (HTTP 500); json_object_schema: honoured; "
        "ollama_format: ignored)")
    assert checks["logprobs"].detail.startswith("returned (")
    assert "alternatives at a number" in checks["logprobs"].detail
    assert diagnosis.uses["structured output"] == "json_object_schema"
    assert diagnosis.uses["score mode"] == "logprobs (weighted scores)"
    assert diagnosis.uses["streaming"] == "yes"
    assert diagnosis.uses["latency"].endswith(" ms for a small call")


async def test_json_schema_is_refused_by_the_real_server_and_the_fix_names_the_mode_that_works(llama_server):
    diagnosis = await diagnose(settings_for(llama_server, "json_schema"), f"llamacpp/{MODEL_ALIAS}")
    check = next(c for c in diagnosis.checks if c.name == "structured output")
    assert check.status == FAIL and "fails here, HTTP 500: 1 validation error: " in check.detail
    assert "('body', 'response_format', 'type')" in check.detail
    assert check.fix == "set providers.llamacpp.structured_output: json_object_schema in jurist.yaml"
    assert not diagnosis.ok


async def test_any_model_name_is_served_by_the_single_model_server(llama_server):
    diagnosis = await diagnose(settings_for(llama_server, "json_object_schema"), "llamacpp/gpt-4o-mini")
    check = next(c for c in diagnosis.checks if c.name == "model listed")
    assert check.status == WARN and check.fix == f"name a listed model, e.g. llamacpp/{MODEL_ALIAS}"
    assert diagnosis.ok


async def test_a_server_that_is_gone(llama_server):
    dead = llama_server.rsplit(":", 1)[0] + ":9/v1"  # the discard port: nothing answers
    diagnosis = await diagnose(settings_for(dead, "json_object_schema", timeout=5), f"llamacpp/{MODEL_ALIAS}")
    statuses = {c.name: c.status for c in diagnosis.checks}
    assert statuses["reachable"] == FAIL and statuses["logprobs"] == SKIP and not diagnosis.ok


def test_cli_against_the_real_server(llama_server, tmp_path):
    (tmp_path / "jurist.yaml").write_text(
        f"providers:\n  llamacpp:\n    base_url: {llama_server}\n    structured_output: json_object_schema\n"
        "score_mode: logprobs\ntimeout: 120\n")
    r = run_cli("doctor", f"llamacpp/{MODEL_ALIAS}", env={"JURIST_HOME": str(tmp_path / ".jurist")}, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ready: 8 ok, 0 warning(s), 0 failed" in r.stdout
    assert "structured output: json_object_schema" in r.stdout and "score mode: logprobs (weighted scores)" in r.stdout
