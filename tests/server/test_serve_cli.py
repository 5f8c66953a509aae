"""`jurist serve` runs uvicorn on create_app(): a real process on a free 127.0.0.1 port."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request

import typer
from typer.testing import CliRunner

import jurist
from jurist.cli import serve
from tests.server.live import free_port

# cli/main.py wires serve.register; until then the test builds a command with it.
RUN = (
    "import typer, sys; from jurist.cli import serve; app = typer.Typer(); serve.register(app); "
    "app.command('version')(lambda: None); app()"
)


def test_serve_help_lists_host_and_port():
    app = typer.Typer()
    serve.register(app)
    app.command("version")(lambda: None)
    out = CliRunner().invoke(app, ["serve", "--help"], env={"COLUMNS": "200"}).output
    assert "--host" in out and "--port" in out and "127.0.0.1" in out and "8000" in out


def test_serve_answers_health_on_the_given_port(tmp_path):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JURIST_", "OPENAI_", "ANTHROPIC_"))}
    env["JURIST_HOME"] = str(tmp_path / ".jurist")
    proc = subprocess.Popen([sys.executable, "-c", RUN, "serve", "--host", "127.0.0.1", "--port", str(port)],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline, body = time.monotonic() + 20, None
        while time.monotonic() < deadline and body is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=2) as r:
                    body = json.loads(r.read())
            except OSError:
                assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
                time.sleep(0.1)
        assert body == {"status": "ok", "version": jurist.__version__}
    finally:
        proc.terminate()
        proc.wait(timeout=10)
