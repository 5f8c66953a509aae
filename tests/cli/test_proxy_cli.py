"""`jurist proxy` as a user starts it: a subprocess in front of a scripted upstream."""

import os
import subprocess
import sys
import time

import httpx
import openai

from jurist.testing import Reply

from tests.server.live import free_port


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
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{base}/api/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            assert time.monotonic() < deadline, "jurist proxy did not start"
            time.sleep(0.2)
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="k", max_retries=0)
        reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Capital of France?"}])
        assert reply.choices[0].message.content == "Paris is the capital of France."
        extra = reply.model_extra["jurist"]
        assert extra["trace_id"] and extra["llm_calls"]
    finally:
        proc.terminate()
        proc.wait(timeout=15)
