"""`jurist proxy` as a user starts it: a subprocess in front of a scripted upstream."""

import os
import subprocess
import sys

import openai

from jurist.testing import Reply

from tests.server.live import free_port, wait_until_healthy


def test_jurist_proxy_serves_a_stock_openai_client(provider, tmp_path):
    provider.default = Reply(text="Paris is the capital of France.")
    port = free_port()
    (tmp_path / "jurist.yaml").write_text(
        f"providers:\n  fake:\n    type: openai\n    base_url: {provider.base_url}\n    api_key: k\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "JURIST_"))}
    env["JURIST_HOME"] = str(tmp_path / ".jurist")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jurist", "proxy", "--upstream", provider.base_url, "--port", str(port),
         "--judge", "fake/judge", "--api-key", "k"],
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
        proc.wait(timeout=15)


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
