"""`jurist serve` runs uvicorn on create_app(): a real process on a free 127.0.0.1 port."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request

import pytest
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


def _serve_output(tmp_path, host, extra_env, *args):
    """Start `serve --host HOST [ARGS]`, wait for health on 127.0.0.1, return what it printed."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JURIST_", "OPENAI_", "ANTHROPIC_"))}
    env.update(JURIST_HOME=str(tmp_path / ".jurist"), COLUMNS="200", **extra_env)
    proc = subprocess.Popen([sys.executable, "-c", RUN, "serve", "--host", host, "--port", str(port), *args],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=2):
                    break
            except OSError:
                assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
                time.sleep(0.1)
        ss = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True).stdout
        listening = {line.split()[3] for line in ss.splitlines()}  # the local addresses
    finally:
        proc.terminate()
        out = proc.communicate(timeout=10)[0]
    return out, listening, port


def test_without_a_token_serve_refuses_a_public_address(tmp_path):
    """No quiet fallback to 127.0.0.1: the command stops with the fix, and nothing listens."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JURIST_", "OPENAI_", "ANTHROPIC_"))}
    env.update(JURIST_HOME=str(tmp_path / ".jurist"), COLUMNS="200")
    done = subprocess.run([sys.executable, "-c", RUN, "serve", "--host", "0.0.0.0", "--port", str(port)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "refusing to listen on 0.0.0.0 without an API token" in done.stderr and "JURIST_API_TOKEN" in done.stderr
    assert subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True).stdout == ""


def test_with_a_token_serve_binds_where_asked(tmp_path):
    out, listening, port = _serve_output(tmp_path, "0.0.0.0", {"JURIST_API_TOKEN": "t0ken"})
    assert "no JURIST_API_TOKEN" not in out and listening == {f"0.0.0.0:{port}"}


@pytest.mark.parametrize("access_log", [False, True])
def test_serve_prints_a_line_per_request_only_with_access_log(tmp_path, access_log):
    out, _, _ = _serve_output(tmp_path, "127.0.0.1", {}, *(["--access-log"] if access_log else []))
    assert "jurist serving on" in out
    assert ('"GET /api/health HTTP/1.1" 200' in out) is access_log, out


def test_serve_says_which_store_it_uses(tmp_path):
    out, _, _ = _serve_output(tmp_path, "127.0.0.1", {})
    assert f"store: sqlite:///{tmp_path / '.jurist' / 'jurist.db'}" in out
    out, _, _ = _serve_output(tmp_path, "127.0.0.1", {}, "--db", "other.db")
    assert f"store: sqlite:///{tmp_path / 'other.db'}" in out and (tmp_path / "other.db").is_file()


def test_a_busy_port_is_a_clear_error_before_any_banner(tmp_path):
    """serve and proxy: a port another process listens on says so, with the fix, and prints no banner."""
    import socket

    from tests.conftest import run_cli

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {"JURIST_HOME": str(tmp_path / ".jurist")}
        for args in (["serve"], ["proxy", "--upstream", "http://127.0.0.1:9/v1"]):
            r = run_cli(*args, "--port", str(port), env=env, cwd=tmp_path)
            assert r.returncode == 2, (args, r.stdout, r.stderr)
            message = " ".join(r.stderr.split())
            assert f"cannot listen on 127.0.0.1:{port}" in message and f"--port {port + 1}" in message
            assert "jurist serving" not in r.stdout and "jurist proxy on" not in r.stdout


def test_serve_upstream_gates_as_the_proxy_does_and_sends_its_api_key(tmp_path, provider):
    """`serve --upstream` is `jurist proxy` beside the rest: the same gate (comprehensiveness, up to 2
    retries), the chat page named in the banner, and --api-key as the upstream's key."""
    import json as _json

    from jurist.testing import Reply

    provider.default = Reply(text=_json.dumps({"score": 5, "comprehensive": True, "reasoning": "covers it"}))
    env = {"JURIST_JUDGE": "openai/judge", "OPENAI_BASE_URL": provider.base_url, "OPENAI_API_KEY": "sk-judge"}
    port = free_port()
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("JURIST_", "OPENAI_", "ANTHROPIC_"))}
    full_env.update(JURIST_HOME=str(tmp_path / ".jurist"), COLUMNS="200", **env)
    proc = subprocess.Popen([sys.executable, "-c", RUN, "serve", "--port", str(port), "--upstream", provider.base_url,
                             "--api-key", "sk-upstream"],
                            cwd=tmp_path, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=2):
                    break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read() if proc.stdout else ""
                time.sleep(0.1)
        body = _json.dumps({"model": "m", "messages": [{"role": "user", "content": "Hi?"}]}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=body,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as r:
            record = _json.loads(r.read())["jurist"]
    finally:
        proc.terminate()
        out = proc.communicate(timeout=15)[0]
    assert "gate: comprehensiveness, blocking, up to 2 retries; chat page: /chat" in " ".join(out.split()), out
    # judged before it was sent: the answer carries its evaluation
    assert record["accept_reason"] == "passed"
    assert [(e["attempt"], e["comprehensive"]) for e in record["evaluations"]] == [(1, True)]
    keys = [r["headers"].get("authorization") for r in provider.requests]
    assert "Bearer sk-upstream" in keys and "Bearer sk-judge" in keys, keys  # the answer's call, the judge's


def test_serve_api_key_needs_an_upstream(tmp_path):
    from tests.conftest import run_cli

    r = run_cli("serve", "--api-key", "sk-x", env={"JURIST_HOME": str(tmp_path / ".jurist")}, cwd=tmp_path)
    assert r.returncode == 2 and "--api-key" in r.stderr and "--upstream" in r.stderr, (r.stdout, r.stderr)
