"""`jurist proxy` in front of the real server, with a stock openai client, streaming and not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from tests.conftest import run_cli
from tests.realserver.conftest import MODEL, write_config
from tests.server.live import free_port, wait_until_healthy

pytestmark = pytest.mark.realserver

ASK = [{"role": "user", "content": "What is the capital of France? One sentence."}]


@pytest.fixture
def proxy(llama, tmp_path: Path) -> Iterator[str]:
    """`jurist proxy` (the gate's defaults, judged by llamacpp/smollm2) in front of the server; its base URL."""
    write_config(tmp_path, llama.base_url)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "JURIST_"))}
    env["JURIST_HOME"] = str(tmp_path / ".jurist")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jurist", "proxy", "--upstream", llama.base_url, "--port", str(port),
         "--judge", f"llamacpp/{MODEL}", "--evaluator", "quality", "--no-feedback"],  # score only: one judge call
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_healthy(proc, base, timeout=60)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def logged(tmp_path: Path, trace_id: str) -> list[dict]:
    out = run_cli("logs", "--trace", trace_id, "--json", env={"JURIST_HOME": str(tmp_path / ".jurist")},
                  cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


def settled(proxy: str, jurist_field: dict) -> dict:
    """--no-feedback: the answer came before the judge's evaluation; the stored record, read
    once that evaluation has ended, has it."""
    assert jurist_field["evaluation_pending"] is True
    assert [c["type"] for c in jurist_field["llm_calls"]] == ["generation"]
    r = httpx.get(f"{proxy}/api/gate/{jurist_field['trace_id']}", params={"wait": 25}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()["record"]


def check_records(jurist_field: dict, tmp_path: Path, *, streamed: bool) -> None:
    """The gate's llm_calls and `jurist logs` show the generation and the judge call; the upstream
    was asked as the client asked (a stream from this server has no usage, a whole reply has it)."""
    calls = jurist_field["llm_calls"]
    assert [c["type"] for c in calls] == ["generation", "quality_evaluation"]
    generation, judged = calls
    assert generation["status"] == "ok" and generation["model"] == MODEL
    assert generation["http_status"] == 200 and generation["finish_reason"] in ("stop", "length")
    rows = {r["id"]: r for r in logged(tmp_path, jurist_field["trace_id"])}
    assert set(rows) == {generation["call_id"], judged["call_id"]}
    upstream = rows[generation["call_id"]]
    if streamed:
        assert generation["tokens"] is None  # this server sends no usage in a stream
        assert upstream["params"]["stream"] is True and upstream["usage_known"] is False
    else:
        assert generation["tokens"] > 0 and "stream" not in upstream["params"] and upstream["usage_known"] is True
    if judged["status"] == "ok":  # the judge answered within the gate's default time limits
        assert judged["input_tokens"] > 50 and judged["output_tokens"] > 5
        assert rows[judged["call_id"]]["params"]["structured_output"] == "json_object_schema"
    table = run_cli("logs", "--trace", jurist_field["trace_id"], env={"JURIST_HOME": str(tmp_path / ".jurist")},
                    cwd=tmp_path)
    assert "generation" in table.stdout and ("n/a" in table.stdout) is streamed  # unknown tokens: n/a


def test_a_stock_client_without_streaming(proxy, tmp_path) -> None:
    with openai.OpenAI(base_url=f"{proxy}/v1", api_key="none", max_retries=0, timeout=300) as client:
        assert MODEL in [m.id for m in client.models.list().data]  # the upstream's list, passed through
        reply = client.chat.completions.create(model=MODEL, messages=ASK, max_tokens=32, temperature=0)
    assert reply.object == "chat.completion" and reply.choices[0].message.content
    check_records(settled(proxy, reply.model_extra["jurist"]), tmp_path, streamed=False)


def test_a_stock_client_streaming(proxy, tmp_path) -> None:
    with openai.OpenAI(base_url=f"{proxy}/v1", api_key="none", max_retries=0, timeout=300) as client:
        chunks = list(client.chat.completions.create(model=MODEL, messages=ASK, max_tokens=32, temperature=0,
                                                     stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finals = [c.model_extra["jurist"] for c in chunks if c.model_extra and "jurist" in c.model_extra]
    assert text and finals and chunks[-1].choices[0].finish_reason in ("stop", "length")  # the upstream's own
    check_records(settled(proxy, finals[-1]), tmp_path, streamed=True)
