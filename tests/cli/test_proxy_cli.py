"""`jurist proxy` as a user starts it: a subprocess in front of a scripted upstream."""

import os
import subprocess
import sys

import openai
import pytest

from jurist.testing import Reply

from tests.server.live import free_port, wait_until_healthy


@pytest.mark.parametrize("access_log", [False, True])
def test_jurist_proxy_serves_a_stock_openai_client(provider, tmp_path, access_log):
    """The answer reaches a stock client; a line per request is printed only with --access-log
    (the store records every gated request either way)."""
    provider.default = Reply(text="Paris is the capital of France.")
    port = free_port()
    (tmp_path / "jurist.yaml").write_text(
        f"providers:\n  fake:\n    type: openai\n    base_url: {provider.base_url}\n    api_key: k\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "JURIST_"))}
    env["JURIST_HOME"] = str(tmp_path / ".jurist")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jurist", "proxy", "--upstream", provider.base_url, "--port", str(port),
         "--judge", "fake/judge", "--api-key", "k", *(["--access-log"] if access_log else [])],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until_healthy(proc, base)
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="k", max_retries=0)
        reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Capital of France?"}])
        assert reply.choices[0].message.content == "Paris is the capital of France."
        extra = reply.model_extra["jurist"]
        assert extra["trace_id"] and extra["llm_calls"]
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=15)
    assert "jurist proxy on" in out
    assert ('"POST /v1/chat/completions HTTP/1.1" 200' in out) is access_log, out


def _calibrate(tmp_path, provider, kappa: float) -> None:
    """Store a calibration with this κ of the comprehensiveness judge `fake/judge` in the store the
    command will use."""
    import asyncio

    import jurist
    from jurist.gate import Gate, GateConfig
    from jurist.judges.calibration import identity_of
    from jurist.store import Store
    from tests.calibrations import store_calibration

    async def identity():
        async with jurist.open(providers={"fake": {"type": "openai", "base_url": provider.base_url,
                                                   "api_key": "k"}}) as rt:
            gate = Gate(GateConfig(evaluator="comprehensiveness"), runtime=rt, judge="fake/judge")
            return identity_of(gate.evaluator.judge, "comprehensiveness")

    store = Store(f"sqlite:///{tmp_path / '.jurist' / 'jurist.db'}")
    try:
        store_calibration(store, asyncio.run(identity()), kappa)
    finally:
        store.close()


def test_require_calibration_is_checked_before_the_proxy_listens(provider, tmp_path):
    """No calibration, or one below the bar: exit 2 before any banner or call, naming the command
    that makes one; a good enough one: the proxy starts."""
    from tests.conftest import run_cli

    (tmp_path / "jurist.yaml").write_text(
        f"providers:\n  fake:\n    type: openai\n    base_url: {provider.base_url}\n    api_key: k\n")
    env = {"JURIST_HOME": str(tmp_path / ".jurist")}
    args = ["proxy", "--upstream", provider.base_url, "--judge", "fake/judge", "--require-calibration", "0.6"]
    r = run_cli(*args, "--port", str(free_port()), env=env, cwd=tmp_path)
    message = " ".join(r.stderr.split())
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "no stored calibration (min_kappa 0.6)" in message
    assert "jurist calibrate --gate comprehensiveness --judge fake/judge" in message
    assert "jurist proxy on" not in r.stdout and provider.requests == []

    _calibrate(tmp_path, provider, 0.3)
    r = run_cli(*args, "--port", str(free_port()), env=env, cwd=tmp_path)
    assert r.returncode == 2 and "0.3" in r.stderr and "jurist proxy on" not in r.stdout, (r.stdout, r.stderr)

    _calibrate(tmp_path, provider, 0.8)
    port = free_port()
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "JURIST_"))}
    full_env.update(env)
    proc = subprocess.Popen([sys.executable, "-m", "jurist", *args, "--port", str(port)], cwd=tmp_path,
                            env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_until_healthy(proc, f"http://127.0.0.1:{port}")
    finally:
        proc.terminate()
        proc.wait(timeout=15)
    assert provider.requests == []  # the check reads the store only


# -- configuration that fails early ---------------------------------------------------------


@pytest.fixture
def uvicorn_runs(monkeypatch) -> list[dict]:
    """uvicorn.run, recorded instead of run: a command that should stop before it listens and does
    not is seen, not left serving."""
    import uvicorn

    runs: list[dict] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: runs.append({"app": app, **kw}))
    return runs


def _refused(args: list[str], runs: list[dict]) -> str:
    """Run ``jurist ARGS`` in this process: it must stop with exit 2 before it listens; its message."""
    from typer.testing import CliRunner

    from jurist.cli.main import app

    r = CliRunner().invoke(app, [*args, "--port", str(free_port())], env={"COLUMNS": "300"})
    assert r.exit_code == 2 and runs == [], r.output
    assert "jurist proxy on" not in r.output and "jurist serving" not in r.output, r.output
    return " ".join(r.output.split())


def test_an_unknown_judge_alias_stops_the_proxy_before_it_listens(provider, uvicorn_runs):
    """`jurist proxy --judge fast` without an alias `fast` used to start, print its banner and answer
    500 to every request; like `jurist evaluate --judge fast`, it is exit 2 with the fix."""
    message = _refused(["proxy", "--upstream", provider.base_url, "--judge", "fast"], uvicorn_runs)
    assert "unknown model 'fast'" in message and "define the alias 'fast' under 'aliases:'" in message
    assert provider.requests == []


def test_a_judge_without_its_key_stops_the_proxy_before_it_listens(provider, uvicorn_runs):
    message = _refused(["proxy", "--upstream", provider.base_url, "--judge", "openai/gpt-4o-mini"], uvicorn_runs)
    assert "openai/gpt-4o-mini needs an API key: set OPENAI_API_KEY" in message


def test_serve_upstream_resolves_the_gates_judge_before_it_listens(provider, uvicorn_runs):
    assert "unknown model 'fast'" in _refused(["serve", "--upstream", provider.base_url, "--judge", "fast"],
                                               uvicorn_runs)


def test_serve_gate_options_need_an_upstream(uvicorn_runs):
    message = _refused(["serve", "--strategy", "revision", "--no-feedback"], uvicorn_runs)
    assert "--strategy, --feedback/--no-feedback: are options of the gate proxy: add --upstream URL" in message


def test_serve_upstream_gives_its_judge_and_gate_options_to_the_gate(provider, tmp_path):
    """`serve --upstream --judge X` used to give X to the checklist tutor only (the gate judged with
    local/minilm, while the start-up notice said to configure a judge with --judge); now the gate
    is judged by X, with the strategy, evaluator, threshold and retries given."""
    import json

    import httpx

    from jurist.testing import Reply

    verdict = json.dumps({"quality_score": 0.9, "confidence_score": 0.9, "issues": [], "improvement_hint": None})

    def reply(body):
        return Reply(text=verdict) if body.get("model") == "judge" else Reply(text="Paris.")

    provider.default = reply
    (tmp_path / "jurist.yaml").write_text(
        f"providers:\n  fake:\n    type: openai\n    base_url: {provider.base_url}\n    api_key: k\n")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "JURIST_", "ANTHROPIC_"))}
    env.update(JURIST_HOME=str(tmp_path / ".jurist"), COLUMNS="200")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jurist", "serve", "--upstream", provider.base_url, "--port", str(port),
         "--judge", "fake/judge", "--evaluator", "quality", "--threshold", "0.95", "--strategy", "revision",
         "--max-evaluation-retries", "0", "--feedback"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until_healthy(proc, base)
        r = httpx.post(f"{base}/v1/chat/completions", timeout=60,
                       json={"model": "m", "messages": [{"role": "user", "content": "Capital of France?"}]})
        record = r.json()["jurist"]
    finally:
        proc.terminate()
        out = proc.communicate(timeout=15)[0]
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "Paris."
    assert record["evaluator"] == "quality" and record["strategy"] == "revision"
    # 0.9 is below the threshold given, and no retry was allowed
    assert record["accept_reason"] == "max_regenerations" and len(record["attempts"]) == 1
    judged = [q for q in provider.requests if q["json"]["model"] == "judge"]
    assert len(judged) == 1, [q["json"]["model"] for q in provider.requests]
    line = " ".join(out.split())
    assert "gate: quality, revision, up to 0 retries; chat page: /chat" in line, out
    assert "gate judge: fake/judge; limits: generations 512 in flight to the upstream" in line, out
    assert "judge calls 512 per endpoint (max_concurrency)" in line, out  # max_concurrency unset: as the upstream
    assert "no judge configured" not in out, out
